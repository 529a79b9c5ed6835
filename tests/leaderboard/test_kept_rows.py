"""The results list's rows kept written by the database (leaderboard.kept_rows): every write of a result,
by any means, rewrites its kept text; fields of other tables are read with the page; a row kept in another
shape is never served; and the page reads exactly as the one written without them (and as Python's)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Organization
from catalog.models import Round
from ingest.models import Result
from leaderboard import api_sql, kept_rows
from leaderboard.api import kept_form
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="rows are kept on PostgreSQL only"),
]

LIST = "/api/v1/results/?ordering=score"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def rows() -> list[Result]:
    published = RoundFactory(slug="kept-v1.0", publication_date=timezone.now() - datetime.timedelta(days=3))
    bench = BenchmarkFactory(round=published, key="resnet")
    odd = SystemFactory(round=published, slug="odd", name='Odd "q" \\ \u2028 \x01 é')
    return [ResultFactory(system=odd, benchmark=bench, score=1.5, raw_score=1e-07),
            ResultFactory(system=SystemFactory(round=published, slug="plain"), benchmark=bench, score=None,
                          verdict=Result.Verdict.NONCOMPLIANT),
            ResultFactory(system=SystemFactory(round=published, slug="third"), benchmark=bench, score=2.5)]


def _kept() -> dict[int, tuple[str, list[str]]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT result_id, shape, parts FROM {kept_rows.TABLE}")
        return {pk: (shape, parts) for pk, shape, parts in cursor.fetchall()}


def _page(path: str = LIST, *, kept: bool = True) -> Any:
    cache.clear()
    if kept:
        with mock.patch.object(api_sql, "page_json", wraps=api_sql.page_json) as spy:
            answer = APIClient().get(path, HTTP_HOST="localhost")
        assert spy.call_args.kwargs["kept"] is not None, "the page did not read kept rows"
    else:
        with mock.patch.object(kept_rows, "available", return_value=False):
            answer = APIClient().get(path, HTTP_HOST="localhost")
    assert answer.status_code == 200
    return json.loads(answer.content)


def _python(path: str = LIST) -> Any:
    cache.clear()
    with mock.patch.object(api_sql, "usable", return_value=False):
        return json.loads(APIClient().get(path, HTTP_HOST="localhost").content)


def test_every_result_is_kept_in_the_code_s_shape(rows: list[Result]) -> None:
    shape = kept_form(connection.alias)[0].shape
    assert {pk: kept[0] for pk, kept in _kept().items()} == {r.pk: shape for r in rows}


def test_the_page_of_kept_rows_is_the_page_written_whole_and_python_s(rows: list[Result]) -> None:
    page = _page()
    assert page == _page(kept=False) == _python()
    assert [list(row) for row in page["results"]] == [list(row) for row in _python()["results"]]
    first = next(row for row in page["results"] if row["id"] == rows[0].pk)
    assert first["url"] == f"http://localhost/api/v1/results/{rows[0].pk}/"  # the request's host
    assert first["system_name"] == 'Odd "q" \\ \u2028 \x01 é'  # a control character is no site base


def test_a_kept_text_is_what_the_page_serves(rows: list[Result]) -> None:
    # Proof that the page reads the kept text: a kept row changed behind the writer's back shows.
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {kept_rows.TABLE} SET parts[2] = replace(parts[2], '\"verified\"', '\"MARK\"') "
                       "WHERE result_id = %s", [rows[0].pk])
    verdicts = {row["id"]: row["verdict"] for row in _page()["results"]}
    assert verdicts[rows[0].pk] == "MARK" and verdicts[rows[2].pk] == "verified"


def test_a_row_kept_in_another_shape_is_never_served(rows: list[Result]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {kept_rows.TABLE} SET shape = 'older', parts[2] = 'garbage' WHERE result_id = %s",
                       [rows[0].pk])
    assert _page() == _python()


@pytest.mark.parametrize("write", ["save", "update", "raw"])
def test_every_write_of_a_result_rewrites_its_kept_text(rows: list[Result], write: str) -> None:
    result = rows[2]
    if write == "save":
        result.score = 7.25
        result.save()
    elif write == "update":
        Result.objects.filter(pk=result.pk).update(score=7.25)
    else:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE ingest_result SET score = 7.25 WHERE id = %s", [result.pk])
    scores = {row["id"]: row["score"] for row in _page()["results"]}
    assert scores[result.pk] == 7.25
    assert _page() == _python()


def test_fields_of_other_tables_are_read_with_the_page(rows: list[Result]) -> None:
    Round.objects.filter(slug="kept-v1.0").update(slug="renamed-v1.0", ruleset="9.9.9")
    Organization.objects.filter(pk=rows[0].organization_id).update(slug="renamed-org")
    first = next(row for row in _page()["results"] if row["id"] == rows[0].pk)
    assert (first["round"], first["ruleset"], first["organization"]) == ("renamed-v1.0", "9.9.9", "renamed-org")
    assert _page() == _python()


def test_results_gone_take_their_kept_rows_along(rows: list[Result]) -> None:
    from ingest.models import Finding, Run

    Finding.objects.filter(result=rows[1]).delete()
    Run.objects.filter(result=rows[1]).delete()
    Result.objects.filter(pk=rows[1].pk).delete()
    assert set(_kept()) == {rows[0].pk, rows[2].pk}
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no foreign key check left pending on the table
        cursor.execute("TRUNCATE ingest_result CASCADE")
    assert _kept() == {}


def test_migrate_installs_the_writer_again_and_rewrites_other_shapes(rows: list[Result]) -> None:
    kept_rows.drop(connection)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {kept_rows.TABLE} SET shape = 'older'")
        cursor.execute("UPDATE ingest_result SET score = 3.5 WHERE id = %s", [rows[0].pk])  # no writer now
    assert kept_rows.installed(connection) == (None, set())
    kept_rows.ensure(connection.alias, kept_form)
    shape = kept_form(connection.alias)[0].shape
    assert {kept[0] for kept in _kept().values()} == {shape}
    scores = {row["id"]: row["score"] for row in _page()["results"]}
    assert scores[rows[0].pk] == 3.5
    Result.objects.filter(pk=rows[0].pk).update(score=4.5)  # the writer is back
    assert _kept()[rows[0].pk][1] != []
    assert {row["id"]: row["score"] for row in _page()["results"]}[rows[0].pk] == 4.5


def test_a_bulk_insert_is_kept_too(rows: list[Result]) -> None:
    round_ = Round.objects.get(slug="kept-v1.0")
    bench = rows[0].benchmark
    made = [ResultFactory.build(system=SystemFactory(round=round_, slug=f"bulk-{i}"), benchmark=bench, score=9.0 + i)
            for i in range(3)]
    for result in made:
        result.submission.save()
    Result.objects.bulk_create(made)
    assert len(_kept()) == 6
    assert _page() == _python()


def test_a_new_shape_is_installed_without_touching_the_triggers_and_rewritten_in_batches(
        rows: list[Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """Replacing the writer takes no lock on ingest_result (the triggers stay, the functions they name are
    replaced in place), and the rows are rewritten batch by batch, one transaction each."""
    from leaderboard.api import _result_rows

    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname, oid FROM pg_trigger WHERE tgname LIKE 'podium_result_json%%'")
        triggers = dict(cursor.fetchall())
        cursor.execute(f"UPDATE {kept_rows.TABLE} SET shape = 'older'")
        cursor.execute("COMMENT ON FUNCTION podium_result_json_written() IS 'older'")
    monkeypatch.setattr(kept_rows, "CATCH_UP_BATCH", 1)
    kept_rows.ensure(connection.alias, kept_form)
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname, oid FROM pg_trigger WHERE tgname LIKE 'podium_result_json%%'")
        assert dict(cursor.fetchall()) == triggers and len(triggers) == 4
    shape = kept_form(connection.alias)[0].shape
    assert {kept[0] for kept in _kept().values()} == {shape} and len(_kept()) == 3
    assert _page() == _python()
    # The shape is the SQL the parts are written over too, not the parts alone.
    rows_of = _result_rows()
    fields, joins = rows_of.sql_fields, rows_of.joins()
    literal = connection.ops.compose_sql
    own = lambda column: "__" not in column  # noqa: E731 - as ResultRows.kept says
    assert (api_sql.kept_form(fields, own, literal, joins, "SELECT 1").shape
            != api_sql.kept_form(fields, own, literal, joins, "SELECT 2").shape)
