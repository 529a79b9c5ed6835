"""On PostgreSQL the results list's JSON page is written by the database (leaderboard.api_sql): it must
read as the same JSON the Python path writes, key for key, for the values that differ most in text
(dates with and without microseconds, whole and extreme floats, characters JSON or JavaScript escape,
nulls, a withdrawn result), with the same headers, errors and empty pages."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Round
from ingest.models import Result
from leaderboard import api_sql
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the database writes the page on PostgreSQL only"),
]

LIST = "/api/v1/results/?page_size=3&ordering=score"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    cache.clear()  # the anonymous body and the count are kept per generation: each request builds its page
    yield
    cache.clear()


@pytest.fixture
def rows() -> list[Result]:
    published = RoundFactory(slug="pub-json", publication_date=datetime.datetime(2026, 6, 1, 12, tzinfo=datetime.UTC))
    resnet = BenchmarkFactory(round=published, key="resnet")
    odd = SystemFactory(round=published, slug="odd", name='Odd "quoted" \\ name\u2028é 🚀\ttab\x01')
    made = [
        ResultFactory(
            system=odd,
            benchmark=resnet,
            score=100.0,
            raw_score=1e-07,
            energy_j=1.2345678901234567e20,
            runs_cv=None,
            price_per_hour=0.1,
        ),
        ResultFactory(
            system=SystemFactory(round=published, slug="plain"),
            benchmark=resnet,
            score=None,
            raw_score=None,
            verdict=Result.Verdict.NONCOMPLIANT,
            no_score_reason="3 of 5 required runs",
        ),
        ResultFactory(system=SystemFactory(round=published, slug="gone"), benchmark=resnet, score=2.5),
    ]
    Result.objects.filter(pk=made[0].pk).update(
        created_at=datetime.datetime(2026, 5, 1, 8, 0, 0, 123456, tzinfo=datetime.UTC)
    )
    Result.objects.filter(pk=made[1].pk).update(created_at=datetime.datetime(2026, 5, 2, 9, 30, tzinfo=datetime.UTC))
    Result.objects.filter(pk=made[2].pk).update(
        withdrawn_at=datetime.datetime(2026, 7, 1, 0, 0, 0, 5, tzinfo=datetime.UTC)
    )
    return made


def _both(path: str) -> tuple[Any, Any]:
    """(the database's answer, the Python path's) to the same anonymous request."""
    with mock.patch.object(api_sql, "page_json", wraps=api_sql.page_json) as spy:
        written = APIClient().get(path)
    assert spy.called, "the list did not take the database's path"
    cache.clear()
    with mock.patch.object(api_sql, "usable", return_value=False):
        python = APIClient().get(path)
    return written, python


def test_the_database_writes_the_page_the_python_path_writes(rows: list[Result]) -> None:
    written, python = _both(LIST)
    assert written.status_code == python.status_code == 200
    ours, theirs = json.loads(written.content), json.loads(python.content)
    assert ours == theirs and [list(row) for row in ours["results"]] == [list(row) for row in theirs["results"]]
    assert list(ours) == ["count", "next", "previous", "results"] and ours["count"] == 3
    by_id = {row["id"]: row for row in ours["results"]}
    first, plain, gone = (by_id[r.pk] for r in rows)
    assert first["created_at"] == "2026-05-01T08:00:00.123456Z" and plain["created_at"] == "2026-05-02T09:30:00Z"
    assert gone["withdrawn_at"] == "2026-07-01T00:00:00.000005Z" and first["withdrawn_at"] is None
    assert first["energy_j"] == 1.2345678901234567e20 and first["raw_score"] == 1e-07
    assert (first["official"], plain["official"], gone["official"]) == (True, False, False)
    assert first["system_name"] == 'Odd "quoted" \\ name\u2028é 🚀\ttab\x01'
    # Valid JSON but not valid JavaScript unescaped: written escaped, as DRF's renderer does.
    assert "\u2028" not in written.content.decode() and "\\u2028" in written.content.decode()
    assert written["Last-Modified"] == python["Last-Modified"]
    assert written["Content-Type"] == python["Content-Type"] == "application/json"


def test_pages_links_and_errors_match(rows: list[Result]) -> None:
    for path in (
        "/api/v1/results/?page_size=2&ordering=-score",
        "/api/v1/results/?page_size=2&page=2",
        "/api/v1/results/?page_size=2&page=last",
        "/api/v1/results/?round=no-such-round",
    ):
        written, python = _both(path)
        assert written.status_code == python.status_code == 200, path
        assert json.loads(written.content) == json.loads(python.content), path
    beyond = "/api/v1/results/?page_size=2&page=9"
    with mock.patch.object(api_sql, "page_json", wraps=api_sql.page_json):
        written = APIClient().get(beyond)
    cache.clear()
    with mock.patch.object(api_sql, "usable", return_value=False):
        python = APIClient().get(beyond)
    assert written.status_code == python.status_code == 404
    assert written.json() == python.json()


def test_last_modified_is_the_latest_time_a_row_became_visible(rows: list[Result]) -> None:
    # The two oldest rows were stored in May and made public by their round's publication on 1 June: the
    # page changed for its readers then, not when they were stored.
    written, python = _both("/api/v1/results/?page_size=2&ordering=created_at")
    assert written["Last-Modified"] == python["Last-Modified"] == "Mon, 01 Jun 2026 12:00:00 GMT"
    # A round published in the future (seen early by nobody anonymous): only stored rows count.
    Round.objects.filter(slug="pub-json").update(publication_date=timezone.now() + datetime.timedelta(days=9))
    Result.objects.update(round_publication_date=timezone.now() + datetime.timedelta(days=9))
    cache.clear()
    staff = get_user_model().objects.create_user("staff-json", is_staff=True)  # sees the embargoed round
    client = APIClient()
    client.force_authenticate(staff)
    for path in ("/api/v1/results/?page_size=2&ordering=created_at",):
        with mock.patch.object(api_sql, "page_json", wraps=api_sql.page_json) as spy:
            written = client.get(path)
        assert spy.called
        cache.clear()
        with mock.patch.object(api_sql, "usable", return_value=False):
            python = client.get(path)
        assert written.status_code == python.status_code == 200
        assert written["Last-Modified"] == python["Last-Modified"] == "Sat, 02 May 2026 09:30:00 GMT"


def test_an_empty_list_is_an_empty_page_without_last_modified(rows: list[Result]) -> None:
    written, python = _both("/api/v1/results/?round=no-such-round")
    assert (
        json.loads(written.content)
        == json.loads(python.content)
        == {"count": 0, "next": None, "previous": None, "results": []}
    )
    assert "Last-Modified" not in written and "Last-Modified" not in python


def test_other_renderers_take_the_python_path(rows: list[Result]) -> None:
    with mock.patch.object(api_sql, "page_json", wraps=api_sql.page_json) as spy:
        response = APIClient().get(LIST, HTTP_ACCEPT="text/html")
    assert response.status_code == 200 and not spy.called
    assert b"Odd" in response.content


def test_the_rows_query_is_compiled_once_for_every_page_and_ordering(rows: list[Result]) -> None:
    """Only the page's ids are built per request; the columns' query is compiled once per process."""
    from core import compiled
    from leaderboard.api import ResultRows

    for key in [key for key in compiled._kept if key[0] == "leaderboard.api.result_rows"]:
        del compiled._kept[key]
    seen = []
    with mock.patch.object(ResultRows, "rows_query", autospec=True, side_effect=ResultRows.rows_query) as build:
        for path in ("/api/v1/results/?page_size=2&ordering=-score", "/api/v1/results/?page_size=1&page=3&ordering=id",
                     "/api/v1/results/?ordering=-created_at"):
            response = APIClient().get(path)
            assert response.status_code == 200, path
            seen.append([row["id"] for row in response.json()["results"]])
            cache.clear()
    assert build.call_count == 1
    first, plain, gone = (r.pk for r in rows)
    # -score: missing scores last; page 3 of one: the third id; -created_at: gone (stored now) first.
    assert seen == [[first, gone], [max(first, plain, gone)], [gone, plain, first]]


def _page_statement_runs() -> int:
    """How many times this connection ran the prepared statement of a page's rows."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements "
                       "WHERE statement LIKE %s", ["WITH podium_page AS MATERIALIZED%"])
        return cursor.fetchone()[0]


