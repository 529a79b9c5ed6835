from django.urls import path, re_path

from leaderboard import logs, pages, views
from leaderboard.chart_urls import urlpatterns as chart_urlpatterns

app_name = "leaderboard"
urlpatterns = [
    path("", pages.home, name="home"),
    path("rounds/<str:slug>/", views.round_table, name="round"),
    re_path(r"^rounds/(?P<slug>[a-z0-9][a-z0-9.-]*)/export\.(?P<fmt>csv|json)$", views.round_export,
            name="round_export"),
    path("systems/<int:pk>/", views.system_detail, name="system"),
    path("results/<int:pk>/", views.result_detail, name="result"),
    # The raw log as uploaded stays at ingest's results/<pk>/runs/<position>/log; the viewer is the run's page.
    path("results/<int:pk>/runs/<int:position>/", logs.run_log, name="log"),
    path("results/<int:pk>/runs/<int:position>/raw", logs.run_log_raw, name="log_raw"),
    path("benchmarks/", pages.benchmark_list, name="benchmarks"),
    path("benchmarks/<str:key>/", pages.benchmark_detail, name="benchmark"),
    path("organizations/", pages.organization_list, name="organizations"),
    path("organizations/<slug:slug>/", pages.organization_detail, name="organization"),
    path("search/", pages.search, name="search"),
    path("guides/", pages.guide_list, name="guides"),
    path("guides/<str:name>/", pages.guide, name="guide"),
    *chart_urlpatterns,
]
