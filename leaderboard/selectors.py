"""Reads behind the public pages that are the read side's own (visibility itself: ingest.visibility)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import quote

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber
from django.urls import reverse

from accounts.access import UPLOAD_ROLES
from accounts.models import Organization
from accounts.viewer import Visitor, viewer_of
from catalog.models import Benchmark, Round
from ingest.models import Result, System
from ingest.visibility import (
    viewer_fingerprint,
    visible_results,
    visible_results_of_rounds,
    visible_round_results,
    visible_rounds,
    visible_systems,
)
from leaderboard.addresses import template
from leaderboard.cache import kept_by_round, round_dates
from leaderboard.header import header


@dataclass(frozen=True)
class ResultCounts:
    """Current results the visitor may see, counted per round (results, organizations), per benchmark and
    per accelerator model; and the organizations they are of."""

    rounds: dict[int, tuple[int, int]]
    benchmarks: dict[str, int]
    accelerators: dict[str, int]
    organizations: set[int]


def result_counts(user: Visitor) -> ResultCounts:
    """The visible current results counted round by round (the only part of the home page, the benchmark
    list and the search whose cost grows with the data). Each round's counts are kept (kept_by_round) per
    data version of that round and what the visitor may see beyond the public record, so the first request
    after an upload recounts that upload's round alone (5 ms at 20,000 results in it; all rounds at once,
    200,000 results, took 100 ms)."""
    kept = kept_by_round("round-result-summary", (viewer_fingerprint(user),), partial(_round_counts, user))
    rounds: dict[int, tuple[int, int]] = {}
    benchmarks: dict[str, int] = {}
    accelerators: dict[str, int] = {}
    organizations: set[int] = set()
    for round_id, (results, round_organizations, by_benchmark, by_accelerator) in kept.items():
        if results:
            rounds[round_id] = (results, len(round_organizations))
        organizations.update(round_organizations)
        for key, n in by_benchmark.items():
            benchmarks[key] = benchmarks.get(key, 0) + n
        for model, n in by_accelerator.items():
            accelerators[model] = accelerators.get(model, 0) + n
    return ResultCounts(rounds, benchmarks, accelerators, organizations)


# A round's counts as kept: (results, its organizations' ids, results per benchmark key, results per
# accelerator model). Plain tuples and dicts, so that what the cache holds unpickles whatever this module
# becomes.
_RoundCounts = tuple[int, tuple[int, ...], dict[str, int], dict[str, int]]


def _round_counts(user: Visitor, stale: list[int]) -> dict[int, _RoundCounts]:
    """Each stale round's counts (_RoundCounts), summed here once from its (organization, accelerator model,
    benchmark) groups: a round's submitters are its distinct organizations, and these groups are far fewer
    than its results. One query per round: each reads an index alone, in its order (result_table_choices:
    the embargo decided for the round beforehand, no join, COUNT(*); 12 -> 5 ms at 20,000 results), where one
    query over all of them scanned the table (200 ms at 200,000). The groups themselves were kept before,
    1,200 a round in the bench's data: every signed-in view of the home page unpickled and summed 12,000 of
    them, twice (half of its 120 ms of CPU)."""
    counts: dict[int, _RoundCounts] = {}
    for round_ in Round.objects.filter(pk__in=stale).only("publication_date"):
        # Grouped in the index's column order (a sorted pass).
        groups = (visible_round_results(user, round_).current().order_by()
                  .values_list("organization_id", "accelerator_model", "benchmark_key").annotate(n=Count("*")))
        results = 0
        organizations: set[int] = set()
        benchmarks: dict[str, int] = {}
        accelerators: dict[str, int] = {}
        for organization_id, model, key, n in groups:
            results += n
            organizations.add(organization_id)
            benchmarks[key] = benchmarks.get(key, 0) + n
            if model:
                accelerators[model] = accelerators.get(model, 0) + n
        counts[round_.pk] = (results, tuple(sorted(organizations)), benchmarks, accelerators)
    return {pk: counts.get(pk, (0, (), {}, {})) for pk in stale}


@dataclass(frozen=True)
class RoundSummary:
    round: Round
    results: int
    organizations: int


def rounds_overview(user: Visitor) -> list[RoundSummary]:
    """The rounds with current results the visitor may see, those results and their organizations
    counted: a count that included a hidden or held result would give it away."""
    counts = result_counts(user).rounds
    rounds = visible_rounds(user).filter(pk__in=counts).order_by("-publication_date", "-pk")
    return [RoundSummary(r, *counts[r.pk]) for r in rounds]


# --- issue 15: the home page, benchmark, organization and system-history pages, search ----------------


@dataclass(frozen=True)
class Highlight:
    """The fastest official result of one benchmark in a round (closed division first: open results
    change the model and are not comparable with closed ones)."""

    benchmark: Benchmark
    result: Result | None


def openable_round_ids(user: Visitor) -> list[int]:
    """The ids of the rounds the visitor may open (ingest.visibility.visible_rounds), in id order."""
    return list(visible_rounds(user).order_by("pk").values_list("pk", flat=True))


def newest_published_round(user: Visitor) -> Round | None:
    """The newest published round that holds a current result the visitor may see."""
    holds = visible_results(user).current().filter(round=OuterRef("pk"))
    return visible_rounds(user).published().filter(Exists(holds)).order_by("-publication_date", "-pk").first()


def round_highlights(user: Visitor, round_: Round) -> list[Highlight]:
    """Per benchmark, its fastest closed result or, where there is none, its fastest of any division. The
    round's benchmarks are read with both picks' ids, each a subquery that reads the first entry of an index
    (result_chart_points), not the round; then the picked results. Two queries: one `first()` per benchmark
    and division (nine in the bench's rounds) cost the home page a third of its time, signed in."""
    ranked = visible_round_results(user, round_).current().ranked().order_by("score", "pk")

    def fastest(**among: Any) -> Subquery:
        return Subquery(ranked.filter(benchmark_key=OuterRef("key"), **among).values("pk")[:1])

    benchmarks = list(round_.benchmarks.annotate(closed_pick=fastest(division=System.Division.CLOSED),
                                                 any_pick=fastest()))
    picks = {b.pk: b.closed_pick if b.closed_pick is not None else b.any_pick for b in benchmarks}
    results = Result.objects.select_related("organization", "system").in_bulk(
        [pk for pk in picks.values() if pk is not None])
    return [Highlight(b, results.get(picks[b.pk])) for b in benchmarks]


@dataclass(frozen=True)
class BenchmarkSummary:
    key: str
    name: str
    area: str
    target_text: str
    rounds: int
    results: int


def benchmarks_overview(user: Visitor) -> list[BenchmarkSummary]:
    """Every benchmark key of the rounds the visitor may open, as its newest round defines it, with the
    number of rounds defining it and of current results the visitor may see."""
    definitions = (Benchmark.objects.filter(round__in=visible_rounds(user))
                   .select_related("round").order_by("position", "key", "-round__publication_date", "-round__pk"))
    counts = result_counts(user).benchmarks
    seen: dict[str, BenchmarkSummary] = {}
    round_counts: dict[str, int] = {}
    for definition in definitions:
        round_counts[definition.key] = round_counts.get(definition.key, 0) + 1
        if definition.key not in seen:
            seen[definition.key] = BenchmarkSummary(definition.key, definition.name, definition.area,
                                                    definition.target_text, 0, counts.get(definition.key, 0))
    return [BenchmarkSummary(s.key, s.name, s.area, s.target_text, round_counts[s.key], s.results)
            for s in seen.values()]


@dataclass(frozen=True)
class RoundResults:
    round: Round
    benchmark: Benchmark | None
    results: list[Result]
    total: int = 0  # how many results the round has in all, where `results` shows only the first ones


BENCHMARK_ROUND_ROWS = 25  # per round on a benchmark's page; the round's table has them all
ORGANIZATION_ROUND_ROWS = 50  # per round on an organization's page; likewise


def _first_of_each_round(user: Visitor, round_ids: list[int],
                         results_of: Callable[[QuerySet[Round]], QuerySet[Result]], order: list[Any], limit: int,
                         ) -> tuple[list[Result], dict[int, int]]:
    """The first `limit` of each of the rounds `round_ids`' `results_of(rounds)` by `order`, in that order
    (round by round), with their round, organization and benchmark, and how many each round has. The
    numbering reads a few columns of every row; only the picked rows are read whole (all of a benchmark's
    20,000, with their round, organization and system, took 0.3 s). The pages keep what they make of each
    round (leaderboard.pages.round_sections), so after an upload only its round is asked for again."""
    rounds = Round.objects.filter(pk__in=round_ids).only("publication_date").order_by()
    picked = (results_of(rounds).order_by()
              .annotate(place=Window(RowNumber(), partition_by=[F("round_id")], order_by=order),
                        in_round=Window(Count("pk"), partition_by=[F("round_id")]))
              .filter(place__lte=limit).values_list("pk", "round_id", "place", "in_round"))
    place: dict[int, int] = {}
    totals: dict[int, int] = {}
    for pk, round_id, n, in_round in picked:
        place[pk] = n
        totals[round_id] = in_round
    if not place:
        return [], totals
    # Only what the pages show (LISTED_COLUMNS): the whole rows of 250 results, with their round,
    # organization, benchmark and system, were most of a benchmark page's 170 ms of CPU, signed in. The
    # system is not joined: its page's address is made from the result's system_id (`system_url`).
    rows = (visible_results(user).filter(pk__in=place).select_related("round", "organization", "benchmark")
            .only(*LISTED_COLUMNS))
    return _with_urls(sorted(rows, key=lambda r: (r.round_id, place[r.pk]))), totals


# What a benchmark's or an organization's page shows of each result (templates leaderboard/benchmark.html and
# organization.html): anything else a template reads costs a query per row (tests count them).
LISTED_COLUMNS = (
    "id", "round_id", "organization_id", "system_id", "benchmark_id", "system_name", "system_slug", "benchmark_key",
    "division", "accelerator_count", "accelerator_model", "score", "verdict", "withdrawn_at",
    "round__slug", "round__name", "round__publication_date", "organization__slug", "organization__name",
    "benchmark__name",
)


def _with_urls(results: list[Result]) -> list[Result]:
    """Each result with `url`, `system_url` and `organization_url`, the addresses of its page, its system's
    and its organization's, from one reversal each: the id or slug is formatted in, not reversed per row
    (two reversals per row were a tenth of the page). A slug is quoted as reverse() would (a SlugField's
    letters need none)."""
    result_url, system_url, organization_url = (
        template(name) for name in ("leaderboard:result", "leaderboard:system", "leaderboard:organization"))
    for result in results:
        result.url = result_url.format(result.pk)  # type: ignore[attr-defined]
        result.system_url = system_url.format(result.system_id)  # type: ignore[attr-defined]
        result.organization_url = organization_url.format(quote(result.organization.slug, safe=""))  # type: ignore[attr-defined]
    return results


def benchmark_definitions(user: Visitor, key: str) -> list[Benchmark]:
    """Benchmark `key` as defined by each round the visitor may open that defines it (with that round), the
    newest round first."""
    definitions = Benchmark.objects.filter(key=key, round__in=visible_rounds(user)).select_related("round")
    return sorted(definitions, key=lambda b: _newest_first(b.round_id, b.round.publication_date), reverse=True)


def benchmark_known(key: str) -> bool:
    """Whether any round defines benchmark `key` or any result names it (a result whose folder names no
    benchmark of its round keeps the name), whoever may see them: two index probes."""
    return Benchmark.objects.filter(key=key).exists() or Result.objects.filter(benchmark_key=key).exists()


def benchmark_rounds(user: Visitor, key: str, definitions: list[Benchmark], round_ids: list[int]
                     ) -> list[RoundResults]:
    """Of the rounds `round_ids`, each that has one of `definitions` (benchmark_definitions) or results of
    benchmark `key` the visitor may see, with those results, best first (official scores by score, then the
    rest): the first BENCHMARK_ROUND_ROWS of each, and how many there are, so the page's size does not grow
    with a round. In no particular order."""
    wanted = set(round_ids)
    defined = {b.round_id: b for b in definitions if b.round_id in wanted}
    # Official: verified with a score (these are current results, none withdrawn: official_q less the
    # withdrawal, a column the index below lacks). With the embargo decided round by round (no join), the
    # numbering reads result_chart_points alone, already in round and score order: 56 -> 28 ms for a
    # benchmark's 25,000 results (PostgreSQL).
    official = Case(When(score__isnull=False, verdict=Result.Verdict.VERIFIED, then=Value(0)), default=Value(1),
                    output_field=IntegerField())
    results, totals = _first_of_each_round(
        user, round_ids,
        lambda rounds: visible_results_of_rounds(user, rounds).current().filter(benchmark_key=key),
        [official.asc(), F("score").asc(nulls_last=True), F("pk").asc()], BENCHMARK_ROUND_ROWS)
    by_round: dict[int, list[Result]] = {}
    rounds: dict[int, Round] = {b.round_id: b.round for b in defined.values()}
    for result in results:
        by_round.setdefault(result.round_id, []).append(result)
        rounds.setdefault(result.round_id, result.round)
    return [RoundResults(r, defined.get(pk), by_round.get(pk, []), totals.get(pk, 0)) for pk, r in rounds.items()]


def _newest_first(round_id: int, publication_date: Any) -> tuple[bool, Any, int]:
    """A round's place with reverse=True: published rounds newest first, then those without a date."""
    return (publication_date is not None, publication_date, round_id)


def newest_first(round_ids: Iterable[int]) -> list[int]:
    """The rounds `round_ids` in the order of _newest_first, from the publication dates the cache's keys
    were made with (leaderboard.cache.round_dates): no query."""
    dates = round_dates()
    return sorted(round_ids, key=lambda pk: _newest_first(pk, dates.get(pk)), reverse=True)


def organization_results(user: Visitor, organization: Organization, round_ids: list[int]) -> list[RoundResults]:
    """Of the rounds `round_ids`, each with current results of the organization the visitor may see, by
    system: the first ORGANIZATION_ROUND_ROWS of each round, and how many there are. In no particular order."""
    results, totals = _first_of_each_round(
        user, round_ids,
        lambda rounds: visible_results_of_rounds(user, rounds).current().filter(organization=organization),
        [F("system_slug").asc(), F("benchmark__position").asc(nulls_last=True), F("benchmark_key").asc(),
         F("pk").asc()], ORGANIZATION_ROUND_ROWS)
    grouped: dict[int, RoundResults] = {}
    for result in results:
        grouped.setdefault(result.round_id, RoundResults(result.round, None, [], totals[result.round_id])
                           ).results.append(result)
    return list(grouped.values())


ORGANIZATION_SYSTEMS = 50  # the newest on an organization's page; each round's table lists its systems


def organization_systems(user: Visitor, organization: Organization) -> tuple[list[System], int]:
    """The organization's systems (by slug) the visitor may see, each as its newest round describes it: the
    ORGANIZATION_SYSTEMS newest (by that round), and how many there are. Numbered in SQL over a few
    columns, so the page reads one row per system shown, not one per system and round."""
    newest = Window(RowNumber(), partition_by=[F("slug")],
                    order_by=[F("round__publication_date").desc(nulls_last=True), F("round_id").desc()])
    picked = list(visible_systems(user).filter(organization=organization).order_by().annotate(place=newest)
                  .filter(place=1).order_by(F("round__publication_date").desc(nulls_last=True), "-round_id", "slug")
                  .values_list("pk", flat=True))
    shown = picked[:ORGANIZATION_SYSTEMS]
    systems = visible_systems(user).filter(pk__in=shown).select_related("round").defer("description")
    order = {pk: i for i, pk in enumerate(shown)}
    return sorted(systems, key=lambda s: order[s.pk]), len(picked)


def system_history(user: Visitor, system: System) -> list[RoundResults]:
    """The same system (organization and slug) in every round the visitor may see, newest first."""
    results = (visible_results(user).current().filter(organization_id=system.organization_id,
                                                      system_slug=system.slug)
               .select_related("round", "system", "benchmark")
               .order_by("-round__publication_date", "-round__pk", "benchmark__position", "benchmark_key"))
    grouped: dict[int, RoundResults] = {}
    for result in results:
        grouped.setdefault(result.round_id, RoundResults(result.round, None, [])).results.append(result)
    return list(grouped.values())


SEARCH_LIMIT = 20
SEARCH_MAX = 100


@dataclass
class SearchHits:
    query: str
    organizations: list[Organization] = field(default_factory=list)
    systems: list[System] = field(default_factory=list)
    accelerators: list[tuple[str, int]] = field(default_factory=list)
    benchmarks: list[BenchmarkSummary] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.organizations) + len(self.systems) + len(self.accelerators) + len(self.benchmarks)


