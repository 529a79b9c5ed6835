"""Public pages: the rounds, a round's results table, a system, a result."""

from __future__ import annotations

import csv
import io

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string

from accounts.viewer import viewer_of
from ingest.metrics import METRICS
from ingest.panels import result_panels
from ingest.visibility import visible_results, visible_rounds, visible_systems
from leaderboard import cache, selectors
from leaderboard.table import (
    CATEGORIES,
    DIVISIONS,
    EXPORT_FIELDS,
    SYSTEM_TYPES,
    TableView,
    build_choices,
    build_table,
    export_rows,
)


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/home.html", {"rounds": selectors.rounds_overview(request.user)})


def round_table(request: HttpRequest, slug: str) -> HttpResponse:
    round_ = get_object_or_404(visible_rounds(request.user), slug=slug)
    view = TableView.from_query(request.GET)

    def render_page() -> str:
        table = build_table(round_, view, request.user)
        table_html = render_to_string("leaderboard/_round_table.html", {"table": table, "request": request})
        return render_to_string("leaderboard/round.html", {
            "round": round_, "view": view, "table_html": table_html, "metrics": METRICS,
            "facets": [("division", "Division", DIVISIONS), ("category", "Category", CATEGORIES),
                       ("system_type", "System type", SYSTEM_TYPES)],
            "choices": build_choices(round_, request.user),
            "is_chair": viewer_of(request.user).chairs(round_.pk),
        }, request=request)

    # A visitor who is signed in may see embargoed results of their own (never shared), and a page
    # carrying a one-time message is personal: only the plain anonymous page is kept.
    if request.user.is_authenticated or len(messages.get_messages(request)):
        return HttpResponse(render_page())
    return HttpResponse(cache.cached_public("round-page", (slug, request.GET.urlencode()), render_page))


def round_export(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    """The current view (or, without a query, the whole round) as CSV or JSON, same visibility."""
    round_ = get_object_or_404(visible_rounds(request.user), slug=slug)
    view = TableView.from_query(request.GET)
    rows = export_rows(round_, view, request.user, base_url=request.build_absolute_uri("/").rstrip("/"))
    name = f"podium-{round_.slug}{'-filtered' if request.GET else ''}"
    if fmt == "json":
        response = JsonResponse({"round": round_.slug, "view": request.GET.urlencode(), "derived_note":
                                 "accelerator_minutes, host_minutes, cloud_scale(_minutes), energy_kwh, cost_to_train "
                                 "and runs_cv are derived, not official scores", "results": rows},
                                json_dumps_params={"indent": 1})
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=EXPORT_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


def system_detail(request: HttpRequest, pk: int) -> HttpResponse:
    system = get_object_or_404(visible_systems(request.user).select_related("round", "organization"), pk=pk)
    results = (
        visible_results(request.user)
        .filter(round=system.round, organization=system.organization, system_slug=system.slug)
        .current()
        .select_related("benchmark")
        .order_by("benchmark__position", "benchmark_key")
    )
    return render(request, "leaderboard/system.html", {"system": system, "results": results})


def result_detail(request: HttpRequest, pk: int) -> HttpResponse:
    result = get_object_or_404(
        visible_results(request.user).select_related(
            "round", "organization", "system", "benchmark", "submission", "superseded_by"
        ),
        pk=pk,
    )
    runs = list(result.runs.prefetch_related("findings"))
    item_findings = result.findings.filter(run__isnull=True).order_by("id")
    counted = sorted(r.time_to_train_min for r in runs if r.dropped == "" and r.time_to_train_min is not None)
    versions = (
        visible_results(request.user)
        .filter(round=result.round, organization=result.organization, system_slug=result.system_slug,
                benchmark_key=result.benchmark_key)
        .exclude(pk=result.pk)
        .order_by("-created_at")
    )
    return render(
        request,
        "leaderboard/result.html",
        {
            "panels": result_panels(request.user, result),
            "result": result,
            "runs": runs,
            "item_findings": item_findings,
            "counted_times": counted,
            "counted_sum": sum(counted),
            "versions": versions,
        },
    )
