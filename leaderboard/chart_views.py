"""The charts page and its JSON endpoints (one figure each, built by leaderboard.charts).

Every read goes through the visibility selectors. Answers are cached under the results generation key and
what the visitor may see beyond the public record (leaderboard.cache.cached_for): signed-in users may see
embargoed results of their own, so theirs are shared only with visitors granted exactly as much, and are
marked private for HTTP caches.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.exceptions import EmptyResultSet
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections
from django.db.models import (
    Aggregate,
    BigIntegerField,
    Case,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    Subquery,
    When,
    Window,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, RowNumber
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_safe

from accounts.viewer import Visitor
from catalog.models import Benchmark, Round
from core.errors import BadRequest, Refusal
from core.numbers import ascii_whole
from ingest.models import Result, ResultQuerySet, Run, System
from ingest.visibility import (
    viewer_fingerprint,
    visible_results,
    visible_results_of_rounds,
    visible_round_results,
    visible_rounds,
)
from leaderboard import charts
from leaderboard.addresses import around_id
from leaderboard.cache import cached_for, kept_by_round

T = TypeVar("T")

DIVISIONS = dict(System.Division.choices)
DEFAULT_DIVISION = System.Division.CLOSED
DEFAULT_SCALE = 8
MAX_SCALE = 1_000_000
PUBLIC_MAX_AGE = 60


# ---------------------------------------------------------------------------------------------
# Reads


def _scored(visible: ResultQuerySet) -> ResultQuerySet:
    """What every chart draws of the visible results: the current, verified, scored ones."""
    return visible.current().ranked().filter(verdict=Result.Verdict.VERIFIED)


def scored_results(user: Visitor) -> ResultQuerySet:
    """What every chart draws: current, verified, scored results this visitor may see."""
    return _scored(visible_results(user))


def scored_round_results(user: Visitor, round_: Round) -> ResultQuerySet:
    """scored_results of one round, the embargo decided for it beforehand: no join, so a round's charts read
    result_chart_points alone."""
    return _scored(visible_round_results(user, round_))


# The columns a chart point is built from, in this order: charts read these few with values_list(), never whole rows.
POINT_COLUMNS = ("pk", "submitter", "organization__name", "system_name", "system_slug", "accelerator_model",
                 "accelerator_count", "host_count", "score", "runs_cv", "category")


def _point(row: Sequence[Any]) -> charts.ResultPoint:
    """A point from a row of values_list(*POINT_COLUMNS) (and perhaps more columns after them)."""
    before, after = around_id("leaderboard:result")
    pk, submitter, organization, system_name, system_slug, model, accelerators, hosts, score, cv, category = (
        row[:len(POINT_COLUMNS)])
    return charts.ResultPoint(id=pk, url=f"{before}{pk}{after}", submitter=submitter or organization,
                              system=system_name or system_slug, accelerator_model=model, accelerators=accelerators,
                              hosts=hosts, minutes=score, runs_cv=cv, category=category)


def round_results(user: Visitor, round_: Round, key: str, division: str) -> ResultQuerySet:
    return scored_round_results(user, round_).filter(benchmark_key=key, division=division)


# What the round charts draw is bounded by what a reader can take in, not by the size of the round: a
# round ten times larger (more systems of the same submitters) costs a larger aggregate in SQL, not ten
# times the points, table rows and bytes. Every result stays in the round's table, export and the API.
SCALING_FAMILIES = 12  # families drawn in the scaling chart: those with the most sizes
SPREAD_BARS = 40  # bars in the spread chart: half the steadiest results, half the least steady
CHOOSABLE = 100  # results offered for a closer look on the charts page
SCALE_POINTS = 200  # points in the scale chart (one per submitter and scale): charts.scale_points_to_draw


class _FastestPair(Aggregate):
    """A part of a group's fastest (lowest score, then lowest id) result's pair, in one pass over the group:
    PostgreSQL compares arrays element by element, so min(ARRAY[score, id]) is that result's pair (it
    computes the identical min() once for both parts). Ids are exact as float8 below 2**53."""

    def __init__(self) -> None:
        super().__init__(F("score"), Cast(F("pk"), FloatField()))


class _FastestId(_FastestPair):
    template = "(MIN(ARRAY[%(expressions)s]))[2]::bigint"
    output_field = BigIntegerField()


class _FastestScore(_FastestPair):
    template = "(MIN(ARRAY[%(expressions)s]))[1]"
    output_field = FloatField()


@dataclass(frozen=True)
class Keep:
    """What the caller draws of the winners (charts.scale_points_to_draw): at most `limit`, by their place
    at their scale (the parts of the group at the indexes `scale`). The read may leave out every winner
    that cannot be drawn: those neither first at their scale nor among the first `limit` by (place,
    score, id). Why that is safe: the front is made of first places, and a winner drawn after the front
    has fewer than `limit` winners before it in (place, score, id) order."""

    scale: tuple[int, ...]
    limit: int


@dataclass
class Fastest:
    points: list[charts.ResultPoint]  # in (score, id) order; with a Keep, perhaps only those it may draw
    results: int  # how many results the groups hold together
    groups: int  # how many groups (winners) there are, read or not


def _fastest_of_each(results: ResultQuerySet, group: list[Any], keep: Keep | None = None) -> Fastest:
    """The fastest result of each group (by score, then id: the one the front and the family tables
    would pick among them), in (score, id) order, how many results the groups hold together and how many
    groups there are. Only the winners reach Python (with `keep`, on PostgreSQL, only those it may draw):
    ranked in SQL by a window function, or on PostgreSQL by a hashed aggregate and a read of the winners
    by id (a round ten times larger sorted its rows on the submitter's name under the window: 3.7 -> 12 ms
    at 1,838 rows, against 7 ms hashed)."""
    if connections[results.db].vendor == "postgresql":
        return _fastest_of_each_hashed(results, group, keep)
    return _fastest_of_each_windowed(results, group)


def _fastest_of_each_windowed(results: ResultQuerySet, group: list[Any]) -> Fastest:
    """_fastest_of_each in one query on any database (every winner read: a Keep is left to the caller)."""
    partition = [F(part) if isinstance(part, str) else part for part in group]
    rows = list(
        results.annotate(place=Window(RowNumber(), partition_by=partition, order_by=[F("score").asc(), F("pk").asc()]),
                         members=Window(Count("pk"), partition_by=partition))
        .filter(place=1).order_by("score", "pk").values_list(*POINT_COLUMNS, "members")
    )
    return Fastest([_point(row) for row in rows], sum(row[-1] for row in rows), len(rows))


def _fastest_of_each_hashed(results: ResultQuerySet, group: list[Any], keep: Keep | None = None) -> Fastest:
    """_fastest_of_each on PostgreSQL in one query and no sort of the groups' rows: the groups' winners
    and sizes are a hashed aggregate (a CTE, read several times but computed once), the points are read by
    id; with `keep`, only the winners it may draw (numbered over the winners, a few hundred rows). Both
    parts are compiled by the ORM; the visibility rule stays in `results`, which the CTE reads."""
    named = {f"group_{index}": part for index, part in enumerate(group) if not isinstance(part, str)}
    names = [part if isinstance(part, str) else f"group_{index}" for index, part in enumerate(group)]
    winners = (results.order_by().annotate(**named).values(*names)
               .annotate(fastest=_FastestId(), fastest_score=_FastestScore(), members=Count("pk")))
    try:
        inner, inner_params = winners.query.sql_with_params()
    except EmptyResultSet:  # a filter that can match nothing: no group, no query
        return Fastest([], 0, 0)
    ctes, more = f'"winners" AS ({inner})', []
    read = '"winners"'
    if keep is not None:
        scale = ", ".join(f'"{names[index]}"' for index in keep.scale)
        ctes += (f', "kept" AS (SELECT "fastest" FROM (SELECT "fastest", "place", row_number() OVER '
                 f'(ORDER BY "place", "fastest_score", "fastest") AS "n" FROM (SELECT "fastest", "fastest_score", '
                 f'row_number() OVER (PARTITION BY {scale} ORDER BY "fastest_score", "fastest") AS "place" '
                 f'FROM "winners") "placed") "ranked" WHERE "place" = 1 OR "n" <= %s)')
        more.append(keep.limit)
        read = '"kept"'
    drawn = (Result.objects.filter(pk__in=RawSQL(f'SELECT "fastest" FROM {read}', ()))
             .annotate(results_in_groups=RawSQL('SELECT sum("members") FROM "winners"', ()),
                       groups=RawSQL('SELECT count(*) FROM "winners"', ()))
             .order_by("score", "pk").values_list(*POINT_COLUMNS, "results_in_groups", "groups"))
    outer, outer_params = drawn.query.sql_with_params()
    with connections[results.db].cursor() as cursor:
        cursor.execute(f"WITH {ctes} {outer}", (*inner_params, *more, *outer_params))
        rows = cursor.fetchall()
    if not rows:
        return Fastest([], 0, 0)
    return Fastest([_point(row) for row in rows], int(rows[0][-2]), int(rows[0][-1]))


def _title(benchmark: Benchmark, round_: Round, division: str, what: str) -> str:
    return f"{what}: {benchmark.name} · {round_.name} · {DIVISIONS[division]} division"


def scale_data(user: Visitor, round_: Round, benchmark: Benchmark, division: str) -> charts.Chart:
    """One point per submitter and scale: its fastest result on that many accelerators (CPU-only: hosts).
    The Pareto front is the same as over every result: a result on the front is the fastest at its
    scale, so the fastest of its submitter there."""
    cpu_hosts = Case(When(accelerator_count=0, then=F("host_count")), default=None, output_field=IntegerField())
    fastest = _fastest_of_each(round_results(user, round_, benchmark.key, division),
                               ["organization_id", "submitter", "accelerator_count", cpu_hosts],
                               Keep(scale=(2, 3), limit=SCALE_POINTS))
    drawn = charts.scale_points_to_draw(fastest.points, SCALE_POINTS)
    chart = charts.scale_chart(drawn, title=_title(benchmark, round_, division, "Time to train vs. scale"))
    if fastest.results > fastest.groups:
        chart.notes.append(f"One point per submitter and scale, its fastest result there: {fastest.groups:,} points "
                           f"for {fastest.results:,} results. Every result is in the round's table and export.")
    if len(drawn) < fastest.groups:
        chart.notes.append(f"{len(drawn):,} of the {fastest.groups:,} points are drawn: the Pareto front, then the "
                           "fastest submitter at each scale, then the second fastest at each, and so on.")
    return chart


def scaling_data(user: Visitor, round_: Round, benchmark: Benchmark, division: str) -> charts.Chart:
    """The families (submitter, accelerator model) with results at two or more sizes, those with the most
    sizes first, at most SCALING_FAMILIES of them; of each size its fastest result, as
    charts.scaling_efficiency reads it. Two queries: the families with their number of sizes, then the
    fastest result of each size of the families drawn."""
    results = round_results(user, round_, benchmark.key, division).filter(accelerator_count__gt=0).exclude(
        accelerator_model="")
    families = list(results.values("organization_id", "submitter", "accelerator_model")
                    .annotate(sizes=Count("accelerator_count", distinct=True)).filter(sizes__gte=2)
                    .order_by("-sizes", "submitter", "accelerator_model", "organization_id"))
    # Matches nothing, but is a query all the same: the chart costs the same queries with no family.
    drawn = Q(pk__isnull=True)
    for family in families[:SCALING_FAMILIES]:
        drawn |= Q(organization_id=family["organization_id"], submitter=family["submitter"],
                   accelerator_model=family["accelerator_model"])
    points = _fastest_of_each(results.filter(drawn), ["organization_id", "submitter", "accelerator_model",
                                                      "accelerator_count"]).points
    chart = charts.scaling_chart(points, title=_title(benchmark, round_, division, "Scaling efficiency"))
    if len(families) > SCALING_FAMILIES:
        chart.notes.append(f"The {SCALING_FAMILIES} families with the most sizes are drawn, of {len(families):,} "
                           "with results at two or more sizes.")
    return chart


def spread_data(user: Visitor, round_: Round, benchmark: Benchmark, division: str) -> charts.Chart:
    """The SPREAD_BARS / 2 steadiest and least steady results (all of them when there are no more than
    SPREAD_BARS), ranked in SQL; the rest are counted, not loaded."""
    results = round_results(user, round_, benchmark.key, division)
    counts = results.aggregate(scored=Count("pk"), with_cv=Count("runs_cv"))
    half = SPREAD_BARS // 2
    ranked = results.filter(runs_cv__isnull=False).annotate(
        steadier=Window(RowNumber(), order_by=[F("runs_cv").asc(), F("pk").asc()]),
        shakier=Window(RowNumber(), order_by=[F("runs_cv").desc(), F("pk").desc()]))
    if counts["with_cv"] > SPREAD_BARS:
        ranked = ranked.filter(Q(steadier__lte=half) | Q(shakier__lte=half))
    points = [_point(row) for row in ranked.order_by("runs_cv", "pk").values_list(*POINT_COLUMNS)]
    chart = charts.spread_chart(points, title=_title(benchmark, round_, division, "Run-to-run spread"))
    without = counts["scored"] - counts["with_cv"]
    if without:
        chart.notes.append(f"{without} result(s) have fewer than two successful runs and no CV.")
    if counts["with_cv"] > len(points):
        chart.notes.append(f"The {half} steadiest and the {half} least steady of {counts['with_cv']:,} results are "
                           "drawn; every result's CV is in the round's export (runs_cv).")
    return chart


def _version(ruleset: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in ruleset.split("."))
    except ValueError:
        return ()


def _round_label(round_: Round, duplicated: set[str]) -> str:
    try:
        label = round_.version_label
    except ValueError:
        label = round_.slug
    if label in duplicated:
        label = round_.slug
    return label if round_.is_published() else f"{label} (embargoed)"


def _fastest_per_round(user: Visitor, key: str, division: str, scale: int) -> tuple[list[Round], dict[int, list[int]]]:
    """The rounds with a scored result for this key, each with its fastest result and its fastest on exactly
    `scale` accelerators: two index walks per round (round, benchmark_key, score) that stop at the first
    match, so the cost follows the number of rounds, not of results."""
    in_round = scored_results(user).filter(round=OuterRef("pk"), benchmark_key=key, division=division)
    fastest = in_round.order_by("score", "pk").values("pk")[:1]
    fastest_at_scale = in_round.filter(accelerator_count=scale).order_by("score", "pk").values("pk")[:1]
    rounds = list(
        visible_rounds(user)
        .annotate(best=Subquery(fastest), best_at_scale=Subquery(fastest_at_scale))
        .filter(best__isnull=False)
    )
    # The fastest overall first: on equal times history_chart keeps the first point, as it kept the
    # lowest id when it was given every result in (score, id) order.
    best = {r.pk: list(dict.fromkeys(pk for pk in (getattr(r, "best", None), getattr(r, "best_at_scale", None))
                                     if pk is not None)) for r in rounds}
    return rounds, best


def history_data(user: Visitor, key: str, division: str, scale: int) -> charts.Chart:
    """Round over round for one benchmark key, in publication order, split where the benchmark changed."""
    found, best = _fastest_per_round(user, key, division, scale)
    wanted = [pk for pks in best.values() for pk in pks]
    points = {row[0]: _point(row) for row in Result.objects.filter(pk__in=wanted).values_list(*POINT_COLUMNS)}
    by_round = {round_pk: [points[pk] for pk in pks if pk in points] for round_pk, pks in best.items()}
    rounds = sorted(
        found,
        key=lambda r: (r.publication_date is None, r.publication_date, _version(r.ruleset), r.slug),
    )
    benchmarks = {b.round_id: b for b in Benchmark.objects.filter(key=key, round__in=rounds)}
    labels = [r.version_label if _version(r.ruleset) else r.slug for r in rounds]
    duplicated = {label for label in labels if labels.count(label) > 1}
    entries = []
    for round_ in rounds:
        benchmark = benchmarks.get(round_.pk)
        model = benchmark.model if benchmark else ""
        comparable = (model, benchmark.dataset, benchmark.quality_target) if benchmark else ("",)
        entries.append(charts.RoundEntry(label=_round_label(round_, duplicated), model=model,
                                         comparable=comparable, results=tuple(by_round[round_.pk])))
    latest = benchmarks.get(rounds[-1].pk) if rounds else None
    name = latest.name if latest else key
    return charts.history_chart(
        entries, scale=scale, title=f"Round over round: {name} ({key}) · {DIVISIONS[division]} division"
    )


def convergence_data(result: Result) -> charts.Chart:
    benchmark = result.benchmark
    runs = result.runs.order_by("position").values_list("position", "dropped", "eval_curve")
    curves = [charts.RunCurve(position=position, dropped=dropped, points=tuple(
        p for p in eval_curve if isinstance(p, dict))) for position, dropped, eval_curve in runs]
    return charts.convergence_chart(
        curves,
        benchmark_key=result.benchmark_key,
        quality_target=benchmark.quality_target if benchmark else None,
        target_direction=benchmark.target_direction if benchmark else Benchmark.Direction.HIGHER,
        target_text=benchmark.target_text if benchmark else "",
        metric_label=benchmark.quality_metric if benchmark else "",
        title=f"Convergence: {result.system_name or result.system_slug} · {result.benchmark_key}",
    )


def run_times_data(result: Result) -> charts.Chart:
    runs = [charts.RunTime(position=r.position, minutes=r.time_to_train_min, dropped=r.dropped)
            for r in Run.objects.filter(result=result).order_by("position").only("position", "time_to_train_min",
                                                                               "dropped")]
    return charts.run_times_chart(runs, raw_score=result.raw_score,
                                  title=f"Run times: {result.system_name or result.system_slug} · "
                                        f"{result.benchmark_key}")


# ---------------------------------------------------------------------------------------------
# Request plumbing


# History figures kept per results generation: one per benchmark, division, scale and visitor's grant; the
# scale is any number a visitor types (leaderboard.cache.room_for_variant).
HISTORY_VARIANTS = 500


def _cache_headers(request: HttpRequest, response: HttpResponseBase) -> None:
    patch_vary_headers(response, ["Cookie"])
    if request.user.is_authenticated:
        patch_cache_control(response, private=True, no_store=True)
    else:
        patch_cache_control(response, public=True, max_age=PUBLIC_MAX_AGE)


def division_param(request: HttpRequest) -> str:
    division = request.GET.get("division") or DEFAULT_DIVISION
    if division not in DIVISIONS:
        raise BadRequest(f"division must be one of: {', '.join(DIVISIONS)}.")
    return division


def scale_param(request: HttpRequest) -> int:
    scale = ascii_whole(request.GET.get("scale") or str(DEFAULT_SCALE))
    if scale is None or not 1 <= scale <= MAX_SCALE:
        raise BadRequest(f"scale must be a whole number of accelerators from 1 to {MAX_SCALE}.")
    return scale


def _round(request: HttpRequest, slug: str) -> Round:
    return get_object_or_404(visible_rounds(request.user), slug=slug)


def _benchmark(request: HttpRequest, round_: Round) -> Benchmark:
    key = request.GET.get("benchmark", "")
    if not key:
        raise BadRequest("benchmark is required, e.g. ?benchmark=resnet.")
    benchmark = round_.benchmarks.filter(key=key).first()
    if benchmark is None:
        raise Http404("This round has no such benchmark.")
    return benchmark


def figure_body(request: HttpRequest, name: str, parts: tuple[Any, ...], produce: Callable[[], charts.Chart], *,
                round_id: int | None = None, variants: int | None = None) -> bytes:
    """The figure as JSON bytes. The encoded bytes are what is kept, so a hit encodes nothing again (a scale
    chart of a large round is thousands of points); they are encoded from the figure the charts page keeps
    under the same name, so the page and the figures its script then asks for are built once."""
    def encoded() -> bytes:
        figure = cached_for(request.user, name, parts, produce, round_id=round_id, variants=variants)
        return json.dumps(figure.as_json(), cls=DjangoJSONEncoder).encode()

    return cached_for(request.user, f"{name}-json", parts, encoded, round_id=round_id, variants=variants)


def chart_json(view: Callable[..., bytes]) -> Callable[..., HttpResponse]:
    """One figure as JSON; a bad parameter is a 400 and a hidden or missing object a 404, both as JSON."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse
        try:
            response = HttpResponse(view(request, *args, **kwargs), content_type="application/json")
        except Refusal as refusal:
            response = JsonResponse({"error": refusal.message}, status=refusal.status)
        except Http404 as error:
            response = JsonResponse({"error": str(error) or "Not found."}, status=404)
        _cache_headers(request, response)
        return response

    return require_safe(wrapper)


