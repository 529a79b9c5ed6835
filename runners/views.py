"""Reproduction pages: a job's status, requesting one, and the operators' view of runners and queue."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.viewer import Visitor, signed_in, viewer_of
from core.numbers import ascii_whole
from ingest.implementations import implementation_file as implementation_file_read
from ingest.implementations import implementation_for, implementation_results, is_text
from ingest.models import Implementation, Result
from ingest.visibility import visible_results
from runners import services
from runners.models import ReproductionJob, Runner

NAME_MAX = Runner._meta.get_field("name").max_length or 120


def may_request(user: Visitor, result: Result) -> bool:
    return viewer_of(user).chairs(result.round_id)


def result_panel(user: Visitor, result: Result) -> dict[str, Any]:
    """The reproduction panel of a result's page (registered with ingest.panels in RunnersConfig.ready)."""
    return {
        "reproductions": result.reproductions.order_by("-created_at")[:10],
        "may_reproduce": may_request(user, result),
        "implementation": implementation_for(result),
    }


def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(ReproductionJob.objects.select_related("result__round", "current_attempt__runner")
                            .filter(result__in=visible_results(request.user).values("pk")), pk=pk)
    return render(request, "runners/job.html", {
        "job": job,
        "attempts": job.attempts.select_related("runner"),
        "estimate": services.queue_estimate(job),
        "is_operator": request.user.is_staff,
    })


@login_required
@require_POST
def job_request(request: HttpRequest, result_pk: int) -> HttpResponse:
    result = get_object_or_404(visible_results(request.user).select_related("round"), pk=result_pk)
    if not may_request(request.user, result):
        raise PermissionDenied("Site operators and the round's chairs request reproductions.")
    try:
        job = services.job_create(result=result, kind=request.POST.get("kind", ReproductionJob.Kind.CONVERGENCE),
                                  actor=signed_in(request),
                                  time_limit_seconds=_whole(request.POST.get("time_limit_seconds"), 600),
                                  max_attempts=_whole(request.POST.get("max_attempts"), 3))
    except services.JobError as exc:
        messages.error(request, str(exc))
        return redirect(result)
    messages.success(request, f"Reproduction #{job.pk} queued.")
    return redirect(job)


def _whole(text: str | None, default: int) -> int:
    """A whole number from a form field; anything else is refused by job_create's range check (as 0)."""
    if text is None or not text.strip():
        return default
    number = ascii_whole(text, max_digits=9)
    return number if number is not None else 0


@staff_member_required
def operators(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    active = ReproductionJob.objects.active().select_related("current_attempt__runner", "result")
    queued = list(ReproductionJob.objects.queued().select_related("result"))
    return render(request, "runners/operators.html", {
        "runners": Runner.objects.all(),
        "running": active,
        "stuck": [job for job in active if job.current_attempt and job.current_attempt.lease_expires_at <= now],
        "queued": [(job, services.queue_estimate(job)) for job in queued],
        "failed": ReproductionJob.objects.filter(
            state__in=[ReproductionJob.State.FAILED, ReproductionJob.State.CANCELLED])
        .select_related("result").order_by("-finished_at")[:50],
        "now": now,
        "new_token": request.session.pop("new_runner_token", None),
    })


@staff_member_required
@require_POST
def runner_create(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    # Checked before the lookup: PostgreSQL refuses a NUL in a query (a 500), and the column holds 120.
    if (not name or len(name) > NAME_MAX or any(ord(c) < 32 or c == "\x7f" for c in name)
            or Runner.objects.filter(name=name).exists()):
        messages.error(request, f"Give the runner a new, unique name: at most {NAME_MAX} characters, "
                                "no control characters.")
        return redirect("runners:operators")
    _, token = services.runner_create(name=name, actor=signed_in(request))
    request.session["new_runner_token"] = {"name": name, "token": token}  # shown once, on the next page
    return redirect("runners:operators")


@staff_member_required
@require_POST
def job_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(ReproductionJob, pk=pk)
    try:
        services.job_cancel(job=job, actor=signed_in(request))
    except services.JobError as exc:
        messages.error(request, str(exc))
    return redirect(_next(request, job.get_absolute_url()))


@staff_member_required
@require_POST
def job_retry(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(ReproductionJob, pk=pk)
    try:
        services.job_retry(job=job, actor=signed_in(request))
    except services.JobError as exc:
        messages.error(request, str(exc))
    return redirect(_next(request, job.get_absolute_url()))


def _next(request: HttpRequest, default: str) -> str:
    """Back to where the form was, if that is a page of this site."""
    target = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure())
    return target if target and safe else default


@staff_member_required
@require_POST
def runner_enable(request: HttpRequest, pk: int) -> HttpResponse:
    runner = get_object_or_404(Runner, pk=pk)
    enabled = request.POST.get("enabled") == "1"
    services.runner_set_enabled(runner=runner, enabled=enabled, actor=signed_in(request))
    messages.success(request, f"Runner {runner.name} {'enabled' if enabled else 'disabled: its token is refused'}.")
    return redirect("runners:operators")


@staff_member_required
@require_POST
def runner_rotate(request: HttpRequest, pk: int) -> HttpResponse:
    runner = get_object_or_404(Runner, pk=pk)
    token = services.runner_token_rotate(runner=runner, actor=signed_in(request))
    request.session["new_runner_token"] = {"name": runner.name, "token": token}  # shown once, on the next page
    return redirect("runners:operators")


def _visible_implementation(request: HttpRequest, pk: int) -> Implementation:
    """Under the embargo of the results it shipped with: whoever may see one of them may read the code."""
    implementation = get_object_or_404(Implementation.objects.select_related("organization", "round"), pk=pk)
    if not visible_results(request.user).filter(submission_id=implementation.submission_id).exists():
        raise Http404("No such implementation.")
    return implementation


def implementation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    implementation = _visible_implementation(request, pk)
    return render(request, "runners/implementation.html", {
        "implementation": implementation,
        "results": implementation_results(implementation),
        "total_bytes": sum(f["size"] for f in implementation.files),
    })


def implementation_file(request: HttpRequest, pk: int, path: str) -> HttpResponse:
    implementation = _visible_implementation(request, pk)
    found = implementation_file_read(implementation, path)
    if found is None:
        raise Http404("No such file in this implementation.")
    data, cut = found
    text = data.decode("utf-8", "replace") if is_text(data) else None
    return render(request, "runners/implementation_file.html", {
        "implementation": implementation, "path": path, "text": text, "cut": cut,
        "size": next(f["size"] for f in implementation.files if f["path"] == path),
    })


@staff_member_required
@require_POST
def runner_approve(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve the hardware the runner reports now (what the operator sees on the page), or withdraw it."""
    runner = get_object_or_404(Runner, pk=pk)
    if request.POST.get("revoke") == "1":
        services.runner_unapprove(runner=runner, actor=signed_in(request))
        messages.success(request, f"Runner {runner.name} no longer takes timing jobs.")
        return redirect("runners:operators")
    model = runner.accelerator_model if runner.accelerator_count else "cpu"
    try:
        services.runner_approve(runner=runner, accelerator_model=model, accelerator_count=runner.accelerator_count,
                                actor=signed_in(request))
    except services.JobError as exc:
        messages.error(request, str(exc))
        return redirect("runners:operators")
    messages.success(request, f"Runner {runner.name} approved for timing on {runner.accelerator_count} × {model}.")
    return redirect("runners:operators")
