"""How the charts read (leaderboard.charts): explicit ticks, distinct series, captions, empty states, hover text."""

from __future__ import annotations

import json
import math

import pytest

from leaderboard import charts
from leaderboard.charts import ResultPoint, RoundEntry, RunCurve, RunTime


def point(id_: int, accelerators: int | None, minutes: float | None, submitter: str = "Acme", *,
          hosts: int | None = 1, model: str = "X100", cv: float | None = None) -> ResultPoint:
    return ResultPoint(id=id_, url=f"/results/{id_}/", submitter=submitter, system=f"sys-{id_}",
                       accelerator_model=model, accelerators=accelerators, hosts=hosts, minutes=minutes, runs_cv=cv)


def _all_charts() -> list[charts.Chart]:
    points = [point(1, 8, 12.948949999999998, cv=0.02), point(2, 64, 2.5, "Zeta", cv=0.05),
              point(3, 512, 0.9, "Kite", cv=0.01), point(4, 16, 7.0)]
    entries = [RoundEntry("v1.0", "BERT", ("BERT",), tuple(points[:2])),
               RoundEntry("v1.1", "BERT", ("BERT",), tuple(points[2:]))]
    curves = [RunCurve(0, "", ({"epoch": 1, "value": 0.5}, {"epoch": 2, "value": 0.76})),
              RunCurve(1, "fastest", ({"epoch": 1, "value": 0.6},))]
    return [
        charts.scale_chart(points, title="t"),
        charts.scaling_chart(points, title="t"),
        charts.spread_chart(points, title="t"),
        charts.history_chart(entries, scale=8, title="t"),
        charts.convergence_chart(curves, benchmark_key="resnet", quality_target=0.759, target_direction="higher",
                                 target_text="75.9%", metric_label="Top-1", title="t"),
        charts.run_times_chart([RunTime(0, 10.0, ""), RunTime(1, 9.0, "fastest")], raw_score=10.0, title="t"),
    ]


def _log_axes(chart: charts.Chart) -> list[dict]:
    layout = chart.figure["layout"]
    return [axis for key, axis in layout.items()
            if key[:5] in ("xaxis", "yaxis") and isinstance(axis, dict) and axis.get("type") == "log"]


@pytest.mark.parametrize(("values", "ticks"), [
    ([8, 16, 64], ["8", "16", "32", "64"]),
    ([1, 2048], ["1", "4", "16", "64", "256", "1,024"]),
    ([1, 65536], ["1", "8", "64", "512", "4,096", "32,768"]),
])
def test_accelerator_axes_tick_at_powers_of_two_thinned_to_at_most_eight(values, ticks) -> None:
    axis = charts.count_ticks(values)
    assert axis["tickmode"] == "array" and axis["ticktext"] == ticks
    assert [float(t.replace(",", "")) for t in ticks] == axis["tickvals"]


@pytest.mark.parametrize("values", [[9.85396, 10.2], [0.4, 1500], [12.948949999999998], [55, 60], [1.23, 1.26]])
def test_minute_axes_have_two_to_eight_short_labels(values) -> None:
    axis = charts.value_ticks(values)
    assert 1 <= len(axis["ticktext"]) <= charts.MAX_TICKS
    assert all(len(text.replace(",", "").replace(".", "")) <= 4 for text in axis["ticktext"])
    low, high = axis["range"]
    assert 10 ** low <= min(values) and max(values) <= 10 ** high


def test_every_log_axis_has_explicit_ticks_and_no_minor_labels() -> None:
    axes = [axis for chart in _all_charts() for axis in _log_axes(chart)]
    assert len(axes) >= 5
    assert all(axis["tickmode"] == "array" and axis["ticktext"] for axis in axes)


def test_series_differ_in_colour_and_marker() -> None:
    chart = charts.scale_chart([point(i, 8 * i, 10.0 / i, f"Org {i}") for i in range(1, 9)], title="t")
    markers = [(t["marker"]["color"], t["marker"]["symbol"]) for t in chart.figure["data"]
               if t["name"].startswith("Org")]
    assert len(markers) == 8 and len(set(markers)) == 8
    assert len({symbol for _, symbol in markers}) == 8
    assert {colour for colour, _ in markers} <= set(charts.PALETTE)


def test_round_over_round_series_have_their_own_colours() -> None:
    history = _all_charts()[3]
    colours = [t["line"]["color"] for t in history.figure["data"]]
    assert len(colours) == 2 and colours[0] != colours[1]


def test_every_chart_has_a_one_line_caption() -> None:
    for chart in _all_charts():
        body = chart.as_json()
        assert body["caption"] and "\n" not in body["caption"] and len(body["caption"]) < 160
        assert body["empty"] == ""


@pytest.mark.parametrize("chart", [
    charts.scale_chart([], title="t"), charts.scaling_chart([point(1, 8, 10.0)], title="t"),
    charts.spread_chart([point(1, 8, 10.0)], title="t"), charts.history_chart([], scale=8, title="t"),
    charts.convergence_chart([], benchmark_key="resnet", quality_target=None, target_direction="higher",
                             target_text="", metric_label="", title="t"),
    charts.run_times_chart([RunTime(0, None, "")], raw_score=None, title="t"),
], ids=["scale", "scaling", "spread", "history", "convergence", "runs"])
def test_an_empty_chart_says_so_in_words_not_with_bare_axes(chart) -> None:
    body = json.loads(json.dumps(chart.as_json()))
    assert body["empty"].endswith(".") and len(body["empty"]) > 10
    assert "annotations" not in body["figure"]["layout"]


def test_hover_names_the_result_and_prints_rounded_figures() -> None:
    scale = _all_charts()[0]
    acme = scale.figure["data"][0]
    assert acme["customdata"][0][1] == "sys-1"
    assert "12.95" in acme["customdata"][0] and "8 × X100 on 1 host" in acme["customdata"][0]
    assert "%{customdata[1]}" in acme["hovertemplate"]
    shown = [json.dumps([t.get("customdata"), t["name"]]) for c in _all_charts() for t in c.figure["data"]]
    shown += [json.dumps(c.rows) for c in _all_charts()]
    assert not [text for text in shown if "12.9489" in text]


def test_table_columns_of_figures_are_marked_numeric() -> None:
    scale = _all_charts()[0]
    numeric = [scale.columns[i] for i in scale.numeric_columns()]
    assert numeric == ["Accelerators", "Hosts", "Time to train (min)"]


def test_non_finite_times_draw_nothing_and_break_no_tick() -> None:
    chart = charts.scale_chart([point(1, 8, math.inf), point(2, 8, math.nan), point(3, 8, -1.0)], title="t")
    assert chart.empty and chart.figure["data"] == []
    assert charts.count_ticks([0, -4, None, "x"]) == {} and charts.value_ticks([math.inf]) == {}
