"""Review pages: raise a flag, its thread, answers and decision, borrowing, the chairs' dashboard."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.viewer import signed_in
from catalog.models import Round
from core.errors import Refusal
from core.views import shows_refusals
from ingest.services.uploads import saved_upload
from ingest.visibility import visible_results, visible_rounds
from reviews import access, notify, selectors, services
from reviews.borrowing import hyperparameter_diff
from reviews.forms import BorrowForm, CommentForm, DecisionForm, FlagForm, ResubmitForm
from reviews.models import Borrowing, Flag, Notification


def _to_result(request: HttpRequest, result_pk: int) -> str:
    return reverse("leaderboard:result", args=[result_pk])


def _to_flag(request: HttpRequest, pk: int) -> str:
    return reverse("reviews:flag", args=[pk])


@login_required
@require_POST
@shows_refusals(back=_to_result)
def flag_create(request: HttpRequest, result_pk: int) -> HttpResponse:
    result = get_object_or_404(visible_results(request.user).select_related("round", "organization"), pk=result_pk)
    form = FlagForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Name the rule and describe the problem.")
        return redirect(result)
    flag = services.flag_raise(actor=signed_in(request), result=result, rule=form.cleaned_data["rule"],
                               description=form.cleaned_data["description"],
                               anchor_file=form.cleaned_data["anchor_file"],
                               anchor_line=form.cleaned_data["anchor_line"],
                               run_position=form.cleaned_data["run"])
    messages.success(request, f"Flag #{flag.pk} raised; {result.organization.name} has been notified.")
    return redirect(flag)


def flag_detail(request: HttpRequest, pk: int) -> HttpResponse:
    flag = access.access_flag(request.user, pk)
    user = request.user
    can_answer = access.can_answer(user, flag) and flag.state != Flag.State.RESOLVED
    return render(request, "reviews/flag.html", {
        "flag": flag,
        "comments": access.visible_comments(user, flag),
        "can_comment": access.can_comment(user, flag) and flag.state != Flag.State.RESOLVED,
        "can_answer": can_answer,
        # Uploads stop at publication; after it the flagged organization can still answer in words.
        "can_resubmit": can_answer and flag.round.phase() in (Round.Phase.OPEN, Round.Phase.REVIEW),
        "can_decide": access.can_decide(user, flag) and flag.state != Flag.State.RESOLVED,
        "comment_form": CommentForm(),
        "decision_form": DecisionForm(),
        "resubmit_form": ResubmitForm(),
        "diff": selectors.resubmission_diff(flag),
    })


@login_required
@require_POST
@shows_refusals(back=_to_flag)
def flag_comment(request: HttpRequest, pk: int) -> HttpResponse:
    flag = access.access_flag(request.user, pk)
    form = CommentForm(request.POST)
    if form.is_valid():
        services.flag_comment(actor=signed_in(request), flag=flag, body=form.cleaned_data["body"],
                              private=form.cleaned_data["private"])
    else:
        messages.error(request, "Write something.")
    return redirect(flag)


@login_required
@require_POST
@shows_refusals(back=_to_flag)
def flag_decide(request: HttpRequest, pk: int) -> HttpResponse:
    flag = access.access_flag(request.user, pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(e for errors in form.errors.values() for e in errors))
        return redirect(flag)
    services.flag_decide(actor=signed_in(request), flag=flag, outcome=form.cleaned_data["outcome"],
                         note=form.cleaned_data["note"], scaling_factor=form.cleaned_data["scaling_factor"])
    messages.success(request, "Decision recorded.")
    return redirect(flag)


@login_required
@require_POST
@shows_refusals(back=_to_flag)
def flag_resubmit(request: HttpRequest, pk: int) -> HttpResponse:
    flag = access.access_flag(request.user, pk)
    form = ResubmitForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose the corrected bundle (.tar.gz or .zip).")
        return redirect(flag)
    with saved_upload(form.cleaned_data["bundle"]) as path:
        submission = services.flag_resubmit(actor=signed_in(request), flag=flag, archive=path,
                                            original_name=form.cleaned_data["bundle"].name)
    messages.success(request, f"Resubmission #{submission.pk} received; its verification is under way.")
    return redirect(flag)


@login_required
def borrow(request: HttpRequest, result_pk: int) -> HttpResponse:
    entry = get_object_or_404(visible_results(request.user).select_related("round", "organization", "benchmark"),
                              pk=result_pk)
    if entry.organization_id not in access.answering_organization_ids(request.user):
        raise Http404("Only the entry's organization borrows for it.")
    sources = services.borrowing_sources(entry, signed_in(request))
    chosen = next((s for s in sources if str(s.pk) == request.GET.get("source", request.POST.get("source"))), None)
    form = BorrowForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and chosen is not None and form.is_valid():
        with saved_upload(form.cleaned_data["bundle"]) as path:
            try:
                borrowing = services.borrowing_start(actor=signed_in(request), entry=entry, source=chosen, archive=path,
                                                     original_name=form.cleaned_data["bundle"].name)
            except Refusal as refusal:  # shown on the form, which keeps the chosen source
                messages.error(request, refusal.message)
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
    flags = (round_.flags.select_related("result__organization", "raised_by_organization", "decided_by")
             .order_by("state", "created_at"))
    return render(request, "reviews/dashboard.html", {
        "round": round_,
        "unresolved": [f for f in flags if f.state in Flag.UNRESOLVED],
        "resolved": [f for f in flags if f.state == Flag.State.RESOLVED],
        "borrowings": Borrowing.objects.filter(round=round_).select_related("organization", "source__organization"),
        "now": timezone.now(),
    })


@login_required
def notifications(request: HttpRequest) -> HttpResponse:
    """The user's newest notifications; viewing them marks them read (the header's count drops to 0), and the
    ones that were unread stay marked on this page."""
    user = signed_in(request)
    items = list(Notification.objects.filter(user=user)[:100])
    notify.notifications_seen(user=user)
    return render(request, "reviews/notifications.html", {"items": items, "unread_notifications": 0})