# ---------------------------------------------------------------------------------------------
# JSON endpoints


@chart_json
def scale_json(request: HttpRequest, slug: str) -> bytes:
    round_, division = _round(request, slug), division_param(request)
    benchmark = _benchmark(request, round_)
    return figure_body(request, "chart-scale", (round_.pk, benchmark.key, division),
                       lambda: scale_data(request.user, round_, benchmark, division), round_id=round_.pk)


@chart_json
def scaling_json(request: HttpRequest, slug: str) -> bytes:
    round_, division = _round(request, slug), division_param(request)
    benchmark = _benchmark(request, round_)
    return figure_body(request, "chart-scaling", (round_.pk, benchmark.key, division),
                       lambda: scaling_data(request.user, round_, benchmark, division), round_id=round_.pk)


@chart_json
def spread_json(request: HttpRequest, slug: str) -> bytes:
    round_, division = _round(request, slug), division_param(request)
    benchmark = _benchmark(request, round_)
    return figure_body(request, "chart-spread", (round_.pk, benchmark.key, division),
                       lambda: spread_data(request.user, round_, benchmark, division), round_id=round_.pk)


@chart_json
def history_json(request: HttpRequest, key: str) -> bytes:
    division, scale = division_param(request), scale_param(request)
    return figure_body(request, "chart-history", (key, division, scale),
                       lambda: history_data(request.user, key, division, scale), variants=HISTORY_VARIANTS)


