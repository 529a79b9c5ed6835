"""Submitter pages: upload, history, live status, report download, and the log files themselves."""

from __future__ import annotations

import json
from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.access import UPLOAD_ROLES, access_organization, organizations_of
from accounts.viewer import signed_in, viewer_of
from catalog.models import Round
from core import ratelimit
from core.errors import Refusal
from core.views import shows_refusals
from ingest import selectors, storage, waiting
from ingest.bundles import BundleRejected, read_member
from ingest.forms import UploadForm
from ingest.models import Submission
from ingest.services.submissions import queue_position, submission_is_current, submission_reupload, upload_limits
from ingest.services.uploads import upload_receive
from ingest.visibility import visible_findings, visible_results

UPLOADS_PER_HOUR = 60
MAX_SERVED_BYTES = 64 * 2**20  # of one log file


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
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _refuse(request, form.error_text(), 400, context)
    try:
        outcome = upload_receive(actor=signed_in(request), upload=form.upload_request())
    except Refusal as refusal:
        return _refuse(request, refusal.message, refusal.status, context)
    submission = outcome.submission
    if _wants_json(request):
        return JsonResponse({"id": submission.pk, "state": submission.state, "url": submission.get_absolute_url(),
                             "created": outcome.created, "current": outcome.is_current, "detail": outcome.message},
                            status=201 if outcome.created else 200)
    if not outcome.created:
        messages.info(request, outcome.message)
    return redirect(submission)


@login_required
@require_POST
@shows_refusals
def submission_make_current(request: HttpRequest, pk: int) -> HttpResponse:
    """Upload a submission's bytes again, as the newest upload (offered on its page when it is not current)."""
    submission = _visible_submission(request, pk)
    access_organization(request.user, submission.organization.slug, UPLOAD_ROLES)
    submission_reupload(actor=signed_in(request), submission=submission)
    messages.success(request, f"Submission #{submission.pk} is uploaded again as the newest upload; its verification "
                              "is under way and its results become current once it ends.")
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


def _visible_submissions(request: HttpRequest) -> QuerySet[Submission]:
    return selectors.submissions_visible_to(request.user).select_related("round", "organization", "uploaded_by")


def _visible_submission(request: HttpRequest, pk: int) -> Submission:
    return get_object_or_404(_visible_submissions(request), pk=pk)


def _status_context(request: HttpRequest, submission: Submission) -> dict:
    findings_by_file: dict[str, list] = defaultdict(list)
    for finding in (visible_findings(request.user).filter(submission=submission).select_related("run")
                    .order_by("file", "line", "id")):
        findings_by_file[finding.file or "(bundle)"].append(finding)
    return {
        "submission": submission,
        "queue_position": queue_position(submission),
        "elapsed": selectors.submission_elapsed(submission),
        # Only the results the visitor may see: a published submission may carry one held by a review.
        "results": visible_results(request.user).filter(submission=submission).select_related("system", "benchmark")
        .order_by("system_slug", "benchmark_key"),
        "findings_by_file": dict(findings_by_file),
        "platform_error": selectors.PLATFORM_ERROR if submission.state == Submission.State.ERROR else "",
        "may_make_current": (submission.is_final and submission.state != Submission.State.WITHDRAWN
                             and submission.round.phase() == Round.Phase.OPEN
                             and viewer_of(request.user).has_role(submission.organization_id, UPLOAD_ROLES)
                             and not submission_is_current(submission)),
    }


# How long one request of the status page's live part may wait in the server for the state to move.
PAGE_WAIT_S = 10


def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _visible_submission(request, pk)
    # The page asks for its live part at once: the server waits there for the state to move.
    return render(request, "ingest/submission.html",
                  {**_status_context(request, submission), "follow_now": True, "page_wait_s": PAGE_WAIT_S})


@require_GET
@shows_refusals
def submission_status_fragment(request: HttpRequest, pk: int) -> HttpResponse:
    """The live part of the status page, followed (htmx) until the state is final. Each request waits in
    the server for the state to move (ingest.waiting) and the part it returns asks again at once; where the
    server answered without waiting (no thread to spare), a second later, as the page always polled."""
    # Found through the whole rule once, then followed as the API follows it (selectors.submission_followed): for a
    # member of its organization each look is a statement built once per process, not the whole rule again.
    submission = _visible_submission(request, pk)
    submission, waited = waiting.follow(selectors.submission_followed(request.user, submission), submission,
                                        request.GET.get("wait"), request.META)
    return render(request, "ingest/_submission_status.html",
                  {**_status_context(request, submission), "follow_now": waited, "page_wait_s": PAGE_WAIT_S})


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
    wanted = run.file.split("/", 1)[1] if "/" in run.file else run.file  # without the org folder
    try:
        with storage.open_verified(submission.bundle_path, submission.sha256) as bundle:
            data = read_member(bundle, wanted, limits=upload_limits(), max_bytes=MAX_SERVED_BYTES)
    except (storage.StorageError, BundleRejected):
        raise Http404("The stored bundle is unavailable.") from None
    if data is None:
        raise Http404("File not found in the bundle.")
    response = HttpResponse(data, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{run.name}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response