def search(user: Visitor, query: str) -> SearchHits:
    """Organizations, systems, accelerator models and benchmarks whose names contain `query`, among what
    the visitor may see (a name that exists only in embargoed results is not found)."""
    query = query.strip()[:SEARCH_MAX]
    hits = SearchHits(query)
    if len(query) < 2:
        return hits
    current = visible_results(user).current()
    hits.organizations = list(
        Organization.objects.filter(Q(name__icontains=query) | Q(slug__icontains=query),
                                    pk__in=current.values("organization_id")).order_by("name")[:SEARCH_LIMIT])
    # A system counts with a current result the visitor may see: asked of each system the words match (an
    # index on the result's system), not by reading every visible result (25 ms at 200,000 results).
    systems = (visible_systems(user).filter(Q(name__icontains=query) | Q(slug__icontains=query)
                                            | Q(accelerator_model_name__icontains=query))
               .filter(Exists(current.filter(system_id=OuterRef("pk"))))
               .select_related("round", "organization").defer("description")
               .order_by("organization__name", "slug", "-round__publication_date"))
    newest: dict[tuple[int, str], System] = {}
    for system in systems[: SEARCH_LIMIT * 5]:
        newest.setdefault((system.organization_id, system.slug), system)  # one hit per system, its newest round
    hits.systems = list(newest.values())[:SEARCH_LIMIT]
    # From the counts kept per round: matching the models' names reads no result.
    needle = query.casefold()
    found = [(model, n) for model, n in result_counts(user).accelerators.items() if needle in model.casefold()]
    hits.accelerators = sorted(found, key=lambda hit: (-hit[1], hit[0]))[:SEARCH_LIMIT]
    hits.benchmarks = [b for b in benchmarks_overview(user)
                       if query.lower() in f"{b.key} {b.name} {b.area}".lower()][:SEARCH_LIMIT]
    return hits


