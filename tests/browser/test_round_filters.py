"""The round page's filter bar in a real browser (static/filters.js): a change applies at once and the
address bar stays the permalink, chips remove their filter, the column chooser needs no Apply, the
submitter picker is searchable by keyboard, the compare selection is counted and survives a refusal,
and the page with its filters fits a phone and passes axe-core in light and dark."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ingest.models import System
from tests.browser.axe import axe_violations, sideways_overflow
from tests.factories import BenchmarkFactory, OrganizationFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROUND = "/rounds/filters-v2.0/"


@pytest.fixture
def round_url(live_server) -> str:
    round_ = RoundFactory(slug="filters-v2.0", name="Filters v2.0")
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50", position=0)
    bert = BenchmarkFactory(round=round_, key="bert", name="BERT", position=1)
    orgs = {n: OrganizationFactory(name=n, slug=n.lower()) for n in ("Acme", "Kite", "Zeta")}
    acme = SystemFactory(
        round=round_,
        organization=orgs["Acme"],
        slug="acme-64",
        name="Acme 64 with a long descriptive system name",
        accelerator_count=64,
        number_of_nodes=8,
        accelerator_model_name="X200",
    )
    kite = SystemFactory(
        round=round_,
        organization=orgs["Kite"],
        slug="kite-8",
        name="Kite 8",
        accelerator_count=8,
        accelerator_model_name="X100",
    )
    zeta = SystemFactory(
        round=round_,
        organization=orgs["Zeta"],
        slug="zeta-8",
        name="Zeta 8",
        accelerator_count=8,
        accelerator_model_name="X100",
        division=System.Division.OPEN,
    )
    for system, score in ((acme, 2.5), (kite, 12.0), (zeta, 3.75)):
        ResultFactory(system=system, benchmark=resnet, score=score)
        ResultFactory(system=system, benchmark=bert, score=score * 3)
    return live_server.url + ROUND


def _open(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    # A marker that a full navigation would lose: the updates below must happen in place.
    page.evaluate("() => { window.__sameDocument = true; }")


def _same_document(page: Any) -> bool:
    return page.evaluate("() => window.__sameDocument === true")


def _systems(page: Any) -> list[str]:
    return page.locator("#round-table tbody th.system").all_inner_texts()


def _chips(page: Any) -> list[str]:
    """The chips' texts without their "×"."""
    return [" ".join(t.replace("×", "").split()) for t in page.locator("#filter-chips a.chip").all_inner_texts()]


def test_a_filter_applies_at_once_and_the_address_is_its_permalink(page, round_url) -> None:
    _open(page, round_url)
    assert len(_systems(page)) == 3
    page.select_option("select[name=division]", "open")
    page.wait_for_url(re.compile(r"\?division=open$"))
    assert _systems(page) == ["Zeta 8"]
    assert page.inner_text("#filter-chips").startswith("Division: Open")
    assert _same_document(page)
    page.reload()  # the address is the view
    assert _systems(page) == ["Zeta 8"] and page.input_value("select[name=division]") == "open"


def test_typing_a_framework_or_a_count_updates_the_table_after_a_pause(page, round_url) -> None:
    _open(page, round_url)
    page.fill("input[name=acc_min]", "10")
    page.wait_for_url("**acc_min=10")
    assert _systems(page) == ["Acme 64 with a long descriptive system name"]
    assert "Accelerators: at least 10" in page.inner_text("#filter-chips")
    assert _same_document(page)


def test_each_chip_removes_its_own_filter(page, round_url) -> None:
    page.goto(f"{round_url}?division=closed&submitter=kite")
    assert _chips(page) == ["Division: Closed", "Submitter: Kite"]
    assert _systems(page) == ["Kite 8"]
    page.get_by_role("link", name="Remove filter Submitter: Kite").click()
    page.wait_for_url(re.compile(r"\?division=closed$"))
    assert sorted(_systems(page)) == ["Acme 64 with a long descriptive system name", "Kite 8"]
    assert _chips(page) == ["Division: Closed"]
    assert not page.is_checked("#submitter-picker input[value=kite]")


def test_the_column_chooser_applies_without_a_submit(page, round_url) -> None:
    _open(page, round_url)
    assert page.locator("th.bench-col[data-benchmark=bert]").count() == 2  # both divisions
    page.click("#column-picker summary")
    page.uncheck("#column-picker input[value=bert]")
    page.wait_for_url("**cols=resnet")
    assert page.locator("th.bench-col[data-benchmark=bert]").count() == 0
    assert page.inner_text("#column-picker [data-picker-state]") == "1 of 2"
    assert _same_document(page)


