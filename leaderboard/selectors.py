"""Reads behind the public pages that are the read side's own (visibility itself: ingest.visibility)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Q
from django.urls import reverse

from accounts.access import UPLOAD_ROLES
from accounts.models import Organization
from accounts.viewer import Visitor, viewer_of
from catalog.models import Benchmark, Round
from ingest.models import Result, System
from ingest.visibility import visible_results, visible_rounds, visible_systems


def rounds_overview(user: Visitor) -> list[Round]:
    """The rounds with current results the visitor may see, those results and their organizations
    counted: a count that included a hidden or held result would give it away."""
    visible = Q(results__in=visible_results(user).current().values("pk"))
    return list(
        visible_rounds(user)
        .annotate(
            result_count=Count("results", filter=visible, distinct=True),
            organization_count=Count("results__organization", filter=visible, distinct=True),
        )
        .filter(result_count__gt=0)
        .order_by("-publication_date", "-pk")
    )


# --- issue 15: the home page, benchmark, organization and system-history pages, search ----------------


@dataclass(frozen=True)
class Highlight:
    """The fastest official result of one benchmark in a round (closed division first: open results
    change the model and are not comparable with closed ones)."""

    benchmark: Benchmark
    result: Result | None


def newest_published_round(user: Visitor) -> Round | None:
    """The newest published round that holds a current result the visitor may see."""
    rounds = (visible_rounds(user).published().filter(results__in=visible_results(user).current().values("pk"))
              .order_by("-publication_date", "-pk"))
    return rounds.first()


def round_highlights(user: Visitor, round_: Round) -> list[Highlight]:
    ranked = (visible_results(user).current().ranked().filter(round=round_)
              .select_related("organization", "system").order_by("score", "pk"))
    best: dict[str, Result] = {}
    for result in ranked:
        held = best.get(result.benchmark_key)
        # The first of each key is the fastest; a closed result replaces an open one.
        if held is None or (held.division != System.Division.CLOSED and result.division == System.Division.CLOSED):
            best[result.benchmark_key] = result
    return [Highlight(benchmark, best.get(benchmark.key)) for benchmark in round_.benchmarks.all()]


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
    counts = dict(visible_results(user).current().values("benchmark_key").annotate(n=Count("pk"))
                  .values_list("benchmark_key", "n"))
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


def benchmark_rounds(user: Visitor, key: str) -> list[RoundResults]:
    """Each visible round that defines benchmark `key` (newest first) with its current results the visitor
    may see, best first: official scores by score, then the rest."""
    definitions = {b.round_id: b for b in Benchmark.objects.filter(key=key, round__in=visible_rounds(user))
                   .select_related("round")}
    results = (visible_results(user).current().filter(benchmark_key=key)
               .select_related("round", "organization", "system").order_by("round", "score", "pk"))
    by_round: dict[int, list[Result]] = {}
    rounds: dict[int, Round] = {b.round_id: b.round for b in definitions.values()}
    for result in results:
        by_round.setdefault(result.round_id, []).append(result)
        rounds.setdefault(result.round_id, result.round)
    ordered = sorted(rounds.values(), key=lambda r: (r.publication_date is not None, r.publication_date, r.pk),
                     reverse=True)
    return [RoundResults(r, definitions.get(r.pk), sorted(by_round.get(r.pk, []), key=_best_first))
            for r in ordered]


def _best_first(result: Result) -> tuple[bool, float, int]:
    return (not result.is_official, result.score if result.score is not None else float("inf"), result.pk)


def organization_results(user: Visitor, organization: Organization) -> list[RoundResults]:
    """The organization's current results the visitor may see, per round (newest first), by system."""
    results = (visible_results(user).current().filter(organization=organization)
               .select_related("round", "system", "benchmark")
               .order_by("-round__publication_date", "-round__pk", "system_slug", "benchmark__position",
                         "benchmark_key"))
    grouped: dict[int, RoundResults] = {}
    for result in results:
        grouped.setdefault(result.round_id, RoundResults(result.round, None, [])).results.append(result)
    return list(grouped.values())


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
    systems = (visible_systems(user).filter(Q(name__icontains=query) | Q(slug__icontains=query)
                                            | Q(accelerator_model_name__icontains=query),
                                            pk__in=current.values("system_id"))
               .select_related("round", "organization").order_by("organization__name", "slug",
                                                                 "-round__publication_date"))
    newest: dict[tuple[int, str], System] = {}
    for system in systems[: SEARCH_LIMIT * 5]:
        newest.setdefault((system.organization_id, system.slug), system)  # one hit per system, its newest round
    hits.systems = list(newest.values())[:SEARCH_LIMIT]
    hits.accelerators = list(current.filter(accelerator_model__icontains=query).values("accelerator_model")
                             .annotate(n=Count("pk")).order_by("-n", "accelerator_model")
                             .values_list("accelerator_model", "n")[:SEARCH_LIMIT])
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
    chaired = Round.objects.filter(pk__in=viewer.chaired_round_ids) if not viewer.is_staff else \
        Round.objects.in_review()
    for round_ in chaired.order_by("-submission_deadline")[:5]:
        links.append(NavLink(f"Review {round_.name}", reverse("reviews:dashboard", args=[round_.slug]), "review"))
    for organization in Organization.objects.filter(pk__in=viewer.organization_ids()).order_by("name"):
        links.append(NavLink(f"{organization.name} members", reverse("accounts:members", args=[organization.slug]),
                             "organization"))
    if viewer.is_staff:
        links.append(NavLink("Runners", reverse("runners:operators"), "operate"))
    links.append(NavLink("API tokens", reverse("accounts:tokens"), "account"))
    return links