@dataclass(frozen=True)
class NavLink:
    label: str
    url: str
    group: str  # "submit" | "review" | "organization" | "operate" | "account"


def persona_links(user: Visitor) -> list[NavLink]:
    """What the signed-in visitor can do, as links: uploads for submitters, a review dashboard per chaired
    round, the members page of each organization, the operators' page for staff, tokens and notifications."""
    viewer = viewer_of(user)
    if not viewer.is_authenticated:
        return []
    links = []
    if viewer.organization_ids(UPLOAD_ROLES) or viewer.is_staff:
        links.append(NavLink("Submit", reverse("ingest:upload"), "submit"))
    if viewer.organization_ids() or viewer.is_staff:
        links.append(NavLink("My submissions", reverse("ingest:submissions"), "submit"))
    read = header(user)  # one statement with the unread count the page shows too
    for name, slug in read.chaired:
        links.append(NavLink(f"Review {name}", reverse("reviews:dashboard", args=[slug]), "review"))
    for name, slug in read.organizations:
        links.append(NavLink(f"{name} members", reverse("accounts:members", args=[slug]), "organization"))
    if viewer.is_staff:
        links.append(NavLink("Runners", reverse("runners:operators"), "operate"))
    links.append(NavLink("API tokens", reverse("accounts:tokens"), "account"))
    return links