def test_the_submitter_picker_is_searchable_with_the_keyboard(page, round_url) -> None:
    _open(page, round_url)
    page.focus("#submitter-picker summary")
    page.keyboard.press("Enter")  # opens, and the search box takes the focus (on the toggle event)
    page.wait_for_function("() => document.activeElement.matches('#submitter-picker [data-picker-search]')")
    page.keyboard.type("ze")
    visible = [label for label in page.locator("#submitter-picker .picker-options label").all() if label.is_visible()]
    assert [label.inner_text().strip() for label in visible] == ["Zeta"]
    page.keyboard.press("Tab")
    page.keyboard.press("Space")
    page.wait_for_url("**submitter=zeta")
    assert _systems(page) == ["Zeta 8"]
    assert page.inner_text("#submitter-picker [data-picker-state]") == "1 chosen"
    page.focus("#submitter-picker [data-picker-search]")
    page.keyboard.press("Escape")  # closes, focus back on the summary
    assert not page.evaluate("() => document.getElementById('submitter-picker').open")
    assert page.evaluate("() => document.activeElement.matches('#submitter-picker summary')")


def test_the_compare_selection_is_counted_and_survives_a_refusal(page, round_url) -> None:
    _open(page, round_url)
    first = page.get_by_role("checkbox", name="Compare Kite 8 ResNet-50")
    first.check()
    assert page.inner_text("#compare-count") == "1 selected"
    page.click("#compare-form button[type=submit]")
    assert "Pick at least 2 results to compare" in page.inner_text("#compare-error")
    assert first.is_checked() and _same_document(page)  # no error page: the selection is still here
    # A live update redraws the table; the ticked box comes back ticked.
    page.select_option("select[name=division]", "closed")
    page.wait_for_url("**division=closed")
    assert page.get_by_role("checkbox", name="Compare Kite 8 ResNet-50").is_checked()
    page.get_by_role("checkbox", name="Compare Acme 64 with a long descriptive system name BERT").check()
    assert page.inner_text("#compare-count") == "2 selected"
    assert page.inner_text("#compare-error") == ""
    page.click("#compare-form button[type=submit]")
    page.wait_for_url("**/compare/?**")
    assert len(re.findall(r"ids=\d+", page.url)) == 2


def test_a_selection_from_another_view_travels_with_the_compare(page, round_url) -> None:
    _open(page, f"{round_url}?division=open")
    page.get_by_role("checkbox", name="Compare Zeta 8 ResNet-50").check()
    page.goto(f"{round_url}?division=closed")  # a full navigation: the box is not on this page
    assert page.inner_text("#compare-count") == "1 selected"
    page.get_by_role("checkbox", name="Compare Kite 8 BERT").check()
    page.click("#compare-form button[type=submit]")
    page.wait_for_url("**/compare/?**")
    assert len(re.findall(r"ids=\d+", page.url)) == 2


def test_without_javascript_the_bar_is_a_form_with_apply(browser, round_url) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(round_url)
        page.click("#column-picker summary")
        page.uncheck("#column-picker input[value=bert]")
        page.click("#submitter-picker summary")  # one picker open at a time: the columns' closes
        page.check("#submitter-picker input[value=acme]")
        page.click("#submitter-picker summary")
        page.click("#view-form button[type=submit]")
        page.wait_for_url("**cols=resnet**")
        assert "submitter=acme" in page.url
        assert page.locator("th.bench-col[data-benchmark=bert]").count() == 0
        assert _systems(page) == ["Acme 64 with a long descriptive system name"]
        assert _chips(page) == ["Submitter: Acme", "Columns: ResNet-50"]
    finally:
        context.close()


def test_the_filtered_page_fits_a_phone(page, round_url) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{round_url}?division=closed&submitter=kite&submitter=acme&cols=resnet")
    page.wait_for_load_state("networkidle")
    assert sideways_overflow(page) is None
    # The system and the first benchmark's scores are on screen without scrolling.
    score = page.locator("#round-table th.bench-col").first.bounding_box()
    assert score is not None and score["x"] + score["width"] <= 390
    page.click("#submitter-picker summary")
    assert sideways_overflow(page) is None
    # The System column stays in view while the table scrolls sideways inside its region.
    region = page.locator(".table-scroll").first
    region.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    system = page.locator("#round-table tbody th.system").first.bounding_box()
    assert system is not None and 0 <= system["x"] < 390


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_filter_bar_passes_axe_in_light_and_dark(browser, live_server, round_url, scheme) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, color_scheme=scheme)
    try:
        page = context.new_page()
        page.goto(f"{round_url}?division=closed&submitter=kite&metric=accelerator_minutes&sort=resnet")
        page.wait_for_load_state("networkidle")
        page.click("#submitter-picker summary")
        page.get_by_role("checkbox", name=re.compile("^Compare Kite 8")).first.check()
        page.click("#compare-form button[type=submit]")  # one box: the refusal is on the page too
        assert page.inner_text("#compare-error")
        violations = axe_violations(page)
        assert not violations, "\n".join(map(str, violations))
    finally:
        context.close()
