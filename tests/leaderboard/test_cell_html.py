"""A round table's rows and score cells are built with f-strings and the standard library's escaping
(fast: a page has hundreds of cells); they must be the markup Django's format_html and the template
wrote, character for character (the row without the whitespace between its tags), for every kind of
cell and row and for values that need escaping (a hostile system name reaches the compare box's label,
a no-score reason the title)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from django.template import Context, Template
from django.utils.formats import localize
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from ingest.models import Result
from leaderboard.formatting import minutes
from leaderboard.table import _REPRO_MARK, Cell, Row, cell_html


def with_format_html(key: str, cell: Cell | None, label: str = "Compare") -> SafeString:
    """The cell as it was written with Django's format_html, kept here as the reference."""
    if cell is None:
        return format_html('<td class="num score" data-benchmark="{}"></td>', key)
    title = cell.verdict_label + (f": {cell.no_score_reason}" if cell.no_score_reason else "")
    if cell.value is not None:
        shown = escape(minutes(cell.value))
    elif not cell.is_official and cell.score is not None:
        shown = format_html('<s title="not official: {}">{}</s>', cell.verdict_label.lower(), minutes(cell.score))
    else:
        shown = "no score" if cell.score is None else "n/a"
    flag = '<span class="flag" title="noncompliant">!</span>' if cell.verdict == Result.Verdict.NONCOMPLIANT else ""
    repro = ""
    if cell.reproduction:
        note = " (could not be carried out; no verdict)" if cell.reproduction == "failed" else ""
        repro = format_html('<span class="repro repro-{}" title="reproduction: {}{}">{}</span>', cell.reproduction,
                            cell.reproduction, note, _REPRO_MARK.get(cell.reproduction, "?"))
    return format_html(
        '<td class="num score" data-benchmark="{}"><input type="checkbox" name="ids" value="{}" form="compare-form" '
        'aria-label="{}"><a href="{}" class="{}" data-value="{}" title="{}">{}</a>{}{}</td>',
        key, cell.pk, label, cell.url, cell.verdict, "" if cell.value is None else localize(cell.value), title,
        mark_safe(shown), mark_safe(flag), repro)


HOSTILE = "<script>alert('x')</script> & \"quoted\" 'single' ≥ é"

CELLS = [
    Cell(pk=pk, url=url, verdict=verdict, no_score_reason=reason, score=score, value=value, is_official=official,
         reproduction=reproduction)
    for pk, url, (verdict, official), reason, (score, value), reproduction in itertools.product(
        [7], ["/results/7/", f"/results/7/?x={HOSTILE}"],
        [(Result.Verdict.VERIFIED, True), (Result.Verdict.NONCOMPLIANT, False), ("<odd>", False)],
        ["", "3 of 5 required runs", HOSTILE],
        [(12.948949999999998, 12.948949999999998), (1234.5, None), (None, None), (0.0042, 0.0042), (1e-07, 1e-07),
         (3.5e20, 3.5e20), (-0.0, -0.0), (1200, 1200), (float("nan"), float("nan"))],
        ["", "reproduced", "mismatch", "failed", "<b>"],
    )
]


@pytest.mark.parametrize("label", ["Compare", f"Compare {HOSTILE} ResNet"])
@pytest.mark.parametrize("key", ["resnet", HOSTILE])
def test_each_cell_is_the_markup_format_html_wrote(key: str, label: str) -> None:
    assert cell_html(key, None, label) == with_format_html(key, None, label)
    for cell in CELLS:
        written = cell_html(key, cell, label)
        assert written == with_format_html(key, cell, label), cell
        assert isinstance(written, SafeString)
        assert "<script>" not in written


ROW_TEMPLATE = Template("""
      <tr data-system="{{ row.slug }}">
        <th scope="row" class="system"><a href="{{ row.url }}">{{ row.name }}</a></th>
        <td>{{ row.submitter }}</td>
        <td class="wide-only">{{ row.accelerator_model|default:"—" }}</td>
        <td class="num">{{ row.accelerators|default_if_none:"—" }}</td>
        <td class="num wide-only">{{ row.hosts|default_if_none:"—" }}</td>
        <td class="wide-only">{{ row.category|default:"—" }}</td>
        <td class="wide-only">{{ row.system_type|default:"—" }}</td>
        {% for cell in cells %}{{ cell }}{% endfor %}
      </tr>""")


@pytest.mark.parametrize("text", ["Acme 512", HOSTILE])
@pytest.mark.parametrize("numbers", [(512, 64), (0, None), (None, 1)])
def test_each_row_is_the_markup_the_template_wrote(text: str, numbers: tuple[int | None, int | None]) -> None:
    accelerators, hosts = numbers
    names = {"resnet": f"ResNet {text}", "bert": "BERT"}
    for model, category, kind in (("H100", "available", "datacenter"), ("", "", ""), (text, text, text)):
        row = Row(slug=f"sys-{text}", submitter=text, name=text, url=f"/systems/{text}/", accelerator_model=model,
                  accelerators=accelerators, hosts=hosts, category=category, system_type=kind,
                  cells=[("resnet", CELLS[5]), ("bert", None), ("gpt3", CELLS[-1])], benchmark_names=names)
        cells = [with_format_html(key, cell, f"Compare {row.name} {names.get(key, key)}") for key, cell in row.cells]
        written = ROW_TEMPLATE.render(Context({"row": row, "cells": cells}))
        assert row.html == re.sub(r">\s+<", "><", written.strip())
        assert "<script>" not in row.html


def test_numbers_follow_the_site_s_number_format_when_it_groups_thousands(settings: Any) -> None:
    """The cells write numbers without localize's lookups only for the format this site has; another
    setting (thousands grouped) is honoured as the template honoured it."""
    settings.USE_THOUSAND_SEPARATOR = True
    big = Cell(pk=7, url="/results/7/", verdict=Result.Verdict.VERIFIED, no_score_reason="", score=123456.5,
               value=123456.5, is_official=True, reproduction="")
    written = cell_html("resnet", big)
    assert written == with_format_html("resnet", big)
    assert 'data-value="123,456.5"' in written
    for cell in CELLS:
        assert cell_html("resnet", cell) == with_format_html("resnet", cell)
