from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

# Registers the token scheme's OpenAPI extension before any schema is drawn. Here, not in an AppConfig:
# drf-spectacular costs 0.2 s to import, which workers and management commands never need.
from accounts import schema  # noqa: F401
from accounts.urls import auth_urlpatterns
from config.health import healthz
from ingest.urls import api_urlpatterns as ingest_api
from leaderboard.api_urls import urlpatterns as leaderboard_api
from reviews.urls import api_urlpatterns as reviews_api
from runners.urls import agent_urlpatterns as agent_api
from runners.urls import api_urlpatterns as runners_api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("accounts/", include(auth_urlpatterns)),
    path("accounts/", include("accounts.urls")),
    path("api/v1/", include(([*ingest_api, *leaderboard_api, *reviews_api, *runners_api], "api"), namespace="api")),
    path("api/agent/v1/", include((agent_api, "agent"), namespace="agent")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI, served from the site (drf-spectacular-sidecar). Not Redoc: its free build fetches its
    # logo from redoc.ly on every visit.
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("", include("ingest.urls")),
    path("", include("reviews.urls")),
    path("", include("runners.urls")),
    path("", include("leaderboard.urls")),
]
