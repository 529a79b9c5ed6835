"""Plotly figure dicts for the charts pages, built from plain data (no Django import).

Every builder returns a `Chart`: the figure that plotly.js draws, the notes that say what the figure
leaves out or how it read the data, and a small table with the same numbers for readers without
JavaScript. Nothing here ranks across divisions or benchmarks, and nothing folds scale into a score:
the callers pass one division of one benchmark (see docs/browsing.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from leaderboard import formatting

# Okabe & Ito's colour-blind-safe palette (https://jfly.uni-koeln.de/color/), black left out for the
# front and target lines. Each series also gets its own marker symbol, and the two lists have coprime
# lengths, so the first 70 series differ in colour or shape even to a reader who sees no colour.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "triangle-down", "star", "pentagon", "hexagon",
           "cross"]
# static/charts.js repaints these two neutrals in the page's text colour in dark mode.
TARGET_COLOUR = "#444444"
FRONT_COLOUR = "#111111"
MAX_TICKS = 8

# Benchmarks whose eval_accuracy is not one number: the metric the quality target is about.
# maskrcnn logs {"BBOX": …, "SEGM": …} and its target is on box mAP first; stable_diffusion logs
# FID and CLIP as separate events, and Benchmark.quality_target holds the FID bound.
PRIMARY_METRIC = {"maskrcnn": "BBOX", "stable_diffusion": "FID"}
PRIMARY_LABELS = {"BBOX": "Box mAP (BBOX)", "FID": "FID"}
DROPPED_LABELS = {"fastest": "dropped: fastest", "slowest": "dropped: slowest", "failed": "dropped: failed"}


@dataclass(frozen=True)
class ResultPoint:
    """One current, scored result as the charts need it (copied from the Result row)."""

    id: int
    url: str
    submitter: str
    system: str
    accelerator_model: str
    accelerators: int | None
    hosts: int | None
    minutes: float | None
    runs_cv: float | None = None
    category: str = ""


@dataclass(frozen=True)
class RoundEntry:
    """One round's results for one benchmark key, for the round-over-round chart.

    `comparable` holds the benchmark facts that must match for times to be compared (model,
    dataset, quality target): MLCommons reused keys for new benchmarks, e.g. `ssd`.
    """

    label: str
    model: str
    comparable: tuple[Hashable, ...]
    results: tuple[ResultPoint, ...]


@dataclass(frozen=True)
class RunCurve:
    position: int
    dropped: str  # "" when the olympic mean keeps the run, else Run.dropped ("fastest", "slowest", "failed")
    points: tuple[dict[str, Any], ...]  # Run.eval_curve


@dataclass(frozen=True)
class RunTime:
    position: int
    minutes: float | None
    dropped: str


@dataclass(frozen=True)
class ScalingRow:
    family: str
    point: ResultPoint
    accelerators: int
    smallest: int
    speedup: float
    efficiency: float


@dataclass
class Chart:
    figure: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    # One line under the plot saying what to read from it; static/charts.js draws it.
    caption: str = ""
    # Set when there is nothing to draw: charts.js shows this text instead of bare axes.
    empty: str = ""

    def numeric_columns(self) -> list[int]:
        """Indexes of the table columns that hold only figures (or dashes): the page right-aligns them."""
        def is_figure(cell: str) -> bool:
            return _number(_parse(cell)) is not None or cell in ("—", "")

        return [i for i in range(len(self.columns))
                if self.rows and all(is_figure(row[i]) for row in self.rows if i < len(row))
                and any(_parse(row[i]) is not None for row in self.rows if i < len(row))]

    def as_json(self) -> dict[str, Any]:
        return {"figure": self.figure, "notes": self.notes, "caption": self.caption, "empty": self.empty,
                "table": {"columns": self.columns, "rows": self.rows}}


# ---------------------------------------------------------------------------------------------
# Small helpers


def _parse(cell: str) -> float | None:
    try:
        return float(cell.replace(",", "").rstrip("%"))
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


_minutes = formatting.minutes
_count = formatting.count


def style(index: int) -> tuple[str, str]:
    """The colour and marker symbol of the index-th series."""
    return PALETTE[index % len(PALETTE)], SYMBOLS[index % len(SYMBOLS)]


def _styles(names: Sequence[str]) -> dict[str, tuple[str, str]]:
    return {name: style(i) for i, name in enumerate(sorted(set(names)))}


def _marker(colour: str, symbol: str, size: int = 10) -> dict[str, Any]:
    return {"color": colour, "symbol": symbol, "size": size, "line": {"width": 1, "color": "#ffffff"}}


# ---------------------------------------------------------------------------------------------
# Axis ticks: plotly's automatic log ticks label minor ticks ("6 7 8 9 100 2 3") and print raw floats
# ("9.85396"); these give explicit tick values and texts instead.


def tick_text(value: float) -> str:
    """1, 1,024, 0.5, 2.5: three significant digits at most, no trailing zeros."""
    text = formatting.figure(value)
    return text.rstrip("0").rstrip(".") if "." in text else text


def _positive(values: Sequence[Any]) -> list[float]:
    return [v for v in (_number(x) for x in values) if v is not None and v > 0]


def count_ticks(values: Sequence[Any]) -> dict[str, Any]:
    """Log-axis ticks at powers of two (1, 2, 4, 8 …), thinned to powers of 4 or 8 (1, 8, 64, 512 …) so that
    no more than MAX_TICKS show; for accelerator and host counts, which are mostly powers of two."""
    numbers = _positive(values)
    if not numbers:
        return {}
    low, high = math.floor(math.log2(min(numbers))), math.ceil(math.log2(max(numbers)))
    step = 1
    while (high // step - math.ceil(low / step) + 1) > MAX_TICKS:
        step += 1
    exponents = [e for e in range(low, high + 1) if e % step == 0] or [low]
    ticks = [2.0 ** e for e in exponents]
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [tick_text(t) for t in ticks],
            "range": _log_range(numbers, ticks), "minor": {"showgrid": False}}


def value_ticks(values: Sequence[Any]) -> dict[str, Any]:
    """Log-axis ticks at 1, 2, 5 × 10^k (minutes, speedups), finer when the data span less than that."""
    numbers = _positive(values)
    if not numbers:
        return {}
    low, high = min(numbers) / 1.15, max(numbers) * 1.15
    ticks: list[float] = []
    for mantissas in ([1, 2, 5], [1, 1.5, 2, 3, 5, 7], [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9]):
        ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
                 for m in mantissas if low <= m * 10.0 ** e <= high]
        if len(ticks) >= 3:
            break
    if len(ticks) < 2:
        ticks = sorted({float(formatting.figure(v).replace(",", "")) for v in (min(numbers), max(numbers))})
    while len(ticks) > MAX_TICKS:
        ticks = ticks[::2]
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [tick_text(t) for t in ticks],
            "range": _log_range(numbers, ticks), "minor": {"showgrid": False}}


def _log_range(numbers: Sequence[float], ticks: Sequence[float]) -> list[float]:
    # A little room around the data (and the outer ticks) so markers are not cut in half at the edge.
    low = min(min(numbers) / 1.3, min(ticks) if min(ticks) >= min(numbers) / 2 else math.inf)
    high = max(max(numbers) * 1.3, max(ticks) if max(ticks) <= max(numbers) * 2 else -math.inf)
    return [math.log10(low), math.log10(high)]


def _scored(points: Sequence[ResultPoint]) -> list[ResultPoint]:
    return [p for p in points if p.minutes is not None and math.isfinite(p.minutes) and p.minutes > 0]


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 15}},
        "hovermode": "closest",
        "hoverlabel": {"align": "left"},
        "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
        # Beside the plot on wide screens; static/charts.js moves it below on narrow ones.
        "legend": {"orientation": "v"},
        "separators": ".,",
    }
    layout.update(extra)
    return layout


def _point_label(p: ResultPoint) -> str:
    return f"{p.submitter} · {p.system}"


# ---------------------------------------------------------------------------------------------
# Time to train against scale, with the Pareto front


def pareto_front(points: Sequence[ResultPoint]) -> list[ResultPoint]:
    """The results that no other result beats: none is as fast or faster on as many or fewer accelerators.

    Sorted by accelerator count. At one scale only the fastest result is on the front, and of
    exact ties (same count, same time) the first one given, so the front draws as one line. A larger
    system that only matches the time of a smaller one is not on the front. CPU-only results
    (0 accelerators) and results with an unknown count are left out: they have no place on the axis.
    """
    candidates = sorted((p for p in _scored(points) if p.accelerators), key=lambda p: (p.accelerators, p.minutes))
    front: list[ResultPoint] = []
    best = math.inf
    for point in candidates:
        assert point.minutes is not None
        if point.minutes < best:
            front.append(point)
            best = point.minutes
    return front


def scale_points_to_draw(points: Sequence[ResultPoint], limit: int) -> list[ResultPoint]:
    """At most `limit` of `points` (one per submitter and scale), in their order: the Pareto front, then
    the fastest submitter at each scale, then the second fastest at each, and so on, faster first within
    a place. What a reader compares at a scale is the front and its nearest rivals; a round ten times
    larger adds slower results at the same scales, not a chart ten times larger."""
    if len(points) <= limit:
        return list(points)
    place: dict[int, int] = {}
    seen: dict[tuple[Any, Any], int] = {}
    for point in sorted(points, key=lambda p: (p.minutes is None, p.minutes or 0.0, p.id)):
        scale = (point.accelerators, point.hosts if point.accelerators == 0 else None)
        seen[scale] = seen.get(scale, 0) + 1
        place[id(point)] = seen[scale]
    on_front = {id(p) for p in pareto_front(points)}
    ranked = sorted(points, key=lambda p: (id(p) not in on_front, place[id(p)], p.minutes is None, p.minutes or 0.0,
                                           p.id))
    kept = {id(p) for p in ranked[:limit]}
    return [p for p in points if id(p) in kept]


def _hover(axis_label: str = "") -> str:
    # The figures come pre-formatted in customdata (leaderboard.formatting), so hover and table agree.
    return ("<b>%{customdata[1]}</b><br>%{customdata[2]} · %{customdata[3]}<br>"
            "%{customdata[4]}<br>%{customdata[5]} min<extra>%{fullData.name}</extra>")


def _customdata(points: Sequence[ResultPoint]) -> list[list[Any]]:
    # The URL comes first: static/charts.js opens it when a point is clicked.
    return [[p.url, p.system, p.submitter, p.accelerator_model or "accelerator unknown",
             formatting.scale(p.accelerators, p.accelerator_model or "accelerators", p.hosts)
             if p.accelerators else f"CPU only, {_count(p.hosts)} host(s)",
             _minutes(p.minutes)] for p in points]


def scale_chart(points: Sequence[ResultPoint], *, title: str) -> Chart:
    """Time to train (y) against accelerator count (x), log–log, one trace per submitter plus the front."""
    scored = _scored(points)
    placed = sorted((p for p in scored if p.accelerators), key=lambda p: (p.accelerators, p.minutes, p.id))
    cpu_only = [p for p in scored if p.accelerators == 0]
    unknown = [p for p in scored if p.accelerators is None]
    styles = _styles([p.submitter for p in placed + cpu_only])
    # Each point's hover text is formatted once (by identity: two points may be equal), for its
    # submitter's trace, the front, the CPU trace and the table alike.
    hover = {id(p): row for p, row in zip(scored, _customdata(scored), strict=True)}
    traces: list[dict[str, Any]] = []
    # Grouped in one pass (a filter per submitter cost submitters x points: a round's largest charts grew
    # faster than their points).
    by_submitter: dict[str, list[ResultPoint]] = {}
    for point in placed:
        by_submitter.setdefault(point.submitter, []).append(point)
    for submitter, (colour, symbol) in styles.items():
        mine = by_submitter.get(submitter)
        if not mine:
            continue
        traces.append({
            "type": "scatter", "mode": "markers", "name": submitter, "legendgroup": submitter,
            "x": [p.accelerators for p in mine], "y": [p.minutes for p in mine],
            "customdata": [hover[id(p)] for p in mine], "hovertemplate": _hover(),
            "marker": _marker(colour, symbol, 11),
        })
    front = pareto_front(placed)
    if front:
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": "Pareto front (fastest at this scale or fewer)",
            "x": [p.accelerators for p in front], "y": [p.minutes for p in front],
            "customdata": [hover[id(p)] for p in front], "hovertemplate": _hover(),
            "line": {"color": FRONT_COLOUR, "width": 1.5, "shape": "hv"},
            "marker": {"color": FRONT_COLOUR, "size": 5, "symbol": "diamond"},
        })
    layout = _layout(
        title,
        xaxis={"type": "log", "title": {"text": "Accelerators (log scale)"},
               **count_ticks([p.accelerators for p in placed])},
        yaxis={"type": "log", "title": {"text": "Time to train, minutes (log scale)"},
               **value_ticks([p.minutes for p in scored if p.accelerators or p.hosts])},
    )
    notes: list[str] = []
    drawn_cpu = [p for p in cpu_only if p.hosts]
    if drawn_cpu:
        traces.append({
            "type": "scatter", "mode": "markers", "name": "CPU-only (x = hosts, top axis)", "xaxis": "x2",
            "x": [p.hosts for p in drawn_cpu], "y": [p.minutes for p in drawn_cpu],
            "customdata": [hover[id(p)] for p in drawn_cpu], "hovertemplate": _hover(),
            "marker": {"color": [styles[p.submitter][0] for p in drawn_cpu], "size": 10, "symbol": "square-open",
                       "line": {"width": 2}},
        })
        layout["xaxis2"] = {"type": "log", "overlaying": "x", "side": "top",
                            "title": {"text": "Hosts (CPU-only results)"}, **count_ticks([p.hosts for p in drawn_cpu])}
        # Room above the plot for the top axis, with the title above it rather than on it.
        layout["margin"]["t"] = 130
        layout["title"].update({"y": 0.98, "yanchor": "top"})
    if cpu_only:
        notes.append(
            f"{len(cpu_only)} CPU-only result(s) have 0 accelerators, which a log axis cannot show: they are "
            "drawn against their host count on the top axis (when known) and are not part of the Pareto front."
        )
    if unknown:
        names = ", ".join(_point_label(p) for p in unknown)
        notes.append(f"Not drawn, accelerator count unknown: {names}.")
    on_front = {id(p) for p in front}  # a point's own hash would hash every field, for each table row
    rows = [[p.submitter, p.system, p.accelerator_model or "—", _count(p.accelerators), _count(p.hosts),
             hover[id(p)][5], "yes" if id(p) in on_front else ""]
            for p in sorted(scored, key=lambda p: (p.accelerators or 0, p.minutes, p.id))]
    return Chart(
        figure={"data": traces, "layout": layout}, notes=notes,
        columns=["Submitter", "System", "Accelerator", "Accelerators", "Hosts", "Time to train (min)",
                 "Pareto front"],
        rows=rows,
        caption="Lower is faster, further left is smaller: the front line shows the fastest time reached "
                "on that many accelerators or fewer.",
        empty="" if traces else "No scored results in this division yet.",
    )


# ---------------------------------------------------------------------------------------------
# Round over round


def comparable_segments(entries: Sequence[RoundEntry]) -> list[list[RoundEntry]]:
    """Consecutive rounds whose benchmark is the same, so that their times may be joined by a line."""
    segments: list[list[RoundEntry]] = []
    for entry in entries:
        if segments and segments[-1][-1].comparable == entry.comparable:
            segments[-1].append(entry)
        else:
            segments.append([entry])
    return segments


def fastest(points: Sequence[ResultPoint]) -> ResultPoint | None:
    scored = _scored(points)
    return min(scored, key=lambda p: p.minutes) if scored else None  # type: ignore[arg-type, return-value]


def history_chart(entries: Sequence[RoundEntry], *, scale: int, title: str) -> Chart:
    """Per round in publication order: the fastest result on exactly `scale` accelerators, and on a
    second axis the accelerator count of the round's fastest result at any scale."""
    segments = comparable_segments(entries)
    split = len(segments) > 1
    traces: list[dict[str, Any]] = []
    rows: list[list[str]] = []
    missing: list[str] = []
    cpu_fastest: list[str] = []
    minutes_drawn: list[float | None] = []
    counts_drawn: list[int | None] = []
    for index, segment in enumerate(segments):
        # Two series per segment, each with its own colour and marker (2·index, 2·index + 1).
        time_colour, time_symbol = style(2 * index)
        count_colour, count_symbol = style(2 * index + 1)
        suffix = f" — {segment[0].model or 'model unknown'}" if split else ""
        group = f"segment-{index}"
        at_scale = [fastest([p for p in e.results if p.accelerators == scale]) for e in segment]
        overall = [fastest(e.results) for e in segment]
        labels = [e.label for e in segment]
        missing += [e.label for e, p in zip(segment, at_scale, strict=True) if p is None]
        cpu_fastest += [e.label for e, p in zip(segment, overall, strict=True) if p is not None and not p.accelerators]
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": f"Fastest on {scale} accelerators{suffix}",
            "legendgroup": group, "x": labels, "y": [p.minutes if p else None for p in at_scale],
            "customdata": [[p.url, p.system, p.submitter, _minutes(p.minutes)] if p else ["", "", "", ""]
                           for p in at_scale],
            "hovertemplate": "<b>%{customdata[1]}</b><br>%{customdata[2]}<br>%{customdata[3]} min<extra>%{x}</extra>",
            "line": {"color": time_colour, "width": 2}, "marker": _marker(time_colour, time_symbol, 10),
        })
        traces.append({
            "type": "scatter", "mode": "lines+markers", "yaxis": "y2",
            "name": f"Accelerators of the round's fastest result{suffix}", "legendgroup": group,
            "x": labels, "y": [p.accelerators if p is not None and p.accelerators else None for p in overall],
            "customdata": [[p.url, p.system, p.submitter, _minutes(p.minutes), _count(p.accelerators)]
                           if p else ["", "", "", "", ""] for p in overall],
            "hovertemplate": ("<b>%{customdata[1]}</b><br>%{customdata[2]}<br>%{customdata[4]} accelerators, "
                              "%{customdata[3]} min<extra>%{x}</extra>"),
            "line": {"color": count_colour, "dash": "dot", "width": 2},
            "marker": _marker(count_colour, count_symbol, 10),
        })
        minutes_drawn += traces[-2]["y"]
        counts_drawn += traces[-1]["y"]
        for entry, best_at_scale, best in zip(segment, at_scale, overall, strict=True):
            rows.append([
                entry.label, entry.model or "—",
                _minutes(best_at_scale.minutes) if best_at_scale else "—",
                _point_label(best_at_scale) if best_at_scale else "—",
                _minutes(best.minutes) if best else "—",
                _count(best.accelerators) if best else "—",
                _point_label(best) if best else "—",
            ])
    layout = _layout(
        title,
        xaxis={"type": "category", "categoryorder": "array", "categoryarray": [e.label for e in entries],
               "title": {"text": "Round (publication order)"}},
        yaxis={"type": "log", "title": {"text": f"Fastest on {scale} accelerators, minutes (log)"},
               **value_ticks(minutes_drawn)},
        yaxis2={"type": "log", "overlaying": "y", "side": "right", "showgrid": False,
                "title": {"text": "Accelerators of the fastest result (log)"}, **count_ticks(counts_drawn)},
        legend={"orientation": "h", "y": -0.25},
        margin={"l": 70, "r": 70, "t": 60, "b": 110},
    )
    notes: list[str] = []
    if split:
        shapes, annotations = [], []
        position = 0
        for before, after in pairwise(segments):
            position += len(before)
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": position - 0.5,
                           "x1": position - 0.5, "y0": 0, "y1": 1, "line": {"dash": "dash", "color": "#999999"}})
            annotations.append({"xref": "x", "yref": "paper", "x": position - 0.5, "y": 1.02, "showarrow": False,
                                "text": f"benchmark changed: {before[-1].model or '?'} → {after[0].model or '?'}"})
            notes.append(
                f"The benchmark under this key changed between {before[-1].label} and {after[0].label} "
                f"({before[-1].model or 'unknown'} → {after[0].model or 'unknown'}, or its dataset or quality "
                "target): the series is split there, and times on either side are not comparable."
            )
        layout["shapes"] = shapes
        layout["annotations"] = annotations
    if missing:
        notes.append(f"No result on exactly {scale} accelerators in: {', '.join(missing)}.")
    if cpu_fastest:
        notes.append(f"The fastest result is CPU-only (0 accelerators, not on the log axis) in: "
                     f"{', '.join(cpu_fastest)}.")
    drawn = any(v is not None for v in minutes_drawn + counts_drawn)
    return Chart(
        figure={"data": traces, "layout": layout}, notes=notes,
        columns=["Round", "Benchmark model", f"Fastest on {scale} accelerators (min)", "By",
                 "Fastest overall (min)", "Its accelerators", "By"],
        rows=rows,
        caption=f"A falling solid line means the fastest time on {scale} accelerators improved from round to "
                "round; the dotted line shows how large the overall fastest systems were.",
        empty="" if drawn else "No rounds with scored results for this benchmark and division yet.",
    )


