"""Submission API: upload a bundle, follow its verification, download its report."""

from __future__ import annotations

import contextlib
from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import TokenScopeAllows
from accounts.viewer import signed_in
from core.errors import NotFound
from ingest import selectors, waiting
from ingest.models import Submission
from ingest.services.submissions import UploadOutcome
from ingest.services.uploads import UploadRequest, upload_receive


class UploadInput(serializers.Serializer):
    round = serializers.RegexField(r"^[a-z0-9][a-z0-9.-]*$", max_length=64,
                                   help_text="Slug of an open round, e.g. training-v6.1")
    organization = serializers.SlugField(required=False,
                                         help_text="Needed only if you may submit for several organizations")
    bundle = serializers.FileField(required=False, help_text=".tar.gz/.tgz/.zip of one submitter folder")
    system = serializers.FileField(required=False, help_text="systems/<system>.json, with result files")
    results = serializers.ListField(child=serializers.FileField(), required=False, help_text="result_*.txt files")
    benchmark = serializers.CharField(required=False, help_text="With loose files; default: from the logs")
    make_current = serializers.BooleanField(
        required=False, default=False,
        help_text="For bytes uploaded before whose submission is no longer current: upload them again, as the "
                  "newest upload (verified again; its results become current)")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        loose = attrs.get("system") or attrs.get("results")
        if attrs.get("bundle") and loose:
            raise serializers.ValidationError("Send either a bundle or a system JSON with result files, not both.")
        if not attrs.get("bundle") and not (attrs.get("system") and attrs.get("results")):
            raise serializers.ValidationError("Send a bundle, or a system JSON and at least one result file.")
        return attrs


def upload_answer(request: Request, submission: Submission, *, created: bool) -> dict[str, Any]:
    """The answer to an upload (UploadOutput), whichever endpoint took it."""
    outcome = UploadOutcome(submission, created)
    return {
        "current": outcome.is_current,
        "detail": outcome.message,
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
    checker = serializers.CharField(help_text="The check that found it: compliance, system_desc, seed, rcp, …")
    check = serializers.CharField(help_text="Deprecated: the earlier name of `checker`")
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


class UploadOutput(serializers.Serializer):
    id = serializers.IntegerField()
    state = serializers.CharField()
    url = serializers.URLField(help_text="The submission's web page")
    status_url = serializers.URLField(help_text="Poll this for the verdict")
    created = serializers.BooleanField(help_text="False when these exact bytes were uploaded before")
    current = serializers.BooleanField(help_text="Whether this submission's results are the entries' current ones "
                                       "(false while it is being verified, or when a later upload replaced it)")
    detail = serializers.CharField(help_text="What happened, in words: 'These bytes are submission #N …'")
    status = SubmissionStatusOutput(
        required=False,
        help_text="Only with ?wait: the submission's status (as GET status_url answers it) once the verdict is in, "
                  "or when the wait ran out; absent where the server did not wait")


class SubmissionListCreateApi(APIView):
    permission_classes = [IsAuthenticated, TokenScopeAllows]
    throttle_scope = "uploads"

    def get_throttles(self):  # only uploads are rate limited this tightly
        return super().get_throttles() if self.request.method == "POST" else []

    @extend_schema(
        operation_id="submissions_upload", request={"multipart/form-data": UploadInput},
        responses={201: UploadOutput, 200: UploadOutput},
        parameters=[OpenApiParameter(
            "wait", float, required=False,
            description="Seconds to wait in the server for the verdict before answering (at most "
                        "PODIUM_STATUS_WAIT_MAX_S, default 20); the answer then carries `status` and "
                        "`Podium-Waited: true`. Without that header the server answered at once: follow "
                        "status_url.")],
    )
    def post(self, request: Request) -> Response:
        wait = request.query_params.get("wait")
        waiting.requested(wait)  # a bad wait is refused before anything is stored
        serializer = UploadInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        outcome = upload_receive(actor=signed_in(request), upload=UploadRequest(
            round=data["round"], organization=data.get("organization", ""), bundle=data.get("bundle"),
            system=data.get("system"), results=tuple(data.get("results") or ()), benchmark=data.get("benchmark"),
            make_current=data.get("make_current", False)))
        body = upload_answer(request, outcome.submission, created=outcome.created)
        waited = False
        if wait is not None:
            # The upload's own request waits for the verdict: a client that then asked for the status in a
            # request of its own cost the web server a second sign-in, lookup and answer (~3 ms of CPU) on the
            # same cores as the checks (bench/upload_latency.py).
            followed = selectors.submission_followed(request.user, outcome.submission)
            with contextlib.suppress(NotFound):  # the upload stands; its answer only lacks a status then
                submission, waited = waiting.follow(followed, outcome.submission, wait, request.META, final=True)
                if waited or submission.is_final:
                    body["status"] = selectors.submission_status(submission, request)
        response = Response(body, status=status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK)
        if waited:
            response[waiting.HEADER] = "true"
        return response

    @extend_schema(operation_id="submissions_list", responses={200: SubmissionSummaryOutput(many=True)})
    def get(self, request: Request) -> Response:
        submissions = selectors.submissions_visible_to(request.user).select_related("round", "organization")[:200]
        return Response([selectors.submission_summary(s, request) for s in submissions])


class SubmissionDetailApi(APIView):
    permission_classes = [IsAuthenticated, TokenScopeAllows]

    @extend_schema(
        operation_id="submissions_status", responses={200: SubmissionStatusOutput},
        parameters=[OpenApiParameter(
            "wait", float, required=False,
            description="Seconds to wait in the server for the state to move before answering (at most "
                        "PODIUM_STATUS_WAIT_MAX_S, default 20); the answer then carries `Podium-Waited: true`. "
                        "Without that header the server answered at once: poll again later.")],
    )
    def get(self, request: Request, pk: int) -> Response:
        # The round's and the organization's slugs are in the answer: read with the row, not one query each.
        visible = selectors.submissions_visible_to(request.user).select_related("round", "organization")
        submission = get_object_or_404(visible, pk=pk)
        submission, waited = waiting.follow(selectors.submission_followed(request.user, submission), submission,
                                            request.query_params.get("wait"), request.META)
        response = Response(selectors.submission_status(submission, request))
        if waited:
            response[waiting.HEADER] = "true"
        return response
