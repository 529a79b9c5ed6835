"""Public pages: the rounds, a round's results table, a system, a result."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from leaderboard import selectors


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/home.html", {"rounds": selectors.rounds_overview(request.user)})


def round_table(request: HttpRequest, slug: str) -> HttpResponse:
    round_ = get_object_or_404(selectors.visible_rounds(request.user), slug=slug)
    filters = selectors.clean_filters(request.GET.dict())
    table = selectors.round_table(round_, filters, request.user)
    facets = [
        (name, label, [(value, text) for value, text in choices.items()])
        for name, label, choices in [
            ("division", "Division", selectors.FACETS["division"]),
            ("category", "Category", selectors.FACETS["category"]),
            ("system_type", "System type", selectors.FACETS["system_type"]),
        ]
    ]
    return render(request, "leaderboard/round.html", {"table": table, "facets": facets})


def system_detail(request: HttpRequest, pk: int) -> HttpResponse:
    system = get_object_or_404(selectors.visible_systems(request.user).select_related("round", "organization"), pk=pk)
    results = (
        selectors.visible_results(request.user)
        .filter(round=system.round, organization=system.organization, system_slug=system.slug)
        .current()
        .select_related("benchmark")
        .order_by("benchmark__position", "benchmark_key")
    )
    return render(request, "leaderboard/system.html", {"system": system, "results": results})


def result_detail(request: HttpRequest, pk: int) -> HttpResponse:
    result = get_object_or_404(
        selectors.visible_results(request.user).select_related(
            "round", "organization", "system", "benchmark", "submission", "superseded_by"
        ),
        pk=pk,
    )
    runs = list(result.runs.prefetch_related("findings"))
    item_findings = result.findings.filter(run__isnull=True).order_by("id")
    counted = sorted(r.time_to_train_min for r in runs if r.dropped == "" and r.time_to_train_min is not None)
    versions = (
        selectors.visible_results(request.user)
        .filter(round=result.round, organization=result.organization, system_slug=result.system_slug,
                benchmark_key=result.benchmark_key)
        .exclude(pk=result.pk)
        .order_by("-created_at")
    )
    return render(
        request,
        "leaderboard/result.html",
        {
            "result": result,
            "runs": runs,
            "item_findings": item_findings,
            "counted_times": counted,
            "counted_sum": sum(counted),
            "versions": versions,
        },
    )