# ---------------------------------------------------------------------------------------------
# Convergence curves


def primary_value(point: dict[str, Any], benchmark_key: str) -> tuple[float | None, str]:
    """The number of one eval point that the quality target is about, and the metric's name ("" if plain).

    A dict value (maskrcnn) gives its primary key. stable_diffusion logs FID and CLIP as separate
    scalar events: a point tagged with `metric` keeps FID only; an untagged one is read as FID when it
    is above 1, since a CLIP score is a cosine similarity (at most 1) and an FID near 1 is never logged.
    """
    value = point.get("value")
    primary = PRIMARY_METRIC.get(benchmark_key, "")
    if isinstance(value, dict):
        if primary and primary in value:
            return _number(value[primary]), primary
        for key, item in value.items():
            if _number(item) is not None:
                return _number(item), str(key)
        return None, ""
    number = _number(value)
    if number is None or benchmark_key != "stable_diffusion":
        return number, ""
    tag = point.get("metric")
    if isinstance(tag, str) and tag:
        return (number, "FID") if tag.upper() == "FID" else (None, tag)
    return (number, "FID") if number > 1 else (None, "CLIP")


def convergence_axis(curves: Sequence[RunCurve]) -> str:
    """"epoch" or "samples", whichever the log records (epoch on a tie), else "minutes" since run_start."""
    counts = {"epoch": 0, "samples": 0, "minutes": 0}
    for curve in curves:
        for point in curve.points:
            for key in counts:
                if _number(point.get(key)) is not None:
                    counts[key] += 1
    if counts["epoch"] and counts["epoch"] >= counts["samples"]:
        return "epoch"
    if counts["samples"]:
        return "samples"
    return "minutes"


