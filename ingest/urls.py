from django.urls import path

from ingest import api, views

app_name = "ingest"
urlpatterns = [
    path("submit/", views.upload, name="upload"),
    path("submissions/", views.submission_list, name="submissions"),
    path("submissions/<int:pk>/", views.submission_detail, name="submission"),
    path("submissions/<int:pk>/status/", views.submission_status_fragment, name="submission_status"),
    path("submissions/<int:pk>/make-current/", views.submission_make_current, name="submission_make_current"),
    path("submissions/<int:pk>/report.json", views.submission_report, name="submission_report"),
    path("results/<int:pk>/runs/<int:position>/log", views.run_log, name="run_log"),
]

api_urlpatterns = [
    path("submissions/", api.SubmissionListCreateApi.as_view(), name="api_submissions"),
    path("submissions/<int:pk>/", api.SubmissionDetailApi.as_view(), name="api_submission"),
]
