"""Review API: flags, comments, decisions and borrowing, with the permissions of the pages."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import TokenScopeAllows
from accounts.viewer import signed_in
from ingest.api import UploadOutput, upload_answer
from ingest.services.uploads import saved_upload
from ingest.visibility import visible_results
from reviews import access, services
from reviews.models import Borrowing, Flag


class CommentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    author = serializers.CharField(source="author.username")
    organization = serializers.CharField(source="organization.slug", allow_null=True, default=None)
    body = serializers.CharField()
    private = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class FlagOutput(serializers.Serializer):
    id = serializers.IntegerField()
    round = serializers.CharField(source="round.slug")
    result = serializers.IntegerField(source="result_id")
    run = serializers.IntegerField(source="run.position", allow_null=True, default=None)
    raised_by_organization = serializers.CharField(source="raised_by_organization.slug", allow_null=True,
                                                   default=None)
    rule = serializers.CharField()
    anchor_file = serializers.CharField()
    anchor_line = serializers.IntegerField(allow_null=True)
    description = serializers.CharField()
    state = serializers.CharField()
    outcome = serializers.CharField()
    scaling_factor = serializers.FloatField(allow_null=True)
    decision_note = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)
    resubmission = serializers.IntegerField(source="resubmission_id", allow_null=True)
    deadline = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    comments = serializers.SerializerMethodField()

    def get_comments(self, flag: Flag) -> list[dict[str, Any]]:
        comments = access.visible_comments(self.context["request"].user, flag)
        return CommentOutput(comments, many=True).data


class FlagInput(serializers.Serializer):
    result = serializers.IntegerField()
    rule = serializers.CharField(max_length=200)
    description = serializers.CharField()
    anchor_file = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)
    anchor_line = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
    run = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)


class CommentInput(serializers.Serializer):
    body = serializers.CharField()
    private = serializers.BooleanField(required=False, default=False)


class DecisionInput(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=Flag.Outcome.choices)
    note = serializers.CharField(required=False, default="", allow_blank=True)
    scaling_factor = serializers.FloatField(required=False, allow_null=True, default=None)


class BorrowingOutput(serializers.Serializer):
    id = serializers.IntegerField()
    round = serializers.CharField(source="round.slug")
    organization = serializers.CharField(source="organization.slug")
    system = serializers.CharField(source="system_slug")
    benchmark = serializers.CharField(source="benchmark_key")
    entry = serializers.IntegerField(source="entry_id")
    source = serializers.IntegerField(source="source_id")
    submission = serializers.IntegerField(source="submission_id", allow_null=True)
    result = serializers.IntegerField(source="result_id", allow_null=True)
    state = serializers.CharField()
    created_at = serializers.DateTimeField()


class BorrowingInput(serializers.Serializer):
    entry = serializers.IntegerField(help_text="Your result (current version) that borrows")
    source = serializers.IntegerField(help_text="The other organization's result to borrow from")
    bundle = serializers.FileField(help_text="The entry's bundle with the borrowed hyperparameters")


class ReviewApiView(APIView):
    """Base of the review endpoints; the services' refusals are answered by core.api."""


def _flags(request: Request) -> Any:
    return access.visible_flags(request.user).select_related(
        "round", "run", "raised_by_organization", "result").prefetch_related("comments__author",
                                                                             "comments__organization")


class FlagListApi(ReviewApiView):
    permission_classes = [AllowAny, TokenScopeAllows]

    @extend_schema(operation_id="flags_list", responses={200: FlagOutput(many=True)})
    def get(self, request: Request) -> Response:
        flags = _flags(request)
        for name in ("round", "result", "state"):
            value = request.query_params.get(name)
            if value:
                flags = flags.filter(**{"round__slug" if name == "round" else name: value})
        return Response(FlagOutput(flags[:500], many=True, context={"request": request}).data)

    @extend_schema(operation_id="flags_create", request=FlagInput, responses={201: FlagOutput})
    def post(self, request: Request) -> Response:
        if not request.user.is_authenticated:
            return Response({"detail": "Sign in or send a token."}, status=status.HTTP_401_UNAUTHORIZED)
        data = FlagInput(data=request.data)
        data.is_valid(raise_exception=True)
        result = visible_results(request.user).filter(pk=data.validated_data["result"]).first()
        if result is None:
            return Response({"detail": "No such result."}, status=status.HTTP_404_NOT_FOUND)
        flag = services.flag_raise(actor=signed_in(request), result=result, rule=data.validated_data["rule"],
                                   description=data.validated_data["description"],
                                   anchor_file=data.validated_data["anchor_file"],
                                   anchor_line=data.validated_data["anchor_line"],
                                   run_position=data.validated_data["run"])
        return Response(FlagOutput(flag, context={"request": request}).data, status=status.HTTP_201_CREATED)


