"""The round table: parse a view from the query string, build rows (systems) × columns (benchmarks).

Everything a visitor chooses (filters, columns, metric, sort) lives in the query string, so the URL
is a permalink of the view, and the CSV/JSON export of that URL is exactly what the page shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.http import QueryDict

from accounts.viewer import Visitor
from catalog.models import Benchmark, Round
from ingest.metrics import METRICS
from ingest.models import Result, System
from ingest.visibility import visible_results

DIVISIONS = dict(System.Division.choices)
CATEGORIES = dict(System.Category.choices)
SYSTEM_TYPES = dict(System.SystemType.choices)
ROW_SORTS = {"submitter": "Submitter", "system": "System", "accelerators": "Accelerators", "hosts": "Hosts"}


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


@dataclass(frozen=True)
class TableView:
    division: str = ""
    category: str = ""
    system_type: str = ""
    submitters: tuple[str, ...] = ()
    accelerator_model: str = ""
    framework: str = ""
    accelerators_min: int | None = None
    accelerators_max: int | None = None
    benchmark: str = ""
    columns: tuple[str, ...] = ()
    metric: str = "score"
    sort: str = ""
    descending: bool = False

    @classmethod
    def from_query(cls, params: QueryDict) -> TableView:
        """Unknown or malformed values are dropped, never an error: a shared link keeps working."""
        def one(name: str, allowed: dict[str, Any] | None = None) -> str:
            value = params.get(name, "").strip()
            return value if allowed is None or value in allowed else ""

        columns = tuple(c for c in params.get("cols", "").split(",") if c)
        return cls(
            division=one("division", DIVISIONS),
            category=one("category", CATEGORIES),
            system_type=one("system_type", SYSTEM_TYPES),
            submitters=tuple(s for s in params.getlist("submitter") if s),
            accelerator_model=one("accelerator_model")[:200],
            framework=one("framework")[:100],
            accelerators_min=_int(params.get("acc_min")),
            accelerators_max=_int(params.get("acc_max")),
            benchmark=one("benchmark")[:60],
            columns=columns,
            metric=one("metric", METRICS) or "score",
            sort=one("sort")[:60],
            descending=params.get("order") == "desc",
        )

    @property
    def metric_label(self) -> str:
        return METRICS[self.metric][0]

    @property
    def metric_unit(self) -> str:
        return METRICS[self.metric][2]

    @property
    def metric_formula(self) -> str:
        return METRICS[self.metric][3]

    @property
    def is_derived(self) -> bool:
        return self.metric != "score"


def filtered_results(round_: Round, view: TableView, user: Visitor) -> QuerySet[Result]:
    results = visible_results(user).current().filter(round=round_)
    if view.division:
        results = results.filter(division=view.division)
    if view.category:
        results = results.filter(system__category=view.category)
    if view.system_type:
        results = results.filter(system__system_type=view.system_type)
    if view.submitters:
        results = results.filter(organization__slug__in=view.submitters)
    if view.accelerator_model:
        results = results.filter(system__accelerator_model_name=view.accelerator_model)
    if view.framework:
        results = results.filter(system__framework__icontains=view.framework)
    if view.accelerators_min is not None:
        results = results.filter(system__accelerator_count__gte=view.accelerators_min)
    if view.accelerators_max is not None:
        results = results.filter(system__accelerator_count__lte=view.accelerators_max)
    if view.benchmark:
        # Rows (systems) that ran this benchmark, with all their other results too.
        results = results.filter(system_id__in=results.filter(benchmark_key=view.benchmark).values("system_id"))
    return results


@dataclass
class Cell:
    result: Result
    value: float | None


@dataclass
class Row:
    system: System
    cells: dict[str, Cell] = field(default_factory=dict)


@dataclass
class Section:
    division: str
    label: str
    rows: list[Row]


@dataclass
class Table:
    round: Round
    view: TableView
    benchmarks: list[Benchmark]
    all_benchmarks: list[Benchmark]
    sections: list[Section]
    result_count: int


def _sort_key(view: TableView, row: Row) -> tuple[Any, ...]:
    if view.sort in ROW_SORTS:
        value = {
            "submitter": row.system.organization.name.lower(),
            "system": (row.system.name or row.system.slug).lower(),
            "accelerators": row.system.accelerator_count if row.system.accelerator_count is not None else -1,
            "hosts": row.system.number_of_nodes if row.system.number_of_nodes is not None else -1,
        }[view.sort]
        return (value,)
    cell = row.cells.get(view.sort)
    if cell is None or cell.value is None:
        return (1, 0.0)  # rows without a value sink to the bottom, whatever the direction
    return (0, -cell.value if view.descending else cell.value)


def build_table(round_: Round, view: TableView, user: Visitor) -> Table:
    results = list(
        filtered_results(round_, view, user)
        .select_related("system__organization", "organization", "benchmark")
        .order_by("organization__name", "system_slug", "benchmark_key")
    )
    field_name = METRICS[view.metric][1]
    rows: dict[tuple[str, str, str], Row] = {}
    used: set[str] = set()
    for result in results:
        row = rows.setdefault((result.division or "", result.organization.name, result.system_slug),
                              Row(system=result.system))
        # Only an official score ranks: a result that is not verified keeps its cell, without a value to
        # sort on (it sinks below the ranked ones), and shows its raw number as "not official".
        value = getattr(result, field_name) if result.is_official else None
        row.cells[result.benchmark_key] = Cell(result=result, value=value)
        used.add(result.benchmark_key)
    all_benchmarks = [b for b in round_.benchmarks.all() if b.key in used]
    shown = [b for b in all_benchmarks if not view.columns or b.key in view.columns] or all_benchmarks
    sections = []
    for division, label in [*System.Division.choices, ("", "Division unknown (invalid system description)")]:
        section_rows = [row for key, row in rows.items() if key[0] == division]
        if view.sort:
            reverse = view.descending and view.sort in ROW_SORTS
            section_rows.sort(key=lambda r: _sort_key(view, r), reverse=reverse)
        if section_rows:
            sections.append(Section(division=division, label=label, rows=section_rows))
    return Table(round=round_, view=view, benchmarks=shown, all_benchmarks=all_benchmarks, sections=sections,
                 result_count=len(results))


@dataclass
class Choices:
    submitters: list[tuple[str, str]]
    accelerators: list[str]
    benchmarks: list[Benchmark]


def build_choices(round_: Round, user: Visitor) -> Choices:
    """What the filter form offers: only values present among the results this visitor may see."""
    base = visible_results(user).current().filter(round=round_)
    submitters = sorted(set(base.values_list("organization__slug", "organization__name")), key=lambda p: p[1].lower())
    accelerators = sorted(a for a in set(base.values_list("system__accelerator_model_name", flat=True)) if a)
    keys = set(base.values_list("benchmark_key", flat=True))
    return Choices(submitters=submitters, accelerators=accelerators,
                   benchmarks=[b for b in round_.benchmarks.all() if b.key in keys])


EXPORT_FIELDS = (
    "round", "ruleset", "submitter", "system", "system_name", "benchmark", "division", "category", "system_type",
    "accelerator_model", "accelerators", "hosts", "host_processors", "framework", "runs", "runs_compliant",
    "raw_score", "scaling_factor", "scaling_source", "score", "verdict", "accelerator_minutes", "host_minutes",
    "cloud_scale", "cloud_scale_minutes", "energy_kwh", "cost_to_train", "runs_cv", "url",
)


def export_rows(round_: Round, view: TableView, user: Visitor, base_url: str = "") -> list[dict[str, Any]]:
    """One row per result of the current view (long format), the official score beside derived figures."""
    results = (
        filtered_results(round_, view, user)
        .select_related("system", "organization")
        .order_by("division", "benchmark_key", "score", "organization__name", "system_slug")
    )
    if view.columns:
        results = results.filter(benchmark_key__in=view.columns)
    rows = []
    for r in results:
        rows.append({
            "round": round_.slug,
            "ruleset": round_.ruleset,
            "submitter": r.organization.name,
            "system": r.system_slug,
            "system_name": r.system.name,
            "benchmark": r.benchmark_key,
            "division": r.division,
            "category": r.system.category,
            "system_type": r.system.system_type,
            "accelerator_model": r.system.accelerator_model_name,
            "accelerators": r.system.accelerator_count,
            "hosts": r.system.number_of_nodes,
            "host_processors": r.system.host_processor_count,
            "framework": r.system.framework,
            "runs": r.runs_count,
            "runs_compliant": r.runs_compliant,
            "raw_score": r.raw_score,
            "scaling_factor": r.scaling_factor,
            "scaling_source": r.scaling_source,
            "score": r.score,
            "verdict": r.verdict,
            "accelerator_minutes": r.accelerator_minutes,
            "host_minutes": r.host_minutes,
            "cloud_scale": r.cloud_scale,
            "cloud_scale_minutes": r.cloud_scale_minutes,
            "energy_kwh": r.energy_kwh,
            "cost_to_train": r.cost_to_train,
            "runs_cv": r.runs_cv,
            "url": f"{base_url}{r.get_absolute_url()}",
        })
    return rows