def _visible_result(request: HttpRequest, pk: int) -> Result:
    # Checked on every request, before any cache: a cached figure is never a way around the embargo.
    return get_object_or_404(visible_results(request.user).select_related("benchmark"), pk=pk)


@chart_json
def convergence_json(request: HttpRequest, pk: int) -> bytes:
    result = _visible_result(request, pk)
    return figure_body(request, "chart-convergence", (result.pk,), lambda: convergence_data(result))


@chart_json
def run_times_json(request: HttpRequest, pk: int) -> bytes:
    result = _visible_result(request, pk)
    return figure_body(request, "chart-run-times", (result.pk,), lambda: run_times_data(result))


# ---------------------------------------------------------------------------------------------
# The charts page


def _scale_choices(user: Visitor, key: str, division: str) -> list[int]:
    """The accelerator counts of every round's scored results of the benchmark: each round's kept in the cache
    under its freshness and what the visitor may see (kept_by_round), so after an upload only its round is
    read again (every round's, read whole, took 9 ms at 200,000 results)."""

    computed = False

    def compute(stale: list[int]) -> dict[int, list[int]]:
        nonlocal computed
        computed = True
        rounds = Round.objects.filter(pk__in=stale).only("publication_date").order_by()
        # The embargo decided round by round (no join): result_chart_points, read alone.
        rows = (_scored(visible_results_of_rounds(user, rounds))
                .filter(benchmark_key=key, division=division, accelerator_count__gt=0)
                .order_by().values_list("round_id", "accelerator_count").distinct())
        found: dict[int, list[int]] = {pk: [] for pk in stale}
        for round_id, count in rows:
            found[round_id].append(count)
        return found

    kept = kept_by_round("chart-scales", (viewer_fingerprint(user), key, division), compute)
    if computed or not kept:  # a round this process does not know yet (created since it read the list of rounds)
        kept = {**kept, **compute(list(Round.objects.filter(pk__gt=max(kept, default=0)).values_list("pk", flat=True)))}
    return sorted({count for counts in kept.values() for count in counts})