AXIS_TITLES = {"epoch": "Epoch", "samples": "Training samples", "minutes": "Minutes since run_start"}


def _reached(value: float | None, target: float | None, direction: str) -> str:
    if value is None or target is None:
        return "—"
    return "yes" if (value <= target if direction == "lower" else value >= target) else "no"


def convergence_chart(curves: Sequence[RunCurve], *, benchmark_key: str, quality_target: float | None,
                      target_direction: str, target_text: str, metric_label: str, title: str) -> Chart:
    """Every run's eval_accuracy against epoch or samples; dropped runs dashed; the target as a line."""
    axis = convergence_axis(curves)
    traces: list[dict[str, Any]] = []
    rows: list[list[str]] = []
    used_metrics: set[str] = set()
    skipped = 0
    xs: list[float] = []
    for curve in sorted(curves, key=lambda c: c.position):
        x_values: list[float] = []
        y_values: list[float] = []
        for point in curve.points:
            value, metric = primary_value(point, benchmark_key)
            x = _number(point.get(axis))
            if value is None:
                if metric and metric != PRIMARY_METRIC.get(benchmark_key):
                    continue  # the secondary metric (CLIP), not a gap
                skipped += 1
                continue
            if x is None:
                skipped += 1
                continue
            if metric:
                used_metrics.add(metric)
            x_values.append(x)
            y_values.append(value)
        xs += x_values
        name = f"Run {curve.position + 1}"
        if curve.dropped:
            name += f" ({DROPPED_LABELS.get(curve.dropped, 'dropped')})"
        colour, symbol = style(curve.position)
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": name, "x": x_values, "y": y_values,
            "line": {"color": colour, "dash": "dash" if curve.dropped else "solid"},
            "marker": {"color": colour, "size": 6, "symbol": symbol},
            "hovertemplate": f"{name}<br>{AXIS_TITLES[axis]} %{{x:,.4~g}}<br>%{{y:.4g}}<extra></extra>",
        })
        rows.append([name, "no" if curve.dropped else "yes", str(len(y_values)),
                     f"{y_values[-1]:.4g}" if y_values else "—",
                     _reached(y_values[-1] if y_values else None, quality_target, target_direction)])
    if quality_target is not None and xs:
        traces.append({
            "type": "scatter", "mode": "lines", "name": f"Quality target ({target_text or quality_target})",
            "x": [min(xs), max(xs)], "y": [quality_target, quality_target],
            "line": {"color": TARGET_COLOUR, "dash": "dot", "width": 2}, "hoverinfo": "name",
        })
    label = metric_label or "eval_accuracy"
    primary = PRIMARY_METRIC.get(benchmark_key)
    notes: list[str] = []
    if primary and primary in used_metrics:
        other = "SEGM (mask mAP)" if benchmark_key == "maskrcnn" else "CLIP score"
        notes.append(f"This benchmark logs more than one quality metric; the chart plots the primary one, "
                     f"{primary}, and leaves out the {other}.")
        label = PRIMARY_LABELS.get(primary, primary)
    elif used_metrics:
        notes.append(f"The logged value is a set of metrics; the chart plots {', '.join(sorted(used_metrics))}.")
    if axis == "minutes":
        notes.append("The logs record neither epoch nor samples for the evaluations: x is minutes since run_start.")
    if skipped:
        notes.append(f"{skipped} evaluation point(s) without a numeric value or {axis} are left out.")
    if target_direction == "lower":
        notes.append("Lower is better for this metric: a run converges when it falls to the target.")
    layout = _layout(title, xaxis={"title": {"text": AXIS_TITLES[axis]}, "tickformat": "~s" if axis == "samples"
                                   else ",.4~g"},
                     yaxis={"title": {"text": label}, "tickformat": ".4~g"})
    towards = "falls to" if target_direction == "lower" else "rises to"
    return Chart(figure={"data": traces, "layout": layout}, notes=notes,
                 columns=["Run", "In score", "Evaluations", "Last value", "Reached target"], rows=rows,
                 caption=f"Each line is one run; a run converges where it {towards} the dotted target line, and "
                         "dashed runs are the ones olympic scoring drops.",
                 empty="" if xs else "No evaluations logged for this result.")


