from django.urls import path, re_path

from leaderboard import views
from leaderboard.chart_urls import urlpatterns as chart_urlpatterns

app_name = "leaderboard"
urlpatterns = [
    path("", views.home, name="home"),
    path("rounds/<str:slug>/", views.round_table, name="round"),
    re_path(r"^rounds/(?P<slug>[a-z0-9][a-z0-9.-]*)/export\.(?P<fmt>csv|json)$", views.round_export,
            name="round_export"),
    path("systems/<int:pk>/", views.system_detail, name="system"),
    path("results/<int:pk>/", views.result_detail, name="result"),
    *chart_urlpatterns,
]