class FlagDetailApi(ReviewApiView):
    permission_classes = [AllowAny, TokenScopeAllows]

    @extend_schema(operation_id="flags_retrieve", responses={200: FlagOutput})
    def get(self, request: Request, pk: int) -> Response:
        flag = get_object_or_404(_flags(request), pk=pk)
        return Response(FlagOutput(flag, context={"request": request}).data)


class FlagCommentApi(ReviewApiView):
    permission_classes = [IsAuthenticated, TokenScopeAllows]

    @extend_schema(operation_id="flags_comment", request=CommentInput, responses={201: CommentOutput})
    def post(self, request: Request, pk: int) -> Response:
        flag = access.access_flag(request.user, pk)
        data = CommentInput(data=request.data)
        data.is_valid(raise_exception=True)
        comment = services.flag_comment(actor=signed_in(request), flag=flag, **data.validated_data)
        return Response(CommentOutput(comment).data, status=status.HTTP_201_CREATED)


class FlagDecisionApi(ReviewApiView):
    permission_classes = [IsAuthenticated, TokenScopeAllows]

    @extend_schema(operation_id="flags_decide", request=DecisionInput, responses={200: FlagOutput})
    def post(self, request: Request, pk: int) -> Response:
        flag = access.access_flag(request.user, pk)
        data = DecisionInput(data=request.data)
        data.is_valid(raise_exception=True)
        flag = services.flag_decide(actor=signed_in(request), flag=flag, **data.validated_data)
        return Response(FlagOutput(flag, context={"request": request}).data)


class ResubmissionInput(serializers.Serializer):
    bundle = serializers.FileField(help_text="The corrected bundle: the flagged entry alone (.tar.gz, .tgz or .zip)")


class FlagResubmissionApi(ReviewApiView):
    permission_classes = [IsAuthenticated, TokenScopeAllows]
    throttle_scope = "uploads"

    @extend_schema(operation_id="flags_resubmit", request={"multipart/form-data": ResubmissionInput},
                   responses={201: UploadOutput})
    def post(self, request: Request, pk: int) -> Response:
        flag = access.access_flag(request.user, pk)
        data = ResubmissionInput(data=request.data)
        data.is_valid(raise_exception=True)
        with saved_upload(data.validated_data["bundle"]) as path:
            submission = services.flag_resubmit(actor=signed_in(request), flag=flag, archive=path,
                                                original_name=data.validated_data["bundle"].name)
        submission.refresh_from_db()
        return Response(upload_answer(request, submission, created=True), status=status.HTTP_201_CREATED)


class BorrowingListApi(ReviewApiView):
    permission_classes = [AllowAny, TokenScopeAllows]

    @extend_schema(operation_id="borrowings_list", responses={200: BorrowingOutput(many=True)})
    def get(self, request: Request) -> Response:
        visible = visible_results(request.user).values("pk")
        borrowings = Borrowing.objects.filter(entry__in=visible).select_related("round", "organization")
        return Response(BorrowingOutput(borrowings[:500], many=True).data)

    @extend_schema(operation_id="borrowings_create", request={"multipart/form-data": BorrowingInput},
                   responses={201: BorrowingOutput})
    def post(self, request: Request) -> Response:
        if not request.user.is_authenticated:
            return Response({"detail": "Sign in or send a token."}, status=status.HTTP_401_UNAUTHORIZED)
        data = BorrowingInput(data=request.data)
        data.is_valid(raise_exception=True)
        results = visible_results(request.user).select_related("round", "organization", "benchmark")
        entry = results.filter(pk=data.validated_data["entry"]).first()
        source = results.filter(pk=data.validated_data["source"]).first()
        if entry is None or source is None:
            return Response({"detail": "No such entry or source."}, status=status.HTTP_404_NOT_FOUND)
        with saved_upload(data.validated_data["bundle"]) as path:
            borrowing = services.borrowing_start(actor=signed_in(request), entry=entry, source=source, archive=path,
                                                 original_name=data.validated_data["bundle"].name)
        borrowing.refresh_from_db()
        return Response(BorrowingOutput(borrowing).data, status=status.HTTP_201_CREATED)
