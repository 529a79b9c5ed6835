"""The round page's filter bar without JavaScript: chips name each active filter and link to the view
without it, the pickers and the column chooser are plain form fields, sortable headers carry aria-sort,
and the table sits in a labelled scroll region with per-result compare labels."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.http import QueryDict
from django.test import Client

from ingest.models import System
from leaderboard.round_filters import active_chips, clear_url
from leaderboard.table import Choices, TableView
from tests.factories import BenchmarkFactory, OrganizationFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db

URL = "/rounds/filters-v1.0/"


@pytest.fixture
def round_page():
    round_ = RoundFactory(slug="filters-v1.0", name="Filters v1.0")
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50", position=0)
    bert = BenchmarkFactory(round=round_, key="bert", name="BERT", position=1)
    acme, zeta = (OrganizationFactory(name=n, slug=n.lower()) for n in ("Acme", "Zeta"))
    big = SystemFactory(
        round=round_,
        organization=acme,
        slug="acme-512",
        name="Acme 512",
        accelerator_count=512,
        accelerator_model_name="X200",
    )
    small = SystemFactory(
        round=round_,
        organization=zeta,
        slug="zeta-8",
        name="Zeta 8",
        accelerator_count=8,
        accelerator_model_name="X100",
        division=System.Division.OPEN,
    )
    ResultFactory(system=big, benchmark=resnet, score=1.0)
    ResultFactory(system=big, benchmark=bert, score=2.0)
    ResultFactory(system=small, benchmark=resnet, score=20.0)
    return round_


def _chips(html: str) -> dict[str, str]:
    """{chip text: the query its link leads to}."""
    block = re.search(r'<div id="filter-chips"[^>]*>(.*?)</div>', html, re.S)
    assert block
    found = re.findall(r'<a class="chip" href="([^"]*)"[^>]*>(.*?) <span', block.group(1), re.S)
    return {unescape(text).strip(): unescape(href) for href, text in found}


def _columns(html: str) -> list[str]:
    """The benchmark columns of the first division's table."""
    first = html.split("</table>")[0]
    return re.findall(r'<th class="num bench-col[^"]*" data-benchmark="(\w+)"', first)


def _params(href: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(href).query)


def test_each_active_filter_is_a_chip_whose_link_removes_only_it(client: Client, round_page) -> None:
    html = client.get(
        f"{URL}?division=closed&submitter=acme&submitter=zeta&acc_min=8&sort=resnet&page=2"
    ).content.decode()
    chips = _chips(html)
    assert set(chips) == {"Division: Closed", "Submitter: Acme", "Submitter: Zeta", "Accelerators: at least 8"}
    assert _params(chips["Division: Closed"]) == {"submitter": ["acme", "zeta"], "acc_min": ["8"], "sort": ["resnet"]}
    assert _params(chips["Submitter: Acme"])["submitter"] == ["zeta"]  # one value of a repeated filter
    assert "page" not in _params(chips["Accelerators: at least 8"])  # a wider view starts on page 1
    assert 'href="?sort=resnet"' in html and "Clear all filters" in html  # the sort survives "clear all"


def test_following_a_chip_shows_the_rows_the_filter_hid(client: Client, round_page) -> None:
    html = client.get(f"{URL}?division=closed").content.decode()
    assert "Zeta 8" not in html.split('id="filter-chips"')[1]
    wider = client.get(URL + _chips(html)["Division: Closed"]).content.decode()
    assert "Zeta 8" in wider and _chips(wider) == {}


def test_values_the_table_ignores_make_no_chip(client: Client, round_page) -> None:
    html = client.get(f"{URL}?division=bogus&acc_min=many&framework=&metric=accelerator_minutes").content.decode()
    assert _chips(html) == {}
    assert '<ul class="chips"' not in html


