"""Review pages: raise a flag, its thread, answers and decision, borrowing, the chairs' dashboard."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from ingest import storage
from ingest.api import save_upload
from ingest.services.submissions import UploadRefused
from leaderboard.models import Round
from leaderboard.selectors import visible_results, visible_rounds
from reviews import access, selectors, services
from reviews.borrowing import hyperparameter_diff
from reviews.forms import BorrowForm, CommentForm, DecisionForm, FlagForm, ResubmitForm
from reviews.models import Borrowing, Flag, Notification


def _fail(request: HttpRequest, exc: Exception) -> None:
    messages.error(request, str(exc))


@login_required
@require_POST
def flag_create(request: HttpRequest, result_pk: int) -> HttpResponse:
    result = get_object_or_404(visible_results(request.user).select_related("round", "organization"), pk=result_pk)
    form = FlagForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Name the rule and describe the problem.")
        return redirect(result)
    try:
        flag = services.flag_raise(user=request.user, result=result, rule=form.cleaned_data["rule"],
                                   description=form.cleaned_data["description"],
                                   anchor_file=form.cleaned_data["anchor_file"],
                                   anchor_line=form.cleaned_data["anchor_line"],
                                   run_position=form.cleaned_data["run"])
    except (PermissionDenied, services.ReviewError) as exc:
        _fail(request, exc)
        return redirect(result)
    messages.success(request, f"Flag #{flag.pk} raised; {result.organization.name} has been notified.")
    return redirect(flag)


def flag_detail(request: HttpRequest, pk: int) -> HttpResponse:
    flag = access.access_flag(request.user, pk)
    user = request.user
    can_answer = access.can_answer(user, flag) and flag.state != Flag.RESOLVED
    return render(request, "reviews/flag.html", {
        "flag": flag,
        "comments": access.visible_comments(user, flag),
        "can_comment": access.can_comment(user, flag) and flag.state != Flag.RESOLVED,
        "can_answer": can_answer,
        # Uploads stop at publication; after it the flagged organization can still answer in words.
        "can_resubmit": can_answer and flag.round.phase() in (Round.OPEN, Round.REVIEW),
        "can_decide": access.can_decide(user, flag) and flag.state != Flag.RESOLVED,
        "comment_form": CommentForm(),
        "decision_form": DecisionForm(),
        "resubmit_form": ResubmitForm(),
        "diff": selectors.resubmission_diff(flag),
    })


@login_required
@require_POST
def flag_comment(request: HttpRequest, pk: int) -> HttpResponse:
    flag = access.access_flag(request.user, pk)
    form = CommentForm(request.POST)
    if form.is_valid():
        try:
            services.flag_comment(user=request.user, flag=flag, body=form.cleaned_data["body"],
                                  private=form.cleaned_data["private"])
        except (PermissionDenied, services.ReviewError) as exc:
            _fail(request, exc)
    else:
        messages.error(request, "Write something.")
    return redirect(flag)


@login_required
@require_POST
def flag_decide(request: HttpRequest, pk: int) -> HttpResponse:
    flag = access.access_flag(request.user, pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(e for errors in form.errors.values() for e in errors))
        return redirect(flag)
    try:
        services.flag_decide(user=request.user, flag=flag, outcome=form.cleaned_data["outcome"],
                             note=form.cleaned_data["note"], scaling_factor=form.cleaned_data["scaling_factor"])
    except (PermissionDenied, services.ReviewError) as exc:
        _fail(request, exc)
        return redirect(flag)
    messages.success(request, "Decision recorded.")
    return redirect(flag)


@login_required
@require_POST
def flag_resubmit(request: HttpRequest, pk: int) -> HttpResponse:
    flag = access.access_flag(request.user, pk)
    form = ResubmitForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose the corrected bundle (.tar.gz or .zip).")
        return redirect(flag)
    with tempfile.TemporaryDirectory(dir=storage.scratch_dir()) as tmp:
        path = save_upload(form.cleaned_data["bundle"], Path(tmp))
        try:
            submission = services.flag_resubmit(user=request.user, flag=flag, archive=path,
                                                original_name=form.cleaned_data["bundle"].name)
        except (PermissionDenied, services.ReviewError, UploadRefused) as exc:
            _fail(request, exc)
            return redirect(flag)
    messages.success(request, f"Resubmission #{submission.pk} received; its verification is under way.")
    return redirect(flag)


@login_required
def borrow(request: HttpRequest, result_pk: int) -> HttpResponse:
    entry = get_object_or_404(visible_results(request.user).select_related("round", "organization", "benchmark"),
                              pk=result_pk)
    if entry.organization_id not in access.answering_organization_ids(request.user):
        raise Http404("Only the entry's organization borrows for it.")
    sources = services.borrowing_sources(entry, request.user)
    chosen = next((s for s in sources if str(s.pk) == request.GET.get("source", request.POST.get("source"))), None)
    form = BorrowForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and chosen is not None and form.is_valid():
        with tempfile.TemporaryDirectory(dir=storage.scratch_dir()) as tmp:
            path = save_upload(form.cleaned_data["bundle"], Path(tmp))
            try:
                borrowing = services.borrowing_start(user=request.user, entry=entry, source=chosen, archive=path,
                                                     original_name=form.cleaned_data["bundle"].name)
            except (PermissionDenied, services.ReviewError, UploadRefused) as exc:
                _fail(request, exc)
            else:
                messages.success(request, "Borrowing started: the new bundle is being verified against the rules.")
                return redirect(borrowing.submission)
    diff = None
    if chosen is not None:
        mine = entry.runs.order_by("position").first()
        theirs = chosen.runs.order_by("position").first()
        diff = hyperparameter_diff(mine.hyperparameters if mine else {}, theirs.hyperparameters if theirs else {},
                                   entry.benchmark.modifiable_hyperparameters if entry.benchmark else [])
    return render(request, "reviews/borrow.html", {"entry": entry, "sources": sources, "chosen": chosen,
                                                   "diff": diff, "form": form})


@login_required
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    round_ = get_object_or_404(visible_rounds(request.user), slug=slug)
    if not access.is_chair(request.user, round_):
        raise Http404("The review dashboard is for the round's chairs.")
    flags = round_.flags.select_related("result__organization", "raised_by_organization").order_by("state",
                                                                                                     "created_at")
    return render(request, "reviews/dashboard.html", {
        "round": round_,
        "unresolved": [f for f in flags if f.state in Flag.UNRESOLVED],
        "resolved": [f for f in flags if f.state == Flag.RESOLVED],
        "borrowings": Borrowing.objects.filter(round=round_).select_related("organization", "source__organization"),
        "now": timezone.now(),
    })


@login_required
def notifications(request: HttpRequest) -> HttpResponse:
    items = list(Notification.objects.filter(user=request.user)[:100])
    Notification.objects.filter(user=request.user, read_at__isnull=True).update(read_at=timezone.now())
    return render(request, "reviews/notifications.html", {"items": items})

