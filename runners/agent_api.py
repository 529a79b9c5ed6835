"""The agent API (`/api/agent/v1/`): claim, heartbeat, log upload, complete, read an attempt. Runner tokens only."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from django.http import FileResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.validators import ProhibitSurrogateCharactersValidator
from rest_framework.views import APIView

from ingest import storage
from runners import services
from runners.authentication import IsRunner, RunnerTokenAuthentication


class AcceleratorsInput(serializers.Serializer):
    model = serializers.CharField(allow_blank=True, max_length=200)
    count = serializers.IntegerField(min_value=0, max_value=4096)
    memory_gb = serializers.FloatField(allow_null=True, required=False, default=None)
    indexes = serializers.ListField(child=serializers.IntegerField(min_value=0), required=False, default=list)


class ClaimInput(serializers.Serializer):
    name = serializers.CharField(max_length=120, required=False, default="")
    accelerators = AcceleratorsInput()
    free_indexes = serializers.ListField(child=serializers.IntegerField(min_value=0), max_length=4096)
    cpus = serializers.IntegerField(min_value=0, required=False, default=0)
    memory_gb = serializers.FloatField(allow_null=True, required=False, default=None)
    # name -> version, as the agent reports them (runner_agent.hardware.software) and the operators' page prints them
    software = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=1000), required=False,
                                     default=dict)
    # benchmark → the sha256 the runner's operator declared for its copy of the dataset ("" if none)
    datasets = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=64), required=False,
                                     default=dict)
    runs_implementations = serializers.BooleanField(required=False, default=False)
    inventory = serializers.CharField(allow_blank=True, required=False, default="", trim_whitespace=False)

    def validate_software(self, value: dict[str, str]) -> dict[str, str]:
        return _names_checked(value, "software packages")

    def validate_datasets(self, value: dict[str, str]) -> dict[str, str]:
        return _names_checked(value, "benchmarks")


_SURROGATES = re.compile("[\ud800-\udfff]")


def _names_checked(value: dict[str, str], what: str) -> dict[str, str]:
    """A report's names (the values are CharFields, which refuse NUL and surrogates themselves): bounded, and
    neither of those, which PostgreSQL's jsonb cannot hold (the claim failed with a 500 there)."""
    if len(value) > 1000 or any(len(key) > 200 for key in value):
        raise serializers.ValidationError(f"At most 1000 {what}, each named in at most 200 characters.")
    if any("\x00" in key or _SURROGATES.search(key) for key in value):
        raise serializers.ValidationError("Null and surrogate characters are not allowed in names.")
    return value


