"""Submission API: upload a bundle, follow its verification, download its report."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import UPLOAD_ROLES, organizations_of
from accounts.authentication import TokenScopeAllows
from ingest import selectors, storage
from ingest.bundles import LooseFile
from ingest.models import Submission
from ingest.services.submissions import UploadOutcome, UploadRefused, submission_upload, submission_upload_files
from leaderboard.models import Round


def save_upload(upload: UploadedFile, directory: Path) -> Path:
    """Write an uploaded file to disk in chunks (large bundles never sit in memory)."""
    path = directory / "upload.bin"
    with path.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return path


class UploadInput(serializers.Serializer):
    round = serializers.RegexField(r"^[a-z0-9][a-z0-9.-]*$", max_length=64,
                                   help_text="Slug of an open round, e.g. training-v6.1")
    organization = serializers.SlugField(required=False,
                                         help_text="Needed only if you may submit for several organizations")
    bundle = serializers.FileField(required=False, help_text=".tar.gz/.tgz/.zip of one submitter folder")
    system = serializers.FileField(required=False, help_text="systems/<system>.json, with result files")
    results = serializers.ListField(child=serializers.FileField(), required=False, help_text="result_*.txt files")
    benchmark = serializers.CharField(required=False, help_text="With loose files; default: from the logs")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        loose = attrs.get("system") or attrs.get("results")
        if attrs.get("bundle") and loose:
            raise serializers.ValidationError("Send either a bundle or a system JSON with result files, not both.")
        if not attrs.get("bundle") and not (attrs.get("system") and attrs.get("results")):
            raise serializers.ValidationError("Send a bundle, or a system JSON and at least one result file.")
        return attrs


def resolve_round_and_organization(user: Any, data: dict[str, Any]) -> tuple[Round, Any]:
    round_ = Round.objects.filter(slug=data["round"]).first()
    if round_ is None:
        raise serializers.ValidationError({"round": [f"No round {data['round']!r}."]})
    choices = organizations_of(user, UPLOAD_ROLES)
    if data.get("organization"):
        organization = choices.filter(slug=data["organization"]).first()
        if organization is None:
            raise serializers.ValidationError(
                {"organization": ["You may not submit for this organization (or it does not exist)."]})
    else:
        options = list(choices[:2])
        if len(options) != 1:
            raise serializers.ValidationError({"organization": [
                "You may not submit for any organization." if not options else
                "You submit for several organizations: name one."]})
        organization = options[0]
    return round_, organization


def upload_from_request(user: Any, data: dict[str, Any]) -> UploadOutcome:
    round_, organization = resolve_round_and_organization(user, data)
    if data.get("bundle"):
        with tempfile.TemporaryDirectory(dir=storage.scratch_dir()) as tmp:
            path = save_upload(data["bundle"], Path(tmp))
            return submission_upload(user=user, organization=organization, round_=round_, archive=path,
                                     original_name=data["bundle"].name)
    system = data["system"]
    return submission_upload_files(
        user=user, organization=organization, round_=round_,
        system_json=LooseFile(name=system.name, data=system.read()),
        result_files=[LooseFile(name=f.name, data=f.read()) for f in data["results"]],
        benchmark=data.get("benchmark"),
    )


class UploadOutput(serializers.Serializer):
    id = serializers.IntegerField()
    state = serializers.CharField()
    url = serializers.URLField(help_text="The submission's web page")
    status_url = serializers.URLField(help_text="Poll this for the verdict")
    created = serializers.BooleanField(help_text="False when these exact bytes were uploaded before")


def upload_answer(request: Request, submission: Submission, *, created: bool) -> dict[str, Any]:
    """The answer to an upload (UploadOutput), whichever endpoint took it."""
    return {
        "id": submission.pk,
        "state": submission.state,
        "url": request.build_absolute_uri(submission.get_absolute_url()),
        "status_url": request.build_absolute_uri(f"/api/v1/submissions/{submission.pk}/"),
        "created": created,
    }


class SubmissionSummaryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    round = serializers.CharField()
    organization = serializers.CharField()
    state = serializers.CharField()
    label = serializers.CharField()
    sha256 = serializers.CharField()
    created_at = serializers.DateTimeField()
    url = serializers.URLField()


class SubmissionResultOutput(serializers.Serializer):
    id = serializers.IntegerField()
    system = serializers.CharField()
    benchmark = serializers.CharField()
    division = serializers.CharField(allow_null=True)
    verdict = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    raw_score = serializers.FloatField(allow_null=True)
    scaling_factor = serializers.FloatField(allow_null=True)
    runs = serializers.IntegerField()
    runs_compliant = serializers.IntegerField()
    is_current = serializers.BooleanField()
    url = serializers.URLField()


class SubmissionFindingOutput(serializers.Serializer):
    severity = serializers.CharField()
    check = serializers.CharField()
    rule = serializers.CharField()
    file = serializers.CharField()
    line = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()
    excerpt = serializers.CharField()


class SubmissionStatusOutput(SubmissionSummaryOutput):
    queue_position = serializers.IntegerField(allow_null=True, help_text="1 = next; 0 = being verified")
    elapsed_seconds = serializers.FloatField()
    attempts = serializers.IntegerField()
    results = SubmissionResultOutput(many=True)
    findings = SubmissionFindingOutput(many=True)
    error = serializers.CharField(allow_null=True, help_text="Set only for a platform fault, never the bundle's")


class SubmissionListCreateApi(APIView):
    permission_classes = [IsAuthenticated, TokenScopeAllows]
    throttle_scope = "uploads"

    def get_throttles(self):  # only uploads are rate limited this tightly
        return super().get_throttles() if self.request.method == "POST" else []

    @extend_schema(operation_id="submissions_upload", request={"multipart/form-data": UploadInput},
                   responses={201: UploadOutput, 200: UploadOutput})
    def post(self, request: Request) -> Response:
        serializer = UploadInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            outcome = upload_from_request(request.user, serializer.validated_data)
        except UploadRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        body = upload_answer(request, outcome.submission, created=outcome.created)
        return Response(body, status=status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK)

    @extend_schema(operation_id="submissions_list", responses={200: SubmissionSummaryOutput(many=True)})
    def get(self, request: Request) -> Response:
        submissions = selectors.submissions_visible_to(request.user).select_related("round", "organization")[:200]
        return Response([selectors.submission_summary(s, request) for s in submissions])


class SubmissionDetailApi(APIView):
    permission_classes = [IsAuthenticated, TokenScopeAllows]

    @extend_schema(operation_id="submissions_status", responses={200: SubmissionStatusOutput})
    def get(self, request: Request, pk: int) -> Response:
        submission = get_object_or_404(selectors.submissions_visible_to(request.user), pk=pk)
        return Response(selectors.submission_status(submission, request))
