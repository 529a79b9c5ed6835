"""A cursor whose statements PostgreSQL parses and plans once per connection (a prepared statement).

Why: Django sends every statement as text with its values written in (client-side binding), so PostgreSQL
parses, analyses and plans it again on every request. For a long statement whose shape never changes
(the results page's ~55 columns of 100 rows by id, leaderboard.api_sql) that was ~1.3 ms of the page's
3.3 ms in the database (psycopg alone, 20,000 results); prepared, the connection runs it with new values only.

Use it only for statements whose best plan does not depend on the values: after five runs PostgreSQL may
keep one plan for all values (a generic plan), which for a filter on the visitor's values can be far worse
than the plan made for those values (measured: an `icontains` filter at 200,000 results, 6.8 -> 77 ms).
Rows by primary key are safe; the ORM's filtered queries are not, and keep Django's cursor, except with
their values written into the text (leaderboard.page_plans): with no parameter, the one plan is made for
those values.

The cursor is Django's (its queries logged and counted, errors wrapped as the ORM's). Django turns
psycopg's prepared statements off for connection poolers; Podium's settings turn them on only for these
statements (PODIUM_PREPARED_STATEMENTS, `DATABASE_PREPARED_STATEMENTS=0` behind a pooler that cannot
keep them, such as PgBouncer in transaction mode before 1.21): without them, the same statements go through
Django's own cursor.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

log = logging.getLogger("podium.database")

# Set when the server lost a statement prepared on this connection, or had one of the name already: a
# pooler between Podium and PostgreSQL that hands each transaction another server connection (PgBouncer in
# transaction mode before 1.21), or a DISCARD/DEALLOCATE of someone else's. psycopg still takes the
# statement for prepared and would fail on every run: from then on this process prepares nothing.
_refused = False


@functools.cache
def _preparing() -> type[Any]:
    """The cursor class, made on first use: its base and psycopg are imported only where the database is PostgreSQL,
    so that a command on SQLite (the embedded default) never imports psycopg, a tenth of a second of every start
    (tests/config/test_start_imports.py; a web process imports it anyway, through DRF)."""
    from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]  # psycopg 3
    from psycopg import errors, pq

    class Preparing(ServerBindingCursor):
        """Values sent apart from the statement (server-side binding), which is prepared on its first run."""

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            global _refused
            if _refused:
                return super().execute(query, params, prepare=False)
            try:
                ran = super().execute(query, params, prepare=True)
                _note(self.connection, query, params)
                return ran
            except (errors.InvalidSqlStatementName, errors.DuplicatePreparedStatement) as exc:
                _refused = True
                log.warning("PostgreSQL lost or refused a prepared statement (%s): this process prepares none any "
                            "more. Behind a pooler that cannot keep them, set DATABASE_PREPARED_STATEMENTS=0.", exc)
                if self.connection.info.transaction_status != pq.TransactionStatus.IDLE:
                    raise  # inside a transaction, which the error ended: the caller's to handle
                return super().execute(query, params, prepare=False)
            except errors.FeatureNotSupported:
                # "cached plan must not change result type": a column the statement reads changed its type
                # since this connection prepared it (a migration run while the site serves), and PostgreSQL
                # refuses the kept statement on every run until it is deallocated. (Any other unsupported
                # feature fails the run below again and is the caller's.)
                if self.connection.info.transaction_status != pq.TransactionStatus.IDLE:
                    raise  # the transaction's rollback deallocates them all (psycopg sends DEALLOCATE ALL then)
                log.info("A prepared statement's result type changed (a migration?): this connection's prepared "
                         "statements are deallocated and prepared again.")
                # psycopg forgets its own prepared statements when it sees DEALLOCATE ALL run.
                self.connection.execute("DEALLOCATE ALL")
                return super().execute(query, params, prepare=True)

    return Preparing


# A statement run this many times is never prepared by psycopg on its own: only those asked for are.
_NEVER_ON_ITS_OWN = sys.maxsize

# The reads prepared on this thread inside prepared_again_after's block: (psycopg connection, statement) -> values.
_noting = threading.local()


def _note(raw: Any, query: Any, params: Any) -> None:
    noted: dict[tuple[Any, Any], Any] | None = getattr(_noting, "reads", None)
    if noted is not None and _is_read(query):
        noted[(raw, query)] = params


def _is_read(query: Any) -> bool:
    return isinstance(query, str) and query.lstrip()[:6].upper() == "SELECT"  # Django sends its SQL as text


@contextlib.contextmanager
def prepared_again_after(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """The reads prepared on `connection` inside the block (on this thread) are run again once it ends, each with
    the values it ran with there, so that they are prepared anew. For a block that ends in a rollback. Nothing is
    run again where the block raises.

    Why: psycopg forgets every statement prepared on a connection when a transaction of it rolls back, and
    deallocates them on the server (they could name an object the rollback dropped). A rehearsal, which ends in a
    rollback (ingest.services.rehearsal), left its connection with none: the first real upload's request and task
    prepared each read again on the way to the verdict (PostgreSQL's log, each read's parse and first plans:
    0.1-0.6 ms each, more on a busy machine).

    Only reads (a SELECT), only the block's own, with the block's values: a rehearsal's made-up rows, gone after
    its rollback, so a read that locks rows (FOR UPDATE) or draws from a sequence for each row finds none. Outside a
    transaction, as after a rehearsal's, a lock would last its own statement only."""
    if connection.vendor != "postgresql" or not settings.PODIUM_PREPARED_STATEMENTS:
        yield
        return
    outer = getattr(_noting, "reads", None)
    noted: dict[tuple[Any, Any], Any] = {}
    _noting.reads = noted
    try:
        yield
    finally:
        _noting.reads = outer
    raw = connection.connection
    for (prepared_on, query), params in noted.items():
        if prepared_on is not raw or _refused:  # the block's connection was replaced meanwhile: nothing to keep
            continue
        try:
            with cursor(connection) as reading:
                reading.execute(query, params)
        except DatabaseError:  # whatever changed since: prepared at its next real run, as before
            log.debug("a prepared read was not prepared again", exc_info=True)


def cursor(connection: BaseDatabaseWrapper) -> CursorWrapper:
    """A cursor of `connection` whose statements are prepared (PostgreSQL, unless turned off), else a plain one."""
    if connection.vendor != "postgresql" or not settings.PODIUM_PREPARED_STATEMENTS or _refused:
        return connection.cursor()
    # As Django's own connection.cursor() (health check, connecting, the thread's ownership), with
    # another psycopg cursor inside.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = connection.connection
    if raw.prepare_threshold is None:  # Django's default: psycopg then ignores prepare=True
        raw.prepare_threshold = _NEVER_ON_ITS_OWN
    with connection.wrap_database_errors:
        inner = _preparing()(raw)
    return _Logged(inner, connection) if connection.queries_logged else connection.make_cursor(inner)


class _Logged(CursorDebugWrapper):
    """Logs each statement with its values written in, as Django does for server-side binding: its own way
    reads the text psycopg sent, which holds placeholders here (and none once prepared)."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return CursorWrapper.execute(self, sql, params)