class PrintedText(serializers.CharField):
    """Text a job printed, which may hold a NUL byte or a lone surrogate (undecodable output, escaped):
    accepted, where CharField refuses both. The services drop a NUL before storing (PostgreSQL text cannot
    hold one); a surrogate, which UTF-8 cannot encode, becomes U+FFFD here. A refused heartbeat lost its
    lines, and a refused completion left the attempt to expire and the job to run again."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_blank=True, trim_whitespace=False, **kwargs)
        self.validators = [v for v in self.validators
                           if not isinstance(v, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator)]

    def to_internal_value(self, data: Any) -> str:
        return _SURROGATES.sub("\ufffd", super().to_internal_value(data))


class HeartbeatInput(serializers.Serializer):
    progress = serializers.FloatField(allow_null=True, required=False, default=None)
    log_lines = serializers.ListField(child=PrintedText(), required=False, default=list, max_length=500)
    elapsed_seconds = serializers.FloatField(allow_null=True, required=False, default=None)


class CompleteInput(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["finished", "failed", "cancelled", "timeout"])
    exit_code = serializers.IntegerField(allow_null=True, required=False, default=None)
    output_tail = PrintedText(required=False, default="")
    log_sha256 = serializers.CharField(allow_null=True, required=False, default=None)
    elapsed_seconds = serializers.FloatField(allow_null=True, required=False, default=None)


class PlainTextParser(BaseParser):
    media_type = "text/plain"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> bytes:
        return stream.read()


class AgentView(APIView):
    authentication_classes = [RunnerTokenAuthentication]
    permission_classes = [IsRunner]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "agent"

    @property
    def runner(self) -> Any:
        return self.request.user.runner

    def secret(self) -> str:
        return self.request.headers.get("X-Attempt-Secret", "")

    def handle_exception(self, exc: Exception) -> Response:
        # The refusals every attempt endpoint shares.
        if isinstance(exc, services.StaleAttempt):
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        if isinstance(exc, services.UnknownAttempt):
            return Response({"detail": "No such attempt for this runner and secret."},
                            status=status.HTTP_404_NOT_FOUND)
        if isinstance(exc, services.JobError):
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return super().handle_exception(exc)


class ClaimApi(AgentView):
    @extend_schema(exclude=True)
    def post(self, request: Request) -> Response:
        data = ClaimInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        report = services.Report(
            name=v["name"], accelerator_model=v["accelerators"]["model"], accelerator_count=v["accelerators"]["count"],
            accelerator_memory_gb=v["accelerators"]["memory_gb"], free_indexes=tuple(v["free_indexes"]),
            cpus=v["cpus"], memory_gb=v["memory_gb"], software=v["software"], datasets=v["datasets"],
            runs_implementations=v["runs_implementations"], inventory=v["inventory"])
        claimed = services.job_claim(runner=self.runner, report=report)
        if claimed is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        job, attempt, secret = claimed
        return Response({
            "job": {"id": job.pk, "kind": job.kind, "module": job.module, "config": job.config,
                    "time_limit_seconds": job.time_limit_seconds, **services.job_code(job)},
            "attempt": {"id": attempt.pk, "number": attempt.number, "secret": secret,
                        "lease_seconds": int(settings.PODIUM_RUNNER_LEASE.total_seconds()),
                        "heartbeat_seconds": settings.PODIUM_RUNNER_HEARTBEAT},
            "assignment": {"accelerator_indexes": attempt.accelerator_indexes},
        })


class HeartbeatApi(AgentView):
    @extend_schema(exclude=True)
    def post(self, request: Request, attempt_id: int) -> Response:
        data = HeartbeatInput(data=request.data)
        data.is_valid(raise_exception=True)
        lease, cancel = services.attempt_heartbeat(attempt_id=attempt_id, runner=self.runner, secret=self.secret(),
                                                   progress=data.validated_data["progress"],
                                                   log_lines=data.validated_data["log_lines"])
        return Response({"lease_seconds": lease, "cancel": cancel})


class LogApi(AgentView):
    parser_classes = [PlainTextParser]

    @extend_schema(exclude=True)
    def put(self, request: Request, attempt_id: int) -> Response:
        body = request.data if isinstance(request.data, bytes) else b""
        attempt = services.attempt_log_upload(attempt_id=attempt_id, runner=self.runner, secret=self.secret(),
                                              data=body, sha256=request.headers.get("X-Content-SHA256", ""))
        return Response({"sha256": attempt.log_sha256, "bytes": attempt.log_bytes})


class CompleteApi(AgentView):
    @extend_schema(exclude=True)
    def post(self, request: Request, attempt_id: int) -> Response:
        data = CompleteInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        answer = services.attempt_complete(attempt_id=attempt_id, runner=self.runner, secret=self.secret(),
                                           outcome=v["outcome"], exit_code=v["exit_code"],
                                           output_tail=v["output_tail"], elapsed_seconds=v["elapsed_seconds"],
                                           log_sha256=v["log_sha256"])
        return Response(answer)


class AttemptApi(AgentView):
    @extend_schema(exclude=True)
    def get(self, request: Request, attempt_id: int) -> Response:
        return Response(services.attempt_read(attempt_id=attempt_id, runner=self.runner, secret=self.secret()))


class ImplementationDownloadApi(AgentView):
    """The implementation's canonical .tar.gz, for the attempt that runs it (and no one else)."""

    @extend_schema(exclude=True)
    def get(self, request: Request, attempt_id: int) -> FileResponse:
        archive = services.attempt_implementation(attempt_id=attempt_id, runner=self.runner, secret=self.secret())
        handle = storage.bundle_storage().open(archive.archive_key, "rb")
        response = FileResponse(handle, content_type="application/gzip")
        response["X-Content-SHA256"] = archive.archive_sha256
        return response
