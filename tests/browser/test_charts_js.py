"""static/charts.js in a real browser, on figures from leaderboard.charts served by page.route (no server, no
database): an empty chart is a sentence, not bare axes; the caption is drawn under the plot; on a phone the
legend goes below the plot and the title goes (the page's heading names the chart)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leaderboard import charts
from leaderboard.static_files import PLOTLY_JS

pytestmark = pytest.mark.browser

STATIC = Path(__file__).resolve().parents[2] / "static"
ORIGIN = "http://podium.test"


def _plotly_js() -> str:
    import plotly.offline

    return plotly.offline.get_plotlyjs()


def _open(page: Any, figures: dict[str, charts.Chart]) -> None:
    sections = "".join(
        f'<section><h2>{name}</h2><div data-chart="{name}" data-src="/{name}.json">'
        f'<div class="plot" style="min-height: 450px"></div></div><p id="after-{name}">after</p></section>'
        for name in figures)
    routes = {
        "/page": ("text/html", f'<!doctype html><html lang="en"><head><title>t</title>'
                               f'<link rel="stylesheet" href="/podium.css"></head><body><main>{sections}</main>'
                               f'<script src="/{PLOTLY_JS}"></script><script src="/charts.js"></script></body></html>'),
        f"/{PLOTLY_JS}": ("text/javascript", _plotly_js()),
        "/charts.js": ("text/javascript", (STATIC / "charts.js").read_text()),
        "/podium.css": ("text/css", (STATIC / "podium.css").read_text()),
        **{f"/{name}.json": ("application/json", json.dumps(chart.as_json())) for name, chart in figures.items()},
    }

    def handle(route: Any) -> None:
        path = route.request.url.removeprefix(ORIGIN)
        content_type, body = routes.get(path, ("text/plain", ""))
        route.fulfill(status=200 if path in routes else 404, content_type=content_type, body=body)

    page.route(f"{ORIGIN}/**", handle)
    page.goto(f"{ORIGIN}/page")
    page.wait_for_function("() => Array.from(document.querySelectorAll('[data-chart]'))"
                           ".every(c => c.dataset.state === 'ready' || c.dataset.state === 'error')")


def _points() -> list[charts.ResultPoint]:
    return [charts.ResultPoint(1, "/results/1/", "Acme", "Acme 8", "X100", 8, 1, 6.4),
            charts.ResultPoint(2, "/results/2/", "Zeta", "Zeta 256", "Y200", 256, 32, 0.47)]


def test_an_empty_chart_is_a_sentence_and_a_drawn_one_has_its_caption(page) -> None:
    scale = charts.scale_chart(_points(), title="Scale")
    _open(page, {"scale": scale, "scaling": charts.scaling_chart(_points(), title="Scaling")})
    empty = page.locator("[data-chart=scaling]")
    assert empty.get_attribute("data-empty") == "true"
    assert empty.locator(".chart-empty").inner_text().startswith("No system family has results")
    assert empty.locator(".js-plotly-plot").count() == 0
    drawn = page.locator("[data-chart=scale]")
    assert drawn.locator(".js-plotly-plot").count() == 1
    assert drawn.locator(".chart-caption").inner_text() == scale.caption
    # The plot takes its room in the page: what follows starts below it.
    plot_bottom = drawn.locator(".js-plotly-plot").bounding_box()
    after = page.locator("#after-scale").bounding_box()
    assert plot_bottom and after and after["y"] >= plot_bottom["y"] + plot_bottom["height"]


def test_the_axes_show_the_explicit_ticks(page) -> None:
    _open(page, {"scale": charts.scale_chart(_points(), title="Scale")})
    def ticks(axis: str) -> list[str]:
        # SVG text has no innerText: read textContent.
        return page.eval_on_selector_all(f"[data-chart=scale] .{axis}tick text", "els => els.map(e => e.textContent)")

    assert ticks("x") == ["8", "16", "32", "64", "128", "256"]
    assert ticks("y") == ["0.5", "1", "2", "5"]


@pytest.mark.parametrize(("width", "orientation", "titled"), [(1400, "v", True), (390, "h", False)])
def test_the_legend_moves_below_the_plot_on_a_phone(page, width: int, orientation: str, titled: bool) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    _open(page, {"scale": charts.scale_chart(_points(), title="Scale")})
    layout = page.evaluate("() => document.querySelector('[data-chart=scale] .js-plotly-plot').layout")
    assert layout["legend"]["orientation"] == orientation
    assert bool(layout["title"]["text"]) is titled
    assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
