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
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import TokenScopeAllows
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
    queue = serializers.SerializerMethodField(help_text="position and start estimate while queued")
    attempts = AttemptOutput(many=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.SerializerMethodField()

    def get_queue(self, job: ReproductionJob) -> dict[str, Any]:
        return services.queue_estimate(job)

    def get_url(self, job: ReproductionJob) -> str:
        return self.context["request"].build_absolute_uri(job.get_absolute_url())


def _jobs(request: Request) -> Any:
    return (ReproductionJob.objects.filter(result__in=visible_results(request.user).values("pk"))
            .select_related("run").prefetch_related("attempts__runner").order_by("-created_at", "-pk"))


class ReproductionListApi(APIView):
    permission_classes = [AllowAny, TokenScopeAllows]

    @extend_schema(operation_id="reproductions_list", responses={200: ReproductionOutput(many=True)},
                   parameters=[OpenApiParameter("result", int), OpenApiParameter("state", str),
                               OpenApiParameter("kind", str)])
    def get(self, request: Request) -> Response:
        jobs = _jobs(request)
        errors = {}
        result = request.query_params.get("result")
        if result is not None:
            if not result.isdigit():
                errors["result"] = ["A result id (a whole number)."]
            jobs = jobs.filter(result_id=result) if result.isdigit() else jobs
        for name, choices in (("state", ReproductionJob.State.choices), ("kind", ReproductionJob.Kind.choices)):
            value = request.query_params.get(name)
            if value is not None:
                if value not in dict(choices):
                    errors[name] = [f"One of: {', '.join(dict(choices))}."]
                jobs = jobs.filter(**{name: value})
        if errors:
            return Response(errors, status=400)
        return Response(ReproductionOutput(jobs[:LIST_LIMIT], many=True, context={"request": request}).data)


class ReproductionDetailApi(APIView):
    permission_classes = [AllowAny, TokenScopeAllows]

    @extend_schema(operation_id="reproductions_retrieve", responses={200: ReproductionOutput})
    def get(self, request: Request, pk: int) -> Response:
        job = get_object_or_404(_jobs(request), pk=pk)
        return Response(ReproductionOutput(job, context={"request": request}).data)
