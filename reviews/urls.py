from django.urls import path

from reviews import api, views

app_name = "reviews"
urlpatterns = [
    path("results/<int:result_pk>/flags/new/", views.flag_create, name="flag_create"),
    path("results/<int:result_pk>/borrow/", views.borrow, name="borrow"),
    path("flags/<int:pk>/", views.flag_detail, name="flag"),
    path("flags/<int:pk>/comment/", views.flag_comment, name="flag_comment"),
    path("flags/<int:pk>/decision/", views.flag_decide, name="flag_decide"),
    path("flags/<int:pk>/resubmit/", views.flag_resubmit, name="flag_resubmit"),
    path("rounds/<str:slug>/review/", views.dashboard, name="dashboard"),
    path("notifications/", views.notifications, name="notifications"),
]

api_urlpatterns = [
    path("flags/", api.FlagListApi.as_view(), name="review-flags"),
    path("flags/<int:pk>/", api.FlagDetailApi.as_view(), name="review-flag"),
    path("flags/<int:pk>/comments/", api.FlagCommentApi.as_view(), name="review-flag-comments"),
    path("flags/<int:pk>/decision/", api.FlagDecisionApi.as_view(), name="review-flag-decision"),
    path("flags/<int:pk>/resubmission/", api.FlagResubmissionApi.as_view(), name="review-flag-resubmission"),
    path("borrowings/", api.BorrowingListApi.as_view(), name="review-borrowings"),
]
