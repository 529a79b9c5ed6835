"""Public read API of reproductions: each job's state, the numbers behind its verdict, its attempts.

Not the agent API (runners/agent_api.py): this one is for people and scripts, with the embargo of
the results the jobs reproduce. No shared ETag or body cache here: a job changes state without any
new result, which is what the cached read API keys on.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotAuthenticated, PermissionDenied
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import TokenScopeAllows
from accounts.viewer import signed_in, viewer_of
from core.numbers import ascii_whole
from ingest.models import Result
from ingest.visibility import visible_results
from runners import services
from runners.models import ReproductionJob

LIST_LIMIT = 500


class AttemptOutput(serializers.Serializer):
    number = serializers.IntegerField()
    runner = serializers.CharField(source="runner.name")
    outcome = serializers.CharField(help_text="Empty while it runs")
    exit_code = serializers.IntegerField(allow_null=True)
    elapsed_seconds = serializers.FloatField(allow_null=True)
    log_sha256 = serializers.CharField()
    leased_at = serializers.DateTimeField()
    completed_at = serializers.DateTimeField(allow_null=True)
    inventory = serializers.CharField(help_text="The hardware inventory its runner reported (nvidia-smi -q)")


class ReproductionOutput(serializers.Serializer):
    id = serializers.IntegerField()
    result = serializers.IntegerField(source="result_id")
    run = serializers.IntegerField(source="run.position", allow_null=True, default=None)
    kind = serializers.CharField(help_text="convergence or timing")
    state = serializers.CharField(help_text="queued, leased, running, judging, reproduced, mismatch, failed, cancelled")
    verdict_detail = serializers.JSONField(help_text="The numbers behind the verdict and the tolerance used")
    failure_reason = serializers.CharField()
    accelerator_model = serializers.CharField()
    accelerator_count = serializers.IntegerField()
    time_limit_seconds = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    implementation = serializers.SerializerMethodField(help_text="The shipped code it runs, if not a module")
    system_config = serializers.CharField()
    queue = serializers.SerializerMethodField(help_text="position and start estimate while queued")
    attempts = AttemptOutput(many=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.SerializerMethodField()

    def get_queue(self, job: ReproductionJob) -> dict[str, Any]:
        return services.queue_estimate(job)

    def get_implementation(self, job: ReproductionJob) -> dict[str, Any] | None:
        impl = job.implementation
        if impl is None:
            return None
        return {"id": impl.pk, "path": impl.path, "digest": impl.digest,
                "url": self.context["request"].build_absolute_uri(impl.get_absolute_url())}

    def get_url(self, job: ReproductionJob) -> str:
        return self.context["request"].build_absolute_uri(job.get_absolute_url())


def _jobs(request: Request) -> Any:
    return (ReproductionJob.objects.filter(result__in=visible_results(request.user).values("pk"))
            .select_related("run", "implementation", "result").prefetch_related("attempts__runner")
            .order_by("-created_at", "-pk"))


class ReproductionInput(serializers.Serializer):
    result = serializers.IntegerField(min_value=1)
    kind = serializers.ChoiceField(choices=ReproductionJob.Kind.choices, default=ReproductionJob.Kind.CONVERGENCE)
    run = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None,
                                   help_text="The run's position (0-based); default: the first counted run")
    time_limit_seconds = serializers.IntegerField(min_value=1, max_value=services.MAX_TIME_LIMIT_S, default=600)
    max_attempts = serializers.IntegerField(min_value=1, max_value=services.MAX_ATTEMPTS, default=3)


def _may_manage(request: Request, job_or_result: ReproductionJob | Result) -> None:
    """Site staff and the round's chairs request, cancel and retry reproductions; anyone else is refused."""
    if not request.user.is_authenticated:
        raise NotAuthenticated()
    result = job_or_result.result if isinstance(job_or_result, ReproductionJob) else job_or_result
    if not viewer_of(request.user).chairs(result.round_id):
        raise PermissionDenied("Site operators and the round's chairs request reproductions.")


class JobApiView(APIView):
    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, services.JobError):
            return Response({"detail": str(exc)}, status=400)
        return super().handle_exception(exc)


class ReproductionListApi(JobApiView):
    permission_classes = [AllowAny, TokenScopeAllows]

    @extend_schema(operation_id="reproductions_create", request=ReproductionInput,
                   responses={201: ReproductionOutput})
    def post(self, request: Request) -> Response:
        data = ReproductionInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if not request.user.is_authenticated:
            raise NotAuthenticated()
        result = get_object_or_404(visible_results(request.user), pk=v["result"])
        _may_manage(request, result)
        job = services.job_create(result=result, kind=v["kind"], actor=signed_in(request), run_position=v["run"],
                                  time_limit_seconds=v["time_limit_seconds"], max_attempts=v["max_attempts"])
        return Response(ReproductionOutput(_jobs(request).get(pk=job.pk), context={"request": request}).data,
                        status=201)

    @extend_schema(operation_id="reproductions_list", responses={200: ReproductionOutput(many=True)},
                   parameters=[OpenApiParameter("result", int), OpenApiParameter("state", str),
                               OpenApiParameter("kind", str)])
    def get(self, request: Request) -> Response:
        jobs = _jobs(request)
        errors = {}
        result = request.query_params.get("result")
        if result is not None:
            result_id = ascii_whole(result)
            if result_id is None:
                errors["result"] = ["A result id (a whole number)."]
            else:
                jobs = jobs.filter(result_id=result_id)
        for name, choices in (("state", ReproductionJob.State.choices), ("kind", ReproductionJob.Kind.choices)):
            value = request.query_params.get(name)
            if value is not None:
                if value not in dict(choices):
                    errors[name] = [f"One of: {', '.join(dict(choices))}."]
                jobs = jobs.filter(**{name: value})
        if errors:
            return Response(errors, status=400)
        return Response(ReproductionOutput(jobs[:LIST_LIMIT], many=True, context={"request": request}).data)


class ReproductionActionApi(JobApiView):
    permission_classes = [AllowAny, TokenScopeAllows]
    action = ""

    def post(self, request: Request, pk: int) -> Response:
        job = get_object_or_404(_jobs(request), pk=pk)
        _may_manage(request, job)
        act = services.job_cancel if self.action == "cancel" else services.job_retry
        act(job=job, actor=signed_in(request))
        return Response(ReproductionOutput(_jobs(request).get(pk=pk), context={"request": request}).data)


class ReproductionCancelApi(ReproductionActionApi):
    action = "cancel"

    @extend_schema(operation_id="reproductions_cancel", request=None, responses={200: ReproductionOutput})
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class ReproductionRetryApi(ReproductionActionApi):
    action = "retry"

    @extend_schema(operation_id="reproductions_retry", request=None, responses={200: ReproductionOutput})
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)


class ReproductionDetailApi(APIView):
    permission_classes = [AllowAny, TokenScopeAllows]

    @extend_schema(operation_id="reproductions_retrieve", responses={200: ReproductionOutput})
    def get(self, request: Request, pk: int) -> Response:
        job = get_object_or_404(_jobs(request), pk=pk)
        return Response(ReproductionOutput(job, context={"request": request}).data)
