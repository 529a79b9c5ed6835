from __future__ import annotations

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
    closed = SystemFactory(round=round_, organization=OrganizationFactory(name="Acme"), name="Acme 64",
                           accelerator_count=64)
    opened = SystemFactory(round=round_, organization=OrganizationFactory(name="Zeta"), name="Zeta 8",
                           division=System.OPEN)
    result = ResultFactory(system=closed, benchmark=resnet, raw_score=2.5, score=2.5)
    for position, minutes in enumerate([2.4, 2.5, 2.5, 2.5, 2.6]):
        RunFactory(result=result, position=position, time_to_train_min=minutes,
                   dropped="fastest" if position == 0 else "slowest" if position == 4 else "")
    ResultFactory(system=opened, benchmark=resnet, score=3.75)
    return result


def test_filter_a_round_table_and_open_a_result(live_server, page, tmp_path) -> None:
    _round()
    page.goto(f"{live_server.url}/rounds/training-v9.9/")
    assert page.locator("table.results tbody tr").count() == 2
    page.click("a[data-facet=division][data-value=open]")
    page.wait_for_url("**division=open**")
    rows = page.locator("table.results tbody tr")
    assert rows.count() == 1
    assert "Zeta 8" in rows.first.inner_text()
    page.click("a[data-facet=division][data-value=closed]")
    page.wait_for_url("**division=closed**")
    page.click("table.results td.score a")
    page.wait_for_selector("text=How the score is computed")
    assert page.inner_text("#final-score").startswith("2.50")
    assert page.locator("table.runs tbody tr").count() == 5
    page.screenshot(path=str(tmp_path / "result.png"), full_page=True)