# ---------------------------------------------------------------------------------------------
# Scaling efficiency within a system family


def scaling_efficiency(points: Sequence[ResultPoint]) -> list[ScalingRow]:
    """Speedup and efficiency of each size of a family against its smallest size.

    A family is one submitter's systems with one accelerator model (the caller passes one benchmark,
    round and division). Where a family has several results at one size, the fastest stands for it.
    speedup = t(n_min) / t(n); efficiency = speedup / (n / n_min). Families with one size are left out.
    """
    families: dict[tuple[str, str], dict[int, ResultPoint]] = defaultdict(dict)
    for point in _scored(points):
        if not point.accelerators or not point.accelerator_model:
            continue
        sizes = families[(point.submitter, point.accelerator_model)]
        held = sizes.get(point.accelerators)
        if held is None or point.minutes < held.minutes:  # type: ignore[operator]
            sizes[point.accelerators] = point
    rows: list[ScalingRow] = []
    for (submitter, model), sizes in sorted(families.items()):
        if len(sizes) < 2:
            continue
        smallest = min(sizes)
        base = sizes[smallest].minutes
        assert base is not None
        for n in sorted(sizes):
            point = sizes[n]
            assert point.minutes is not None
            speedup = base / point.minutes
            rows.append(ScalingRow(family=f"{submitter} · {model}", point=point, accelerators=n, smallest=smallest,
                                   speedup=speedup, efficiency=speedup / (n / smallest)))
    return rows


