"""The browse bench's Datasette copy answers the bench's filter as Podium does (its figures were once
taken on an empty page: untyped SQLite columns never equal the text '1' Datasette passes)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.browse import DATASETTE_QUERY, export_sqlite
from tests.factories import ResultFactory

pytestmark = pytest.mark.django_db


def test_the_exported_copy_matches_filter_values_given_as_text(tmp_path: Path) -> None:
    kept = ResultFactory(benchmark_key="resnet", division="closed", is_current=True, score=12.5)
    ResultFactory(benchmark_key="resnet", division="closed", is_current=False, score=11.0)
    path = tmp_path / "bench.sqlite3"
    assert export_sqlite(path) == 2
    # Datasette binds every query-string value as text, as here.
    filters = dict(part.split("=") for part in DATASETTE_QUERY.split("&") if not part.startswith("_"))
    where = " AND ".join(f'"{column}" = ?' for column in filters)
    with sqlite3.connect(path) as lite:
        rows = lite.execute(f"SELECT id, score FROM results WHERE {where}", list(filters.values())).fetchall()
    assert rows == [(kept.pk, 12.5)]