def test_a_chip_for_columns_only_when_some_are_hidden() -> None:
    choices = Choices(submitters=[], accelerators=[], benchmarks=[])
    view = TableView.from_query(QueryDict("cols=resnet"))
    assert active_chips(QueryDict("cols=resnet"), view, choices) == []  # no benchmarks known: nothing hidden
    assert clear_url(QueryDict("division=open&cols=bert&metric=energy_kwh&page=3")) == "?metric=energy_kwh"


def test_the_column_chooser_works_as_plain_checkboxes(client: Client, round_page) -> None:
    # Without JavaScript the form sends one `cols` per ticked box; filters.js joins them with commas.
    for query in ("cols=bert", "cols=bert&cols=", "cols=bert,"):
        html = client.get(f"{URL}?{query}").content.decode()
        assert _columns(html) == ["bert"], query
    both = client.get(f"{URL}?cols=resnet&cols=bert").content.decode()
    assert _columns(both) == ["resnet", "bert"]
    assert 'class="col-choice" name="cols" value="resnet"' in both


def test_the_pickers_are_form_fields_that_keep_the_choice(client: Client, round_page) -> None:
    html = client.get(f"{URL}?submitter=zeta&accelerator_model=X100").content.decode()
    form = html[html.index('id="view-form"') : html.index("</form>", html.index('id="view-form"'))]
    assert re.search(r'<input type="checkbox" name="submitter" value="zeta" checked>', form)
    assert re.search(r'<input type="checkbox" name="submitter" value="acme" >', form)
    assert re.search(r'<input type="radio" name="accelerator_model" value="X100" checked>', form)
    assert 'aria-label="Find a submitter"' in form  # the search box filters.js shows


def test_sortable_headers_say_their_sort_state(client: Client, round_page) -> None:
    html = client.get(f"{URL}?sort=resnet&order=desc").content.decode()
    sorted_headers = re.findall(r'<th [^>]*aria-sort="(\w+)"[^>]*>\s*<a[^>]*>([^<]+)</a>', html)
    assert ("descending", "ResNet-50") in sorted_headers
    assert all(name == "ResNet-50" for _, name in sorted_headers)
    plain = client.get(URL).content.decode()  # the default order is by submitter
    state, name = re.findall(r'<th [^>]*aria-sort="(\w+)"[^>]*>\s*<a[^>]*>([^<]+)</a>', plain)[0]
    assert (state, name.replace("&shy;", "")) == ("ascending", "Submitter")
    by_system = client.get(f"{URL}?sort=system").content.decode()
    assert re.search(r'<th scope="col" aria-sort="ascending" class="sorted"><a [^>]*>System</a>', by_system)


def test_the_table_scrolls_in_a_labelled_region_with_the_system_first(client: Client, round_page) -> None:
    html = client.get(URL).content.decode()
    assert '<div class="table-scroll" role="region" aria-label="Closed division results" tabindex="0">' in html
    first_cells = re.findall(r'<tr data-system="[^"]+">\s*<th scope="row" class="system"><a [^>]*>([^<]+)</a>', html)
    assert first_cells == ["Acme 512", "Zeta 8"]


def test_each_compare_box_names_its_result(client: Client, round_page) -> None:
    html = client.get(URL).content.decode()
    labels = re.findall(r'name="ids" value="\d+" form="compare-form" aria-label="([^"]+)"', html)
    assert sorted(labels) == ["Compare Acme 512 BERT", "Compare Acme 512 ResNet-50", "Compare Zeta 8 ResNet-50"]
    assert 'data-min="2" data-max="4"' in html and 'id="compare-count"' in html


def test_the_symbols_beside_scores_are_explained_under_the_table(round_page) -> None:
    html = Client().get(URL).content.decode()
    legend = html.split('id="badge-legend"', 1)
    assert len(legend) == 2, "the round page carries the symbol legend"
    for symbol, meaning in (("✓", "reproduced"), ("✗", "mismatch"), ("!", "noncompliant")):
        assert re.search(rf"<dt[^>]*>{re.escape(symbol)}</dt><dd>[^<]*{meaning}", legend[1]), symbol
