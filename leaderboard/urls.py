from django.urls import path

from leaderboard import views

app_name = "leaderboard"
urlpatterns = [
    path("", views.home, name="home"),
    path("rounds/<str:slug>/", views.round_table, name="round"),
    path("systems/<int:pk>/", views.system_detail, name="system"),
    path("results/<int:pk>/", views.result_detail, name="result"),
]
