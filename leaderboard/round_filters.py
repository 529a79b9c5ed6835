"""The round page's filter bar: the chips that name each active filter, each a link that removes it.

A chip is built from the parsed view (leaderboard.table.TableView), not from the raw query string, so a
value the table ignored (an unknown division, a malformed number) shows no chip; its link is the current
view's query without that one filter (and without the page number: a narrower or wider view starts on
its first page). The links work without JavaScript; static/filters.js only swaps the page in place.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import QueryDict

from leaderboard.table import CATEGORIES, DIVISIONS, SYSTEM_TYPES, Choices, TableView

# Parameters that narrow the rows or the columns; what the view shows otherwise (metric, sort, order)
# survives "clear all".
FILTER_PARAMS = (
    "division",
    "category",
    "system_type",
    "submitter",
    "accelerator_model",
    "framework",
    "acc_min",
    "acc_max",
    "benchmark",
    "cols",
)


@dataclass(frozen=True)
class Chip:
    label: str  # what is filtered: "Division"
    value: str  # by what, as a person reads it: "Closed"
    remove_url: str  # the view without this filter ("?…", or "?" for the plain round)

    @property
    def text(self) -> str:
        return f"{self.label}: {self.value}"


def _clean(params: QueryDict) -> QueryDict:
    """The query without its page number and without empty values (a submitted form sends every field)."""
    clean = QueryDict(mutable=True)
    for key, values in params.lists():
        if key == "page":
            continue
        kept = [v for v in values if v.strip()]
        if kept:
            clean.setlist(key, kept)
    return clean


def _without(params: QueryDict, key: str, value: str | None = None) -> str:
    """The view's URL without `key` (or only without one of its values)."""
    query = params.copy()
    if value is None:
        query.pop(key, None)
    else:
        query.setlist(key, [v for v in query.getlist(key) if v != value])
    return f"?{query.urlencode()}"


def active_chips(params: QueryDict, view: TableView, choices: Choices) -> list[Chip]:
    """One chip per active filter, in the order of the filter bar."""
    query = _clean(params)
    chips: list[Chip] = []
    for key, label, names in (
        ("division", "Division", DIVISIONS),
        ("category", "Category", CATEGORIES),
        ("system_type", "System type", SYSTEM_TYPES),
    ):
        value = getattr(view, key)
        if value:
            chips.append(Chip(label, str(names.get(value, value)), _without(query, key)))
    submitter_names = dict(choices.submitters)
    for slug in dict.fromkeys(view.submitters):
        chips.append(Chip("Submitter", submitter_names.get(slug, slug), _without(query, "submitter", slug)))
    if view.accelerator_model:
        chips.append(Chip("Accelerator", view.accelerator_model, _without(query, "accelerator_model")))
    if view.framework:
        chips.append(Chip("Framework", f"contains “{view.framework}”", _without(query, "framework")))
    if view.accelerators_min is not None:
        chips.append(Chip("Accelerators", f"at least {view.accelerators_min:,}", _without(query, "acc_min")))
    if view.accelerators_max is not None:
        chips.append(Chip("Accelerators", f"at most {view.accelerators_max:,}", _without(query, "acc_max")))
    benchmark_names = {b.key: b.name for b in choices.benchmarks}
    if view.benchmark:
        chips.append(Chip("Ran", benchmark_names.get(view.benchmark, view.benchmark), _without(query, "benchmark")))
    shown = [benchmark_names[c] for c in view.columns if c in benchmark_names]
    if shown and len(shown) < len(benchmark_names):
        chips.append(Chip("Columns", ", ".join(shown), _without(query, "cols")))
    return chips


def clear_url(params: QueryDict) -> str:
    """The view with every filter removed; the metric and the sort stay."""
    query = _clean(params)
    for key in FILTER_PARAMS:
        query.pop(key, None)
    return f"?{query.urlencode()}"
