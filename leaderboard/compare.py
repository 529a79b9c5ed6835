"""Two to four results side by side: facts, scores, system descriptions and hyperparameters.

A row is marked when its values differ, and the page warns when the results are not directly
comparable (another benchmark, round, division, category or scale). Hidden and missing ids get
the same answer, so the page never tells whether an embargoed result exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from core.errors import BadRequest, NotFound, Refusal
from core.numbers import ascii_whole
from ingest.metrics import METRICS
from ingest.models import Result, Run
from ingest.visibility import visible_results
from leaderboard import formatting

MIN_RESULTS, MAX_RESULTS = 2, 4
MISSING = "—"


@dataclass
class Row:
    label: str
    values: list[str]
    differs: bool
    # The stored value behind each shown one, for the title attribute ("" where it reads the same).
    exact: list[str] = field(default_factory=list)
    # Which result each value belongs to: the phone layout labels every value with it.
    labels: list[str] = field(default_factory=list)

    @property
    def cells(self) -> list[tuple[str, str, str]]:
        n = len(self.values)
        return list(zip(self.values, self.exact or [""] * n, self.labels or [""] * n, strict=True))


@dataclass
class Section:
    title: str
    rows: list[Row]
    note: str = ""


@dataclass
class Comparison:
    results: list[Result]
    sections: list[Section]
    warnings: list[str] = field(default_factory=list)


def parse_ids(values: Sequence[str]) -> list[int]:
    """`?ids=1,2,3` or repeated `?ids=1&ids=2` (a form of checkboxes); duplicates count once."""
    ids = parse_id_list(values)
    if not MIN_RESULTS <= len(ids) <= MAX_RESULTS:
        raise BadRequest(f"Compare takes {MIN_RESULTS} to {MAX_RESULTS} different results; {len(ids)} given.")
    return ids


def parse_id_list(values: Sequence[str]) -> list[int]:
    """The ids as given, any number of them; a part that is not a whole number is a bad request."""
    ids: list[int] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            number = ascii_whole(part)  # at most 18 digits: beyond any primary key
            if number is None:
                raise BadRequest(f"“{part[:20]}” is not a result id: give whole numbers, e.g. ?ids=12,34.")
            if number not in ids:
                ids.append(number)
            if len(ids) > 100:
                raise BadRequest(f"Compare takes {MIN_RESULTS} to {MAX_RESULTS} different results.")
    return ids


def _text(value: Any) -> str:
    if value is None or value == "":
        return MISSING
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _row(label: str, raw: Sequence[Any], show: Callable[[Any], str] = _text) -> Row:
    # Compared on the stored values, shown formatted: two scores that round alike still count as different.
    keys = {json.dumps(None if v == "" else v, sort_keys=True, default=str) for v in raw}
    shown = [show(v) for v in raw]
    exact = [_text(v) if _text(v) != text else "" for v, text in zip(raw, shown, strict=True)]
    return Row(label=label, values=shown, differs=len(keys) > 1, exact=exact)


def _minutes(value: Any) -> str:
    return formatting.minutes(value)


def _figure(value: Any) -> str:
    return formatting.figure(value, 4)


def _percent(value: Any) -> str:
    return formatting.percent(value, 2)


def _union(mappings: Sequence[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for mapping in mappings:
        keys.update(dict.fromkeys(mapping))
    return list(keys)


def _dict_section(title: str, mappings: list[dict[str, Any]], note: str) -> Section:
    return Section(title=title, note=note,
                   rows=[_row(key, [m.get(key) for m in mappings]) for key in _union(mappings)])


def _warnings(results: list[Result]) -> list[str]:
    def distinct(values: Sequence[Any]) -> list[str]:
        return list(dict.fromkeys(_text(v) for v in values))

    warnings = []
    benchmarks = distinct([r.benchmark_key for r in results])
    if len(benchmarks) > 1:
        warnings.append(f"Different benchmarks ({', '.join(benchmarks)}): their times measure different work and "
                        "are not comparable.")
    rounds = distinct([r.round.name for r in results])
    if len(rounds) > 1:
        warnings.append(f"Different rounds ({', '.join(rounds)}): rules, reference code and software change "
                        "between rounds.")
    divisions = distinct([r.get_division_display() or None for r in results])
    if len(divisions) > 1:
        warnings.append(f"Different divisions ({', '.join(divisions)}): the open division may change the model "
                        "and training recipe, so closed and open results are ranked separately.")
    categories = distinct([r.get_category_display() or None for r in results])
    if len(categories) > 1:
        warnings.append(f"Different categories ({', '.join(categories)}): available, preview and research systems "
                        "are ranked separately.")
    scales = distinct([r.accelerator_count for r in results])
    if len(scales) > 1:
        warnings.append(f"Different scale ({', '.join(scales)} accelerators): time to train falls as systems grow; "
                        "accelerator-minutes (derived) relate time to size.")
    return warnings


def comparison_build(*, user: User | AnonymousUser, ids: list[int]) -> Comparison:
    found = {
        r.pk: r
        for r in visible_results(user).filter(pk__in=ids).select_related("round", "benchmark", "system",
                                                                          "organization")
    }
    for pk in ids:
        if pk not in found:
            # The same words for a result that does not exist and one the visitor may not see.
            raise NotFound(f"There is no result {pk} that you can see.")
    results = [found[pk] for pk in ids]
    first_runs: dict[int, Run] = {}
    for run in Run.objects.filter(result_id__in=ids).order_by("result_id", "position").only(
            "result_id", "position", "hyperparameters"):
        first_runs.setdefault(run.result_id, run)

    def facts(label: str, get: Callable[[Result], Any], show: Callable[[Any], str] = _text) -> Row:
        return _row(label, [get(r) for r in results], show)

    summary = Section("Result", [
        facts("Benchmark", lambda r: r.benchmark.name if r.benchmark else r.benchmark_key),
        facts("Round", lambda r: r.round.name),
        facts("Division", lambda r: r.get_division_display()),
        facts("Category", lambda r: r.get_category_display()),
        facts("System type", lambda r: r.get_system_type_display()),
        facts("Submitter", lambda r: r.submitter or r.organization.name),
        facts("System", lambda r: r.system_name or r.system_slug),
        facts("Accelerator", lambda r: r.accelerator_model),
        facts("Accelerators", lambda r: r.accelerator_count, formatting.count),
        facts("Hosts", lambda r: r.host_count, formatting.count),
        facts("Framework", lambda r: r.framework),
        facts("Verdict", lambda r: r.get_verdict_display()),
    ])
    official = Section("Official score", [
        facts("Score (minutes)", lambda r: r.score, _minutes),
        facts("Raw olympic mean (minutes)", lambda r: r.raw_score, _minutes),
        facts("Scaling factor", lambda r: r.scaling_factor, _figure),
        facts("Runs submitted / required / compliant",
              lambda r: f"{r.runs_count} / {_text(r.runs_required)} / {r.runs_compliant}"),
        facts("No score because", lambda r: r.no_score_reason),
    ])
    # METRICS entries start (label, Result field, unit, …); "score" is the official one, shown above.
    derived_rows = [facts(f"{spec[0]} ({spec[2]})", lambda r, name=spec[1]: getattr(r, name), _figure)
                    for key, spec in METRICS.items() if key != "score"]
    derived_rows.append(facts("Run-to-run CV", lambda r: r.runs_cv, _percent))
    derived = Section("Derived figures", derived_rows,
                      note="Derived — not an official score. How each is computed: docs/browsing.md.")
    description = _dict_section("System description", [r.system.description or {} for r in results],
                                "Every field of each system description, as submitted (the union of their keys).")
    hyperparameters = _dict_section(
        "Hyperparameters", [first_runs[r.pk].hyperparameters if r.pk in first_runs else {} for r in results],
        "As logged by each result's first run.",
    )
    sections = [summary, official, derived, description, hyperparameters]
    labels = [f"{r.submitter or r.organization.name} · {r.system_name or r.system_slug}" for r in results]
    for section in sections:
        for row in section.rows:
            row.labels = labels
    return Comparison(results=results, sections=sections, warnings=_warnings(results))


def _picked(user: User | AnonymousUser, ids: list[int]) -> list[Result]:
    # Only what the visitor may see: a hidden id is left out exactly as a missing one.
    found = {r.pk: r for r in visible_results(user).filter(pk__in=ids).select_related("round")}
    return [found[pk] for pk in ids if pk in found]


@require_safe
def compare_view(request: HttpRequest) -> HttpResponse:
    raw = request.GET.getlist("ids")
    context: dict[str, Any] = {"ids": ",".join(raw), "min": MIN_RESULTS, "max": MAX_RESULTS,
                               "only_differences": request.GET.get("only") == "differences"}
    if not raw:
        return render(request, "leaderboard/compare.html", context)
    try:
        ids = parse_id_list(raw)
        if len(ids) < MIN_RESULTS:
            # Not an error: one ticked box is half a selection. Keep it and ask for another.
            context.update({"ids": ",".join(map(str, ids)), "picked": _picked(request.user, ids),
                            "too_few": f"Pick at least {MIN_RESULTS} results to compare; "
                                       f"{len(ids) or 'none'} {'is' if len(ids) == 1 else 'are'} picked."})
            return render(request, "leaderboard/compare.html", context)
        comparison = comparison_build(user=request.user, ids=parse_ids(raw))
    except Refusal as refusal:
        context["error"] = refusal.message
        return render(request, "leaderboard/compare.html", context, status=refusal.status)
    only_differences = context["only_differences"]
    if only_differences:
        for section in comparison.sections:
            section.rows = [row for row in section.rows if row.differs]
    context.update({"comparison": comparison, "only_differences": only_differences,
                    "ids": ",".join(str(r.pk) for r in comparison.results)})
    return render(request, "leaderboard/compare.html", context)