def test_the_rows_are_read_by_a_prepared_statement_and_the_same_without(rows: list[Result], settings: Any) -> None:
    """The rows' statement (the same text for every page) is prepared: only the page's ids are planned per
    request. Turned off (behind a pooler that cannot keep prepared statements) the page is the same."""
    before = _page_statement_runs()
    pages = [APIClient().get(path) for path in (LIST, "/api/v1/results/?page_size=1&page=2&ordering=-score")]
    assert _page_statement_runs() == before + 2
    cache.clear()
    settings.PODIUM_PREPARED_STATEMENTS = False
    plain = [APIClient().get(path) for path in (LIST, "/api/v1/results/?page_size=1&page=2&ordering=-score")]
    assert _page_statement_runs() == before + 2
    assert [page.json() for page in pages] == [page.json() for page in plain]
    assert [row["id"] for row in pages[1].json()["results"]] == [rows[2].pk]  # 100, 2.5, None: the second
    assert [page["Last-Modified"] for page in pages] == [page["Last-Modified"] for page in plain]


@pytest.mark.parametrize(
    ("kind", "sql_type", "values"),
    [
        ("integer", "bigint", ["0", "-1", "9223372036854775807", "NULL"]),
        ("integer", "smallint", ["7", "NULL"]),
        ("float", "double precision",
         ["100", "1e-07", "1.2345678901234567e20", "-0", "0.1", "'NaN'", "'Infinity'", "'-Infinity'", "NULL"]),
        ("boolean", "boolean", ["true", "false", "NULL"]),
        ("column", "varchar(200)", ["'plain'", "'Odd \"quoted\" \\ name'", "E'tab\\there\\x01\\n'", "'é 🚀'", "''",
                                    "NULL"]),
    ],
)
def test_each_kind_is_written_as_row_to_json_writes_it(kind: api_sql.Kind, sql_type: str, values: list[str]) -> None:
    """The page's rows are written column by column by type (faster than row_to_json on PostgreSQL 15): the
    text must be what row_to_json writes for the same value, NULLs, NaN and Infinity (quoted) included."""
    field = api_sql.Field("v", kind, "v")
    rows = ", ".join(f"(({value})::{sql_type})" for value in values)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {api_sql._value(field)}, row_to_json(r)::text FROM (VALUES {rows}) r(v)")
        written = cursor.fetchall()
    assert len(written) == len(values)
    for ours, theirs in written:
        assert "{" + '"v":' + ours + "}" == theirs