def scaling_chart(points: Sequence[ResultPoint], *, title: str) -> Chart:
    rows = scaling_efficiency(points)
    families = list(dict.fromkeys(r.family for r in rows))
    styles = _styles(families)
    traces: list[dict[str, Any]] = []
    for family in families:
        mine = [r for r in rows if r.family == family]
        colour, symbol = styles[family]
        data = [[r.point.url, r.point.system, _minutes(r.point.minutes), f"{r.speedup:.2f}",
                 f"{r.efficiency * 100:.1f}", _count(r.accelerators)] for r in mine]
        hover = ("<b>%{customdata[1]}</b><br>%{customdata[5]} accelerators, %{customdata[2]} min<br>"
                 "speedup ×%{customdata[3]}, efficiency %{customdata[4]}%<extra>" + family + "</extra>")
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": family, "legendgroup": family,
            "x": [r.accelerators for r in mine], "y": [r.speedup for r in mine], "yaxis": "y",
            "customdata": data, "hovertemplate": hover, "line": {"color": colour},
            "marker": _marker(colour, symbol, 9),
        })
        traces.append({
            "type": "scatter", "mode": "lines", "name": f"{family}: ideal (linear) speedup", "legendgroup": family,
            "showlegend": False, "x": [r.accelerators for r in mine], "y": [r.accelerators / r.smallest for r in mine],
            "yaxis": "y", "hoverinfo": "skip", "line": {"color": colour, "dash": "dot", "width": 1},
        })
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{family}: efficiency", "legendgroup": family,
            "showlegend": False, "x": [r.accelerators for r in mine], "y": [r.efficiency * 100 for r in mine],
            "yaxis": "y2", "customdata": data, "hovertemplate": hover, "line": {"color": colour},
            "marker": _marker(colour, symbol, 9),
        })
    layout = _layout(
        title,
        xaxis={"type": "log", "anchor": "y2", "title": {"text": "Accelerators (log scale)"},
               **count_ticks([r.accelerators for r in rows])},
        yaxis={"type": "log", "domain": [0.55, 1], "title": {"text": "Speedup vs. smallest size"},
               **count_ticks([r.speedup for r in rows] + [r.accelerators / r.smallest for r in rows])},
        yaxis2={"domain": [0, 0.45], "anchor": "x", "rangemode": "tozero", "ticksuffix": "%",
                "title": {"text": "Efficiency, %"}},
        shapes=[{"type": "line", "xref": "paper", "yref": "y2", "x0": 0, "x1": 1, "y0": 100, "y1": 100,
                 "line": {"dash": "dot", "color": "#999999"}}],
        height=560,
    )
    notes = ["Derived — not an official score. Each family is one submitter's systems with one accelerator "
             "model; speedup and efficiency are against the family's smallest size (dotted: ideal linear "
             "speedup, 100 % efficiency)."]
    table = [[r.family, r.point.system, str(r.accelerators), _minutes(r.point.minutes), f"{r.speedup:.2f}",
              f"{r.efficiency * 100:.1f}%"] for r in rows]
    return Chart(figure={"data": traces, "layout": layout}, notes=notes,
                 columns=["Family (submitter · accelerator)", "System", "Accelerators", "Time to train (min)",
                          "Speedup", "Efficiency"], rows=table,
                 caption="The closer a family's line runs to its dotted ideal (and to 100 % below), the better it "
                         "turns more accelerators into less time.",
                 empty="" if rows else "No system family has results at two or more sizes here, so there is "
                                       "no scaling to show.")


