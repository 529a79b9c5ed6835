"""Submitter pages: upload, history, live status, report download, and the log files themselves."""

from __future__ import annotations

import json
from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from accounts.access import UPLOAD_ROLES, organizations_of
from config import ratelimit
from ingest import bundle_files, selectors, storage
from ingest.api import upload_from_request
from ingest.models import Submission
from ingest.services.submissions import UploadRefused, queue_position
from leaderboard.models import Round
from leaderboard.selectors import visible_results

UPLOADS_PER_HOUR = 60


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _refuse(request: HttpRequest, message: str, status: int, context: dict) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"detail": message}, status=status)
    messages.error(request, message)
    return render(request, "ingest/upload.html", context, status=status)


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    organizations = list(organizations_of(request.user, UPLOAD_ROLES))
    context = {"rounds": Round.objects.open_for_uploads().order_by("submission_deadline"),
               "organizations": organizations}
    if request.method != "POST":
        return render(request, "ingest/upload.html", context)
    if not ratelimit.allow(f"upload:{request.user.pk}", limit=UPLOADS_PER_HOUR, period_seconds=3600):
        return _refuse(request, f"At most {UPLOADS_PER_HOUR} uploads an hour; try again later.", 429, context)
    data: dict = {
        "round": request.POST.get("round", ""),
        "organization": request.POST.get("organization", ""),
        "benchmark": request.POST.get("benchmark", "").strip() or None,
        "bundle": request.FILES.get("bundle"),
        "system": request.FILES.get("system"),
        "results": request.FILES.getlist("results"),
    }
    if data["bundle"] is None and not (data["system"] and data["results"]):
        return _refuse(request, "Choose a bundle (.tar.gz or .zip), or a system JSON and its result files.", 400,
                       context)
    try:
        outcome = upload_from_request(request.user, data)
    except UploadRefused as exc:
        return _refuse(request, str(exc), 400, context)
    except Exception as exc:  # serializers.ValidationError from the round/organization lookup
        detail = getattr(exc, "detail", None)
        if detail is None:
            raise
        text = " ".join(str(m) for values in (detail.values() if isinstance(detail, dict) else [detail])
                        for m in (values if isinstance(values, list) else [values]))
        return _refuse(request, text, 400, context)
    submission = outcome.submission
    if _wants_json(request):
        return JsonResponse({"id": submission.pk, "state": submission.state, "url": submission.get_absolute_url(),
                             "created": outcome.created}, status=201 if outcome.created else 200)
    if not outcome.created:
        messages.info(request, "These exact bytes were uploaded before; here is that submission.")
    return redirect(submission)


@login_required
def submission_list(request: HttpRequest) -> HttpResponse:
    submissions = (
        selectors.submissions_visible_to(request.user)
        .filter(organization__in=organizations_of(request.user))
        .select_related("round", "organization", "uploaded_by")[:200]
    )
    return render(request, "ingest/submissions.html",
                  {"submissions": submissions, "organizations": organizations_of(request.user)})


def _visible_submission(request: HttpRequest, pk: int) -> Submission:
    return get_object_or_404(
        selectors.submissions_visible_to(request.user).select_related("round", "organization", "uploaded_by"), pk=pk
    )


def _status_context(request: HttpRequest, submission: Submission) -> dict:
    findings_by_file: dict[str, list] = defaultdict(list)
    for finding in submission.findings.order_by("file", "line", "id"):
        findings_by_file[finding.file or "(bundle)"].append(finding)
    return {
        "submission": submission,
        "queue_position": queue_position(submission),
        "elapsed": selectors.submission_status(submission)["elapsed_seconds"],
        "results": submission.results.select_related("system", "benchmark").order_by("system_slug", "benchmark_key"),
        "findings_by_file": dict(findings_by_file),
        "platform_error": selectors.PLATFORM_ERROR if submission.state == Submission.ERROR else "",
    }


def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _visible_submission(request, pk)
    return render(request, "ingest/submission.html", _status_context(request, submission))


@require_GET
def submission_status_fragment(request: HttpRequest, pk: int) -> HttpResponse:
    """The live part of the status page, polled (htmx) until the state is final."""
    submission = _visible_submission(request, pk)
    return render(request, "ingest/_submission_status.html", _status_context(request, submission))


@require_GET
def submission_report(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _visible_submission(request, pk)
    body = json.dumps(selectors.submission_status(submission, request), indent=2)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="podium-submission-{submission.pk}.json"'
    return response


@require_GET
def run_log(request: HttpRequest, pk: int, position: int) -> HttpResponse:
    """A run's log as uploaded, for those who may see the result (never a path around the embargo)."""
    result = get_object_or_404(visible_results(request.user).select_related("submission"), pk=pk)
    run = get_object_or_404(result.runs, position=position)
    submission = result.submission
    if not submission.bundle_path:
        raise Http404("This result was imported from a results tree; its files are not stored in Podium.")
    try:
        bundle = storage.open_verified(submission.bundle_path, submission.sha256)
    except storage.StorageError:
        raise Http404("The stored bundle is unavailable.") from None
    data = bundle_files.read_member(bundle, run.file)
    if data is None:
        raise Http404("File not found in the bundle.")
    response = HttpResponse(data, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{run.name}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response

