"""core.prepared: statements PostgreSQL prepares once per connection, and only those asked for; logged with
their values, errors as Django's, and a plain cursor where turned off or on another database."""

from __future__ import annotations

import pytest
from django.db import DataError, connection
from django.test.utils import CaptureQueriesContext

from core import prepared

pytestmark = pytest.mark.django_db

STATEMENT = "SELECT %s::integer + 1, 'podium-prepared-test'"
postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements: PostgreSQL")


def _prepared_here() -> list[tuple[str, int, int]]:
    """This connection's prepared statements (its text, generic and custom plans made)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        return cursor.fetchall()


def _run(value: int) -> int:
    with prepared.cursor(connection) as cursor:
        cursor.execute(STATEMENT, [value])
        return cursor.fetchone()[0]


@postgresql_only
def test_a_statement_is_prepared_once_and_run_with_new_values() -> None:
    assert [_run(value) for value in (1, 41, -3)] == [2, 42, -2]
    ours = [row for row in _prepared_here() if "podium-prepared-test" in row[0]]
    assert len(ours) == 1 and ours[0][1] + ours[0][2] == 3  # one statement, three runs of it


@postgresql_only
@pytest.mark.django_db(transaction=True)  # the connection is made again with other options
@pytest.mark.parametrize("server_side_binding", [False, True])
def test_djangos_own_statements_are_not_prepared(server_side_binding: bool) -> None:
    """Only what is asked for: Django's statements stay unprepared, also where they are sent with their values
    apart (server_side_binding, where psycopg would prepare a statement run often enough on its own)."""
    options = connection.settings_dict["OPTIONS"]
    saved = dict(options)
    options["server_side_binding"] = server_side_binding
    connection.close()
    try:
        _run(1)  # the connection's psycopg may now prepare: only what is asked of it
        for _ in range(10):
            with connection.cursor() as cursor:
                cursor.execute("SELECT %s::integer, 'podium-plain-test'", [7])
        assert not [row for row in _prepared_here() if "podium-plain-test" in row[0]]
    finally:
        options.clear()
        options.update(saved)
        connection.close()


@postgresql_only
@pytest.mark.django_db(transaction=True)  # a connection closed in a test's transaction cannot go on
def test_a_new_connection_prepares_it_again() -> None:
    _run(1)
    connection.close()
    assert _run(5) == 6
    assert [row for row in _prepared_here() if "podium-prepared-test" in row[0]]


@postgresql_only
def test_logged_with_its_values_and_errors_are_djangos() -> None:
    with CaptureQueriesContext(connection) as captured:
        _run(20)
        _run(21)  # prepared by now: psycopg sends no text, the log still shows it
    assert [query["sql"] for query in captured.captured_queries] == [
        "SELECT 20::integer + 1, 'podium-prepared-test'",
        "SELECT 21::integer + 1, 'podium-prepared-test'",
    ]
    with pytest.raises(DataError), prepared.cursor(connection) as cursor:
        cursor.execute("SELECT 1 / %s::integer", [0])


@postgresql_only
def test_turned_off_it_is_sent_as_any_other(settings: pytest.FixtureRequest) -> None:
    settings.PODIUM_PREPARED_STATEMENTS = False  # type: ignore[attr-defined]
    assert [_run(value) for value in (1, 2, 3)] == [2, 3, 4]
    assert not [row for row in _prepared_here() if "podium-prepared-test" in row[0]]


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the other databases' path")
def test_other_databases_get_a_plain_cursor() -> None:
    with prepared.cursor(connection) as cursor:
        cursor.execute("SELECT %s + 1", [41])
        assert cursor.fetchone()[0] == 42