# ---------------------------------------------------------------------------------------------
# Run-to-run spread


def _unique_labels(points: Sequence[ResultPoint]) -> list[str]:
    labels: list[str] = []
    for p in points:
        label = f"{_point_label(p)} ({_count(p.accelerators)})"
        labels.append(label if label not in labels else f"{label} #{p.id}")
    return labels


def spread_chart(points: Sequence[ResultPoint], *, title: str) -> Chart:
    """The coefficient of variation of each result's successful run times, sorted from the steadiest."""
    with_cv = sorted((p for p in points if p.runs_cv is not None and math.isfinite(p.runs_cv)),
                     key=lambda p: (p.runs_cv, _point_label(p), p.id))
    without = [p for p in points if p.runs_cv is None]
    labels = _unique_labels(with_cv)
    traces: list[dict[str, Any]] = []
    if with_cv:
        traces.append({
            "type": "bar", "orientation": "h", "name": "Run-to-run CV",
            "x": [p.runs_cv * 100 for p in with_cv],  # type: ignore[operator]
            "y": labels, "customdata": [[p.url, p.system, _minutes(p.minutes)] for p in with_cv],
            "hovertemplate": "%{y}<br>CV %{x:.2f}%<br>score %{customdata[2]} min<extra></extra>",
            "marker": {"color": PALETTE[0]},
        })
    layout = _layout(
        title,
        xaxis={"title": {"text": "Coefficient of variation of the successful runs' times, %"}, "rangemode": "tozero",
               "ticksuffix": "%", "tickformat": ".2~f"},
        yaxis={"type": "category", "automargin": True},
        height=max(320, 26 * len(with_cv) + 140),
        margin={"l": 220, "r": 30, "t": 60, "b": 60},
    )
    notes = ["Derived — not an official score. CV = sample standard deviation / mean of the times of all the "
             "successful, compliant runs, the fastest and slowest that olympic scoring drops included "
             "(Result.runs_cv)."]
    if without:
        notes.append(f"{len(without)} result(s) have fewer than two successful runs and no CV.")
    rows = [[label, _minutes(p.minutes), f"{p.runs_cv * 100:.2f}%"]  # type: ignore[operator]
            for label, p in zip(labels, with_cv, strict=True)]
    return Chart(figure={"data": traces, "layout": layout}, notes=notes,
                 columns=["Result (accelerators)", "Score (min)", "Run-to-run CV"], rows=rows,
                 caption="Shorter bars are steadier: their runs took nearly the same time, so one score says more.",
                 empty="" if with_cv else "No result here has two or more successful runs, so there is no "
                                          "spread to show.")


