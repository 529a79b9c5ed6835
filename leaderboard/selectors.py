"""Reads behind the public pages: which results a visitor may see, and the round table."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Q

from ingest.models import Result, ResultQuerySet, System
from ingest.visibility import round_visible_q, visibility_q
from leaderboard.models import Benchmark, Round, RoundQuerySet

FACETS = {
    "division": dict(System.DIVISIONS),
    "category": dict(System.CATEGORIES),
    "system_type": dict(System.SYSTEM_TYPES),
}


def visible_rounds(user: AbstractBaseUser | AnonymousUser) -> RoundQuerySet:
    """Rounds whose page this visitor may open (see ingest.visibility for the rule)."""
    return Round.objects.filter(pk__in=Round.objects.filter(round_visible_q(user)).values("pk"))


def visible_results(user: AbstractBaseUser | AnonymousUser) -> ResultQuerySet:
    return Result.objects.filter(visibility_q(user))


def visible_systems(user: AbstractBaseUser | AnonymousUser):
    return System.objects.filter(visibility_q(user))


def rounds_overview(user: AbstractBaseUser | AnonymousUser) -> list[Round]:
    visible = visibility_q(user, prefix="results__") & Q(results__is_current=True)
    return list(
        visible_rounds(user)
        .annotate(
            result_count=Count("results", filter=visible, distinct=True),
            organization_count=Count("results__organization", filter=visible, distinct=True),
        )
        .filter(result_count__gt=0)
    )


@dataclass
class TableRow:
    system: System
    cells: dict[str, Result] = field(default_factory=dict)


@dataclass
class DivisionTable:
    division: str
    label: str
    rows: list[TableRow]


@dataclass
class RoundTable:
    round: Round
    benchmarks: list[Benchmark]
    divisions: list[DivisionTable]
    filters: dict[str, str]
    result_count: int


def clean_filters(params: dict[str, str]) -> dict[str, str]:
    """Keep only known facet values from a query string; unknown ones are ignored, not errors."""
    return {name: params[name] for name, allowed in FACETS.items() if params.get(name) in allowed}


def round_table(round_: Round, filters: dict[str, str], user: AbstractBaseUser | AnonymousUser) -> RoundTable:
    results = (
        visible_results(user)
        .current()
        .filter(round=round_)
        .select_related("system__organization", "organization", "benchmark")
        .order_by("organization__name", "system_slug", "benchmark_key")
    )
    for name, value in filters.items():
        results = results.filter(**{f"system__{name}": value})
    rows: dict[tuple[str, str, str], TableRow] = {}
    used_keys: set[str] = set()
    for result in results:
        key = (result.division or "", result.organization.name, result.system_slug)
        row = rows.setdefault(key, TableRow(system=result.system))
        row.cells[result.benchmark_key] = result
        used_keys.add(result.benchmark_key)
    benchmarks = [b for b in round_.benchmarks.all() if b.key in used_keys]
    divisions = []
    for division, label in [*System.DIVISIONS, ("", "Division unknown (invalid system description)")]:
        division_rows = [row for key, row in rows.items() if key[0] == division]
        if division_rows:
            divisions.append(DivisionTable(division=division, label=label, rows=division_rows))
    return RoundTable(
        round=round_, benchmarks=benchmarks, divisions=divisions, filters=filters,
        result_count=sum(len(r.cells) for r in rows.values()),
    )
