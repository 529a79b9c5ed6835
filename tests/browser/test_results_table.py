"""The results table in a real browser: filters, a derived metric, a chart, the CSV of the view."""

from __future__ import annotations

import csv
import io

import pytest

from ingest.models import Result, System
from tests.factories import (
    BenchmarkFactory,
    OrganizationFactory,
    ResultFactory,
    RoundFactory,
    RunFactory,
    SystemFactory,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _round() -> Result:
    round_ = RoundFactory(slug="training-v9.9", name="MLPerf Training v9.9")
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50")
    big = SystemFactory(
        round=round_,
        organization=OrganizationFactory(name="Acme", slug="acme"),
        name="Acme 64",
        accelerator_count=64,
        number_of_nodes=8,
    )
    small = SystemFactory(
        round=round_, organization=OrganizationFactory(name="Kite", slug="kite"), name="Kite 8", accelerator_count=8
    )
    opened = SystemFactory(
        round=round_, organization=OrganizationFactory(name="Zeta",
                                                       slug="zeta"), name="Zeta 8", division=System.Division.OPEN
    )
    # The big system is fastest; the small one uses the fewest accelerator-minutes.
    result = ResultFactory(system=big, benchmark=resnet, raw_score=2.5, score=2.5, accelerator_minutes=160.0)
    for position, minutes in enumerate([2.4, 2.5, 2.5, 2.5, 2.6]):
        RunFactory(
            result=result,
            position=position,
            time_to_train_min=minutes,
            dropped="fastest" if position == 0 else "slowest" if position == 4 else "",
        )
    ResultFactory(system=small, benchmark=resnet, score=12.0, accelerator_minutes=96.0)
    ResultFactory(system=opened, benchmark=resnet, score=3.75, accelerator_minutes=30.0)
    return result


def _closed_rows(page) -> list[str]:
    return [
        row.split("\t")[0] for row in page.locator("table.results[data-division=closed] tbody tr").all_inner_texts()
    ]


def test_filter_a_round_table_and_open_a_result(live_server, page) -> None:
    _round()
    page.goto(f"{live_server.url}/rounds/training-v9.9/")
    assert page.locator("table.results tbody tr").count() == 3
    page.select_option("select[name=division]", "open")
    page.click("#view-form button[type=submit]")
    page.wait_for_url("**division=open**")
    rows = page.locator("table.results tbody tr")
    assert rows.count() == 1 and "Zeta 8" in rows.first.inner_text()
    page.select_option("select[name=division]", "closed")
    page.click("#view-form button[type=submit]")
    page.wait_for_url("**division=closed**")
    page.click("table.results td.score a >> nth=0")
    page.wait_for_selector("text=How the score is computed")
    assert page.inner_text("#final-score").startswith("2.50")
    assert page.locator("table.runs tbody tr").count() == 5


def test_switching_to_a_derived_metric_changes_the_order(live_server, page) -> None:
    _round()
    page.goto(f"{live_server.url}/rounds/training-v9.9/?division=closed")
    page.click("th[data-benchmark=resnet] a")  # rank by ResNet-50
    page.wait_for_url("**sort=resnet**")
    assert _closed_rows(page) == ["Acme 64", "Kite 8"]
    page.select_option("#metric", "accelerator_minutes")  # submits by itself
    page.wait_for_url("**metric=accelerator_minutes**")
    assert _closed_rows(page) == ["Kite 8", "Acme 64"]
    assert "derived — not an official score" in page.inner_text("#derived-note")


def test_a_chart_draws_its_traces(live_server, page) -> None:
    _round()
    page.goto(f"{live_server.url}/rounds/training-v9.9/charts/?benchmark=resnet")
    page.wait_for_function(
        "() => { const gd = document.querySelector('[data-chart=scale] .js-plotly-plot');"
        " return gd && gd.data && gd.data.length > 0; }",
        timeout=120_000,  # plotly.js parses and draws: slow on a busy machine, never absent
    )
    names = page.evaluate("() => document.querySelector('[data-chart=scale] .js-plotly-plot').data.map(t => t.name)")
    assert any("Acme" in (name or "") for name in names)


def test_download_the_csv_of_the_filtered_view(live_server, page) -> None:
    _round()
    page.goto(f"{live_server.url}/rounds/training-v9.9/?division=closed&sort=resnet")
    with page.expect_download() as download:
        page.click("#export-csv")
    path = download.value.path()
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert {r["system_name"] for r in rows} == {"Acme 64", "Kite 8"}
    assert {r["division"] for r in rows} == {"closed"}
