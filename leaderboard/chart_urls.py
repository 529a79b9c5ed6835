"""Charts, their JSON and the compare page; included into leaderboard.urls (app "leaderboard")."""

from django.urls import path

from leaderboard import chart_views, compare

urlpatterns = [
    path("rounds/<str:slug>/charts/", chart_views.charts_page, name="round_charts"),
    path("rounds/<str:slug>/charts/scale.json", chart_views.scale_json, name="chart_scale"),
    path("rounds/<str:slug>/charts/scaling.json", chart_views.scaling_json, name="chart_scaling"),
    path("rounds/<str:slug>/charts/spread.json", chart_views.spread_json, name="chart_spread"),
    path("benchmarks/<str:key>/history.json", chart_views.history_json, name="chart_history"),
    path("results/<int:pk>/convergence.json", chart_views.convergence_json, name="chart_convergence"),
    path("results/<int:pk>/runs.json", chart_views.run_times_json, name="chart_runs"),
    path("compare/", compare.compare_view, name="compare"),
]