def test_a_link_is_valid_json_whatever_the_site_base_holds(rows: list[Result]) -> None:
    """A link's text around the id is escaped for JSON in Python (the base comes from the request's host)."""
    fields = (api_sql.Field("url", "link", "id", "/api/v1/results/", "/"),
              api_sql.Field("runs", "query_link", "id", "/api/v1/runs/?result="))
    from leaderboard.api import _result_rows

    base = 'http://h"o\\st\n'
    text, _, _ = api_sql.page_json([rows[0].pk], _result_rows().sql_rows("default"), fields, base,
                                   timezone.now(), using="default")
    assert json.loads(text) == [{"url": f"{base}/api/v1/results/{rows[0].pk}/",
                                 "runs": f"{base}/api/v1/runs/?result={rows[0].pk}"}]
    # The same from a kept row (leaderboard.kept_rows), whose links hold a mark where the base goes.
    from leaderboard.api import kept_form

    text, _, _ = api_sql.page_json([rows[0].pk], _result_rows().sql_rows("default"),
                                   _result_rows().sql_fields, base, timezone.now(), using="default",
                                   kept=kept_form("default")[0])
    (row,) = json.loads(text)
    assert row["url"] == f"{base}/api/v1/results/{rows[0].pk}/"
    assert row["runs_url"] == f"{base}/api/v1/runs/?result={rows[0].pk}"
