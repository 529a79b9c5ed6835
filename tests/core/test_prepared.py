"""core.prepared: statements PostgreSQL prepares once per connection, and only those asked for; logged with
their values, errors as Django's, and a plain cursor where turned off or on another database."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import DataError, NotSupportedError, ProgrammingError, connection, transaction
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
def test_turned_off_it_is_sent_as_any_other(settings: Any) -> None:
    settings.PODIUM_PREPARED_STATEMENTS = False
    assert [_run(value) for value in (1, 2, 3)] == [2, 3, 4]
    assert not [row for row in _prepared_here() if "podium-prepared-test" in row[0]]


@pytest.fixture
def refusals(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process that has prepared statements yet, restored after the test; the connection, whose psycopg
    still takes the statement the test deallocated for prepared, is closed (tests using it are transactional)."""
    monkeypatch.setattr(prepared, "_refused", False)
    yield
    connection.close()


def _deallocate_ours() -> None:
    """What a pooler handing out another server connection amounts to: the statement gone behind psycopg's
    back (psycopg still takes it for prepared)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE statement LIKE %s",
                       ["%podium-prepared-test%"])
        for (name,) in cursor.fetchall():
            cursor.execute(f'DEALLOCATE "{name}"')


@postgresql_only
@pytest.mark.django_db(transaction=True)  # outside a transaction, as Django's requests run
def test_a_statement_the_server_lost_is_run_unprepared_from_then_on(refusals: None,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    assert [_run(value) for value in (1, 2)] == [2, 3]
    _deallocate_ours()
    with caplog.at_level(logging.WARNING, logger="podium.database"):
        assert [_run(value) for value in (3, 4)] == [4, 5]  # psycopg alone: "prepared statement does not exist"
    assert prepared._refused
    assert [r.message for r in caplog.records if "DATABASE_PREPARED_STATEMENTS=0" in r.message]
    assert not [row for row in _prepared_here() if "podium-prepared-test" in row[0]]  # none prepared again


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_error_is_the_caller_s_and_nothing_is_prepared_after(refusals: None) -> None:
    _run(1)
    _deallocate_ours()
    with pytest.raises(ProgrammingError), transaction.atomic():
        _run(2)  # the transaction is aborted: no statement can run in it any more
    assert prepared._refused
    assert _run(5) == 6


@pytest.mark.skipif(connection.vendor == "postgresql", reason="the other databases' path")
def test_other_databases_get_a_plain_cursor() -> None:
    with prepared.cursor(connection) as cursor:
        cursor.execute("SELECT %s + 1", [41])
        assert cursor.fetchone()[0] == 42


PROBE = "SELECT v, %s::integer FROM podium_prepared_probe -- podium-prepared-test"


@pytest.fixture
def probe_table() -> Iterator[Callable[[int], list[tuple[str, int]]]]:
    """A table whose column a migration (another connection) changes the type of, and a prepared read of it."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE podium_prepared_probe (v varchar(10))")
        cursor.execute("INSERT INTO podium_prepared_probe VALUES ('a')")

    def read(value: int) -> list[tuple[str, int]]:
        with prepared.cursor(connection) as cursor:
            cursor.execute(PROBE, [value])
            return cursor.fetchall()

    yield read
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE podium_prepared_probe")


def _widen_the_column_elsewhere() -> None:
    import psycopg

    settings_dict = connection.settings_dict
    with psycopg.connect(dbname=settings_dict["NAME"], user=settings_dict["USER"], host=settings_dict["HOST"],
                         port=settings_dict["PORT"] or 5432, autocommit=True) as other:
        other.execute("ALTER TABLE podium_prepared_probe ALTER COLUMN v TYPE varchar(20)")


@postgresql_only
@pytest.mark.django_db(transaction=True)  # the table is changed from another connection, as a migration would
def test_a_column_whose_type_changed_meanwhile_gets_the_statement_prepared_again(refusals: None,
                                                                                  probe_table: Any) -> None:
    """A migration run while the site serves changes a column type under a statement a connection prepared:
    PostgreSQL then refuses the kept statement ("cached plan must not change result type") on every run
    until it is deallocated. It is, once, and prepared again; nothing else stops being prepared."""
    assert [probe_table(1), probe_table(2)] == [[("a", 1)], [("a", 2)]]
    _widen_the_column_elsewhere()
    assert [probe_table(3), probe_table(4)] == [[("a", 3)], [("a", 4)]]
    assert not prepared._refused
    assert [row for row in _prepared_here() if "podium-prepared-test" in row[0]]  # prepared again


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_a_changed_type_is_the_caller_s_and_the_next_run_prepares_again(
        refusals: None, probe_table: Any) -> None:
    probe_table(1)
    _widen_the_column_elsewhere()
    with pytest.raises(NotSupportedError), transaction.atomic():
        probe_table(2)
    assert probe_table(3) == [("a", 3)]  # the rollback deallocated the statement
    assert not prepared._refused


@postgresql_only
@pytest.mark.django_db(transaction=True)  # a transaction of the connection's own, rolled back
def test_the_reads_a_rolled_back_block_prepared_are_prepared_again_after_it() -> None:
    with prepared.prepared_again_after(connection), transaction.atomic():
        assert _run(41) == 42
        # psycopg forgets them at the rollback and deallocates them (every statement of the connection).
        transaction.set_rollback(True)
    ours = [row for row in _prepared_here() if "podium-prepared-test" in row[0]]
    assert len(ours) == 1
    assert _run(1) == 2  # and used: no second statement of that text
    assert len([row for row in _prepared_here() if "podium-prepared-test" in row[0]]) == 1


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_only_the_blocks_own_reads_are_run_again() -> None:
    _run(5)  # before the block: forgotten at its rollback, and not run again
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE podium_prepared_again (n integer)")
    try:
        with prepared.prepared_again_after(connection), transaction.atomic():
            with prepared.cursor(connection) as cursor:
                cursor.execute("INSERT INTO podium_prepared_again VALUES (%s)", [1])
                cursor.execute("SELECT count(*), 'podium-prepared-again-read' FROM podium_prepared_again "
                               "WHERE n >= %s", [0])
            transaction.set_rollback(True)
        statements = [row[0] for row in _prepared_here()]
        assert [text for text in statements if "podium-prepared-again-read" in text]  # the read, again
        assert not [text for text in statements if "INSERT" in text.upper()]  # not the write
        assert not [text for text in statements if "podium-prepared-test" in text]  # not what came before
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM podium_prepared_again")
            assert cursor.fetchone() == (0,)  # the insert was rolled back, and not run again
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE podium_prepared_again")


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_nothing_is_run_again_after_a_block_that_raised() -> None:
    with pytest.raises(RuntimeError), prepared.prepared_again_after(connection), transaction.atomic():
        _run(1)
        raise RuntimeError("the rehearsal failed")
    assert not [row for row in _prepared_here() if "podium-prepared-test" in row[0]]
