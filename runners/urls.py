from django.urls import path

from runners import agent_api, api, views

app_name = "runners"
urlpatterns = [
    path("reproductions/<int:pk>/", views.job_detail, name="job"),
    path("results/<int:result_pk>/reproduce/", views.job_request, name="request"),
    path("operators/runners/", views.operators, name="operators"),
    path("operators/runners/new/", views.runner_create, name="runner_create"),
    path("operators/runners/<int:pk>/enabled/", views.runner_enable, name="runner_enable"),
    path("operators/runners/<int:pk>/token/", views.runner_rotate, name="runner_rotate"),
    path("operators/runners/<int:pk>/approval/", views.runner_approve, name="runner_approve"),
    path("operators/jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("operators/jobs/<int:pk>/retry/", views.job_retry, name="job_retry"),
    path("implementations/<int:pk>/", views.implementation_detail, name="implementation"),
    path("implementations/<int:pk>/files/<path:path>", views.implementation_file, name="implementation_file"),
]

agent_urlpatterns = [
    path("claim", agent_api.ClaimApi.as_view(), name="claim"),
    path("attempts/<int:attempt_id>", agent_api.AttemptApi.as_view(), name="attempt"),
    path("attempts/<int:attempt_id>/heartbeat", agent_api.HeartbeatApi.as_view(), name="heartbeat"),
    path("attempts/<int:attempt_id>/log", agent_api.LogApi.as_view(), name="log"),
    path("attempts/<int:attempt_id>/complete", agent_api.CompleteApi.as_view(), name="complete"),
    path("attempts/<int:attempt_id>/implementation", agent_api.ImplementationDownloadApi.as_view(),
         name="implementation"),
]

api_urlpatterns = [
    path("reproductions/", api.ReproductionListApi.as_view(), name="reproduction-list"),
    path("reproductions/<int:pk>/", api.ReproductionDetailApi.as_view(), name="reproduction-detail"),
    path("reproductions/<int:pk>/cancel/", api.ReproductionCancelApi.as_view(), name="reproduction-cancel"),
    path("reproductions/<int:pk>/retry/", api.ReproductionRetryApi.as_view(), name="reproduction-retry"),
]