# Charts pages kept per round and results generation: one per benchmark, division, scale, result looked at and
# visitor's grant; the scale and the result are any number a visitor types (leaderboard.cache.room_for_variant).
# A page holds its charts' tables (~140 KB for a round of 20,000 results).
CHARTS_PAGE_VARIANTS = 200


@require_safe
def charts_page(request: HttpRequest, slug: str) -> HttpResponse:
    round_ = _round(request, slug)
    division = request.GET.get("division", "")
    if division not in DIVISIONS:
        division = DEFAULT_DIVISION  # the page falls back where the JSON endpoints answer 400
    # What the content depends on besides the data and the visitor's grant: an unknown benchmark is answered
    # with the first one whatever its name, and no key is that long.
    scale = ascii_whole(request.GET.get("scale"))
    asked = (request.GET.get("benchmark", "")[:100], division,
             scale if scale is not None and 1 <= scale <= MAX_SCALE else None, ascii_whole(request.GET.get("result")))
    # Kept rendered, as its figures are, under the results generation of every round (the history chart spans
    # them): the parts below the charts (the results to choose from, one result's runs and convergence) were
    # most of a visit's 12-15 ms once the figures were kept.
    # Named by round, so that each round's pages have their own room.
    html, charted = cached_for(request.user, f"charts-page-{round_.pk}", asked,
                                lambda: _charts_content(request, round_, *asked), variants=CHARTS_PAGE_VARIANTS)
    # Rendered by a template, which escaped what it holds.
    return render(request, "leaderboard/charts.html", {"round": round_, "content": mark_safe(html),
                                                       "charted": charted})