def run_times_chart(runs: Sequence[RunTime], *, raw_score: float | None, title: str) -> Chart:
    """The time to train of each run of one result: runs in the olympic mean filled, dropped runs open."""
    ordered = sorted(runs, key=lambda r: r.position)
    timed = [r for r in ordered if _number(r.minutes) is not None]
    traces: list[dict[str, Any]] = []
    for name, pick, symbol in [("In the olympic mean", lambda r: not r.dropped, "circle"),
                               ("Dropped (fastest, slowest or failed)", lambda r: bool(r.dropped), "circle-open")]:
        mine = [r for r in timed if pick(r)]
        if mine:
            traces.append({
                "type": "scatter", "mode": "markers", "name": name, "x": [r.position + 1 for r in mine],
                "y": [r.minutes for r in mine],
                "customdata": [[DROPPED_LABELS.get(r.dropped, "in the olympic mean"), _minutes(r.minutes)]
                               for r in mine],
                "hovertemplate": "Run %{x}: %{customdata[1]} min<br>%{customdata[0]}<extra></extra>",
                "marker": {"size": 11, "symbol": symbol, "color": PALETTE[0] if not mine[0].dropped else PALETTE[3],
                           "line": {"width": 2}},
            })
    if raw_score is not None and ordered:
        traces.append({
            "type": "scatter", "mode": "lines", "name": f"Olympic mean ({_minutes(raw_score)} min)",
            "x": [0.5, len(ordered) + 0.5], "y": [raw_score, raw_score], "hoverinfo": "name",
            "line": {"color": TARGET_COLOUR, "dash": "dot"},
        })
    layout = _layout(title, xaxis={"title": {"text": "Run"}, "dtick": 1},
                     yaxis={"title": {"text": "Time to train, minutes"}, "tickformat": ",.4~g"})
    notes = []
    untimed = [r for r in ordered if _number(r.minutes) is None]
    if untimed:
        notes.append(f"No time to train for run(s) {', '.join(str(r.position + 1) for r in untimed)} "
                     "(run_start or run_stop missing).")
    rows = [[str(r.position + 1), _minutes(r.minutes), DROPPED_LABELS.get(r.dropped, "in the olympic mean")]
            for r in ordered]
    return Chart(figure={"data": traces, "layout": layout}, notes=notes,
                 columns=["Run", "Time to train (min)", "In score"], rows=rows,
                 caption="Filled points make the score (their mean is the dotted line); open points are the runs "
                         "olympic scoring dropped.",
                 empty="" if timed else "No run of this result has a time to train.")
