"""Public pages: the rounds, a round's results table, a system, a result."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string

from accounts.viewer import viewer_of
from ingest.metrics import METRICS
from ingest.panels import result_panels
from ingest.visibility import visible_results, visible_rounds, visible_systems
from leaderboard import cache, pages
from leaderboard.compare import MAX_RESULTS, MIN_RESULTS
from leaderboard.exports import export_csv, export_json, export_tuples
from leaderboard.round_filters import active_chips, clear_url
from leaderboard.table import (
    CATEGORIES,
    DIVISIONS,
    SYSTEM_TYPES,
    TableView,
    build_choices,
    build_table,
    view_query,
)

# Views of one round kept for anonymous visitors (each query string is one): the plain page, each division,
# sort and page people follow links to, with room to spare; any query beyond them is rendered each time.
ROUND_PAGE_VARIANTS = 200


def round_table(request: HttpRequest, slug: str) -> HttpResponse:
    round_ = get_object_or_404(visible_rounds(request.user), slug=slug)
    view = TableView.from_query(request.GET)
    is_chair = viewer_of(request.user).chairs(round_.pk)

    def render_content() -> str:
        choices = build_choices(round_, request.user)
        table = build_table(round_, view, request.user, request.GET, offered=choices.benchmarks)
        return render_to_string("leaderboard/_round_content.html", {
            "round": round_, "view": view, "metrics": METRICS,
            "table_html": render_to_string("leaderboard/_round_table.html", {"table": table}),
            "facets": [("division", "Division", DIVISIONS), ("category", "Category", CATEGORIES),
                       ("system_type", "System type", SYSTEM_TYPES)],
            "choices": choices, "view_query": view_query(request.GET).urlencode(), "is_chair": is_chair,
            "chips": active_chips(request.GET, view, choices), "clear_url": clear_url(request.GET),
            "compare_min": MIN_RESULTS, "compare_max": MAX_RESULTS,
        })

    def render_page() -> str:
        if request.user.is_authenticated:
            # Only the page around it is the visitor's own (their name, notifications, a one-time message):
            # the content (filter bar, table) is what their grant shows, kept as the anonymous page is. Its
            # filter bar and table were most of a signed-in visit's time (bench/profile_api.py --path).
            content_html = cache.cached_for(request.user, "round-content", (slug, request.GET.urlencode(), is_chair),
                                            render_content, round_id=round_.pk, variants=ROUND_PAGE_VARIANTS)
        else:
            content_html = render_content()
        return render_to_string("leaderboard/round.html", {"round": round_, "content_html": content_html},
                                request=request)

    # A visitor who is signed in may see embargoed results of their own (never shared), and a page
    # carrying a one-time message is personal: only the plain anonymous page is kept.
    if request.user.is_authenticated or len(messages.get_messages(request)):
        return HttpResponse(render_page())
    return HttpResponse(cache.cached_public("round-page", (slug, request.GET.urlencode()), render_page,
                                            round_id=round_.pk, variants=ROUND_PAGE_VARIANTS))


def round_export(request: HttpRequest, slug: str, fmt: str) -> StreamingHttpResponse:
    """The current view (every page of it; without a query, the whole round) as CSV or JSON, same
    visibility, streamed: rows go out as the database hands them over."""
    round_ = get_object_or_404(visible_rounds(request.user), slug=slug)
    view = TableView.from_query(request.GET)
    rows = export_tuples(round_, view, request.user, base_url=request.build_absolute_uri("/").rstrip("/"),
                         for_csv=fmt == "csv")
    name = f"podium-{round_.slug}{'-filtered' if request.GET else ''}"
    if fmt == "json":
        response = StreamingHttpResponse(export_json(round_, request.GET.urlencode(), rows),
                                         content_type="application/json")
    else:
        response = StreamingHttpResponse(export_csv(rows), content_type="text/csv; charset=utf-8")
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
            **pages.result_extras(request.user, result, runs),
        },
    )
