"""A visitor's tour from the home page in a real browser: a benchmark page, an organization page, a result,
and the log line a finding cites — with a screenshot of each step (site_world.artifacts_dir)."""

from __future__ import annotations

import pytest

from tests.browser.site_world import CITED_LINE, artifacts_dir, build_site

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_visitor_reaches_a_benchmark_an_organization_a_result_and_a_cited_log_line(live_server, page) -> None:
    site = build_site()
    shots = artifacts_dir("visitor-tour")
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))

    page.goto(f"{live_server.url}/")
    page.wait_for_selector("#highlights")
    assert "Tour v2: fastest results" in page.inner_text("h1")
    page.screenshot(path=str(shots / "1-home.png"), full_page=True)

    page.click("#highlights a[href='/benchmarks/resnet/']")
    page.wait_for_url("**/benchmarks/resnet/")
    page.wait_for_selector("#quality-target")
    page.wait_for_selector("[data-chart=history][data-state=ready], [data-chart=history][data-state=error]")
    assert page.get_attribute("[data-chart=history]", "data-state") == "ready"
    page.screenshot(path=str(shots / "2-benchmark.png"), full_page=True)

    page.click("#round-tour-v2 a[href='/organizations/acme-tour/']")
    page.wait_for_url("**/organizations/acme-tour/")
    assert "Tour v1" in page.inner_text("main") and "Tour v2" in page.inner_text("main")
    page.screenshot(path=str(shots / "3-organization.png"), full_page=True)

    page.click(f"a[href='{site.result.get_absolute_url()}']")
    page.wait_for_url(f"**{site.result.get_absolute_url()}")
    page.wait_for_selector("#findings")
    assert "No run was dropped" in page.inner_text("#why") or "Official score" in page.inner_text("#why")
    page.screenshot(path=str(shots / "4-result.png"), full_page=True)

    page.click(f"#findings a.log-line:has-text('line {CITED_LINE}')")
    page.wait_for_url(f"**#L{CITED_LINE}")
    target = page.locator(f"#L{CITED_LINE}")
    assert target.is_visible()
    assert page.evaluate("document.querySelector(':target') && document.querySelector(':target').id") == \
        f"L{CITED_LINE}"
    assert "<script>" in page.inner_text("#log")  # the hostile line is shown as text, not run
    page.screenshot(path=str(shots / "5-log-line.png"), full_page=False)

    # A fold opens on click and shows its lines.
    fold = page.locator("details.fold").first
    fold.locator("summary").click()
    assert fold.get_attribute("open") is not None
    assert not errors, errors
