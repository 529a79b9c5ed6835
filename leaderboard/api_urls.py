"""Routes of the public read API, included under /api/v1/ in the "api" namespace (config/urls.py)."""

from rest_framework.routers import SimpleRouter

from leaderboard import api

router = SimpleRouter()
router.register("rounds", api.RoundApi, basename="round")
router.register("benchmarks", api.BenchmarkApi, basename="benchmark")
router.register("organizations", api.OrganizationApi, basename="organization")
router.register("systems", api.SystemApi, basename="system")
router.register("results", api.ResultApi, basename="result")
router.register("runs", api.RunApi, basename="run")
router.register("findings", api.FindingApi, basename="finding")

urlpatterns = router.urls