def _charts_content(request: HttpRequest, round_: Round, wanted: str, division: str, asked: int | None,
                    asked_result: int | None) -> tuple[str, bool]:
    """The charts page's content, and whether it draws any chart (its scripts are wanted)."""
    user = request.user
    # A probe per benchmark of the round (result_chart_points: round, benchmark), not a pass over its results.
    scored = scored_round_results(user, round_).filter(benchmark_key=OuterRef("key"))
    benchmarks = list(round_.benchmarks.filter(Exists(scored)))
    benchmark = next((b for b in benchmarks if b.key == wanted), benchmarks[0] if benchmarks else None)
    context: dict[str, Any] = {
        "round": round_, "benchmarks": benchmarks, "benchmark": benchmark, "division": division,
        "divisions": DIVISIONS, "unknown_benchmark": bool(wanted) and benchmark is not None and benchmark.key != wanted,
        "sections": [],
    }
    if benchmark is None:
        return render_to_string("leaderboard/_charts_content.html", context), False
    scales = _scale_choices(user, benchmark.key, division)
    if asked is not None and 1 <= asked <= MAX_SCALE:
        scale = asked
    else:
        scale = DEFAULT_SCALE if DEFAULT_SCALE in scales or not scales else scales[0]
    query = urlencode({"benchmark": benchmark.key, "division": division})
    parts = (round_.pk, benchmark.key, division)

    def section(key: str, title: str, intro: str, url: str, chart: charts.Chart) -> dict[str, Any]:
        return {"key": key, "title": title, "intro": intro, "src": url, "chart": chart}

    def kept(name: str, parts: tuple[Any, ...], round_id: int | None, key: str, title: str, intro: str, url: str,
             produce: Callable[[], charts.Chart], variants: int | None = None) -> SafeString:
        """A chart's part of the page, kept rendered as its figure is kept: its table of a large round's
        results was half of the page's CPU."""
        def render_part() -> str:
            chart = cached_for(request.user, name, parts, produce, round_id=round_id, variants=variants)
            return render_to_string("leaderboard/_chart_section.html",
                                    {"section": section(key, title, intro, url, chart)})

        # Rendered by a template, which escaped what it holds.
        return mark_safe(cached_for(request.user, f"{name}-part", (title, url, *parts), render_part, round_id=round_id,
                                     variants=variants))

    context["sections"] = [
        kept("chart-scale", parts, round_.pk, "scale", "Time to train against scale",
             "One point per submitter and accelerator count, its fastest result there; log–log. The line is "
             "the Pareto front: the fastest time reached on that many accelerators or fewer.",
             f"{reverse('leaderboard:chart_scale', args=[round_.slug])}?{query}",
             lambda: scale_data(user, round_, benchmark, division)),
        kept("chart-scaling", parts, round_.pk, "scaling", "Scaling efficiency within a system family",
             "Same submitter and accelerator model at different sizes: speedup and efficiency against the "
             "family's smallest size. Derived — not an official score.",
             f"{reverse('leaderboard:chart_scaling', args=[round_.slug])}?{query}",
             lambda: scaling_data(user, round_, benchmark, division)),
        kept("chart-spread", parts, round_.pk, "spread", "Run-to-run spread",
             "Coefficient of variation of the successful runs' times of each result, steadiest first. "
             "Derived — not an official score.",
             f"{reverse('leaderboard:chart_spread', args=[round_.slug])}?{query}",
             lambda: spread_data(user, round_, benchmark, division)),
        kept("chart-history", (benchmark.key, division, scale), None, "history",
             f"Round over round on {scale} accelerators",
             "The fastest result on exactly this many accelerators in each round, and the accelerator count of "
             "each round's fastest result. Rounds in publication order; the series is split where the "
             "benchmark under this key changed.",
             f"{reverse('leaderboard:chart_history', args=[benchmark.key])}?"
             f"{urlencode({'division': division, 'scale': scale})}",
             lambda: history_data(user, benchmark.key, division, scale), HISTORY_VARIANTS),
    ]
    in_view = scored_round_results(user, round_).filter(benchmark_key=benchmark.key, division=division)
    selected = in_view.filter(pk=asked_result).first() if asked_result is not None else None
    if selected is None:
        selected = in_view.order_by(F("runs_cv").desc(nulls_last=True), "pk").first()
    if selected is not None:
        context["run_times"] = section(
            "runs", "Run times of one result",
            "Each run's time to train; runs that olympic scoring dropped (or that failed) are drawn open.",
            reverse("leaderboard:chart_runs", args=[selected.pk]),
            cached_for(request.user, "chart-run-times", (selected.pk,), lambda: run_times_data(selected)),
        )
    # The results offered for a closer look: those with the largest spread (how the default is chosen), at most
    # CHOOSABLE (every result of the view made the page grow with the round: 1,000 options at 200,000 results),
    # and the one shown; any other opens from its result page.
    offered = (in_view.order_by(F("runs_cv").desc(nulls_last=True), "pk")
               .only("pk", "submitter", "system_name", "system_slug", "accelerator_count")[:CHOOSABLE])
    choosable = {r.pk: r for r in offered}
    if selected is not None:
        choosable.setdefault(selected.pk, selected)
    context.update({
        "scale": scale, "scales": sorted({*scales, scale}), "selected": selected,
        "choosable": sorted(choosable.values(), key=lambda r: (r.submitter, r.system_name, r.pk)),
        "more_results": len(offered) == CHOOSABLE and in_view.count() > CHOOSABLE,
    })
    return render_to_string("leaderboard/_charts_content.html", context), True
