"""The results list's rows kept written as JSON in PostgreSQL, rewritten by the database when a result changes.

Why: writing a page's 100 rows of ~55 fields as JSON was most of the results page's time in the database
(the rows statement 1.6 ms of which ~1.15 ms building the text, 20,000 results; leaderboard.api_sql), paid
on every signed-in or first request. Each row's text now is written once, when its result is written, and
a page joins 100 kept texts.

What is kept: each result's row as leaderboard.api_sql writes it (the same pieces of SQL), split where a
field is read from another table (the round's slug and ruleset, the organization's slug): those are joined
and written when the page is read, so a kept text depends on its result's own row alone and on nothing a
write elsewhere could change under it. A link's site base (the request's host) is kept as BASE and put in
on the way out. Each kept row carries the shape it was written in (a digest of the SQL that writes it): a
page reads a kept text only under the shape of its own code and writes any other row as before, so a row
kept by other code (a deploy before its `migrate`) is never served.

Who writes: triggers on ingest_result, one statement at a time (an insert, a COPY, an update of any
column by any means, a delete, a truncate), so no write of a result can leave its kept text behind.
Their functions hold the SQL of this code, so they are installed from it after every `migrate`
(`ensure`, post_migrate), which also rewrites every row kept under another shape. PostgreSQL only: the
table, made by migration 0004, exists there alone; other databases take api_sql's Python path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.recorder import MigrationRecorder

TABLE = "podium_result_json"
# The site's base in a kept row's links. PostgreSQL's to_json writes every control character escaped
# (\\u0001), and numbers, booleans and dates hold none: no value's text can contain it.
BASE = "\x01"
MIGRATION = ("leaderboard", "0004_kept_result_rows")
# Bumped when what the shape's digest does not see changes (the triggers' statements).
VERSION = "1"
_WRITTEN = "podium_result_json_written"
_GONE = "podium_result_json_gone"
_TRIGGERS = {
    "podium_result_json_inserted": f"AFTER INSERT ON ingest_result REFERENCING NEW TABLE AS written "
                                   f"FOR EACH STATEMENT EXECUTE FUNCTION {_WRITTEN}()",
    "podium_result_json_updated": f"AFTER UPDATE ON ingest_result REFERENCING NEW TABLE AS written "
                                  f"FOR EACH STATEMENT EXECUTE FUNCTION {_WRITTEN}()",
    "podium_result_json_deleted": f"AFTER DELETE ON ingest_result REFERENCING OLD TABLE AS gone "
                                  f"FOR EACH STATEMENT EXECUTE FUNCTION {_GONE}()",
    "podium_result_json_truncated": f"AFTER TRUNCATE ON ingest_result FOR EACH STATEMENT EXECUTE FUNCTION {_GONE}()",
}


# Beside each row's parts: what a page reads of its result without reading the result (the keys of the rows
# joined for the fields of other tables; when it was stored, for Last-Modified).
COLUMNS = ("created_at", "round_id", "organization_id")


@dataclass(frozen=True)
class Join:
    """A field read from another table: `alias` (the values() name, e.g. round__slug) is `column` of `table`,
    whose primary key `pk` the kept row's `key` (one of COLUMNS) holds."""

    alias: str
    table: str
    pk: str
    column: str
    key: str


@dataclass(frozen=True)
class Kept:
    """How rows are kept and read back."""

    shape: str  # the digest of `parts`: a kept row is read only under its own
    parts: tuple[str, ...]  # SQL over alias r (Result's own columns, as values() names them), one per kept part
    read: str  # SQL writing a whole row from the kept rows' `source` (alias r)
    joins: tuple[Join, ...]

    @property
    def source(self) -> str:
        """The kept rows of this shape (its one parameter) as the page reads them: alias r has "id", "parts",
        COLUMNS and every Join's alias, so that the fields and Last-Modified read them as they read values()."""
        tables = {(join.table, join.pk, join.key) for join in self.joins}
        names = {table_key: f"j{i}" for i, table_key in enumerate(sorted(tables))}
        columns = ", ".join(['k.result_id AS "id"', "k.parts", *(f'k.{c} AS "{c}"' for c in COLUMNS),
                             *(f'{names[(j.table, j.pk, j.key)]}."{j.column}" AS "{j.alias}"' for j in self.joins)])
        joined = " ".join(f'JOIN "{table}" {names[(table, pk, key)]} ON {names[(table, pk, key)]}."{pk}" = k.{key}'
                          for table, pk, key in sorted(tables))
        return f"SELECT {columns} FROM {TABLE} k {joined} WHERE k.shape = %s"


# --- the database's side ----------------------------------------------------------------------------------

def available(connection: BaseDatabaseWrapper) -> bool:
    """Whether this connection's database has the table (PostgreSQL, migration 0004): asked once per
    connection while it has it."""
    if connection.vendor != "postgresql":
        return False
    if getattr(connection, "_podium_kept_rows", False):
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [TABLE])
        found = bool(cursor.fetchone()[0])
    if found:
        connection._podium_kept_rows = True  # type: ignore[attr-defined]  # a mark of this module's
    return found


def _writer(kept: Kept, own_sql: str, source: str) -> str:
    """The statement writing the kept rows of `source` (a table of ingest_result's rows) under `kept`'s shape."""
    suffix = ' FROM "ingest_result"'
    if not own_sql.endswith(suffix):  # Result's own columns alone: no join, no condition
        raise ValueError(f"unexpected rows query: {own_sql[-120:]!r}")
    rows = own_sql[: -len(suffix)] + f' FROM {source} AS "ingest_result"'
    columns = ", ".join(COLUMNS)
    return (
        f"INSERT INTO {TABLE} (result_id, shape, parts, {columns}) "
        f"SELECT r.\"id\", '{kept.shape}', ARRAY[{', '.join(kept.parts)}], "
        f"{', '.join(f'r.{c}' for c in COLUMNS)} FROM ({rows}) r "
        "ON CONFLICT (result_id) DO UPDATE SET shape = EXCLUDED.shape, parts = EXCLUDED.parts, "
        f"{', '.join(f'{c} = EXCLUDED.{c}' for c in COLUMNS)}"
    )


def _functions(kept: Kept, own_sql: str) -> list[str]:
    """The writer's functions for `kept`'s shape. Replaced in place (CREATE OR REPLACE keeps the function the
    triggers name), so a new shape takes no lock on ingest_result: readers and writers go on meanwhile."""
    writer = _writer(kept, own_sql, "written")
    if "$podium$" in writer:
        raise ValueError("the writer's SQL holds the function's quote")
    return [
        f"CREATE OR REPLACE FUNCTION {_WRITTEN}() RETURNS trigger LANGUAGE plpgsql AS $podium$ "
        f"BEGIN {writer}; RETURN NULL; END $podium$",
        f"COMMENT ON FUNCTION {_WRITTEN}() IS '{kept.shape}'",
        f"CREATE OR REPLACE FUNCTION {_GONE}() RETURNS trigger LANGUAGE plpgsql AS $podium$ BEGIN "
        f"IF TG_OP = 'TRUNCATE' THEN TRUNCATE {TABLE}; "
        f"ELSE DELETE FROM {TABLE} WHERE result_id IN (SELECT id FROM gone); END IF; RETURN NULL; END $podium$",
    ]


# Rows written per statement when every kept row is brought to a new shape: each batch is a transaction of
# its own, so no row lock is held for the whole rewrite.
CATCH_UP_BATCH = 20_000


def _catch_up_statement(kept: Kept, own_sql: str, start: int, end: int) -> str:
    """Every row of ids in [start, end) kept under another shape, or not kept at all, written now. A row kept in
    this shape meanwhile is left as it is (ON CONFLICT ... WHERE, judged on the row as committed): a result's
    trigger wrote it from the result as it is now, where this statement may have read an older version."""
    return _writer(kept, own_sql, "ingest_result").replace(
        ") r ON CONFLICT",
        f") r WHERE r.\"id\" >= {int(start)} AND r.\"id\" < {int(end)} AND NOT EXISTS (SELECT 1 FROM {TABLE} k "
        f"WHERE k.result_id = r.\"id\" AND k.shape = '{kept.shape}') ON CONFLICT", 1,
    ) + f" WHERE {TABLE}.shape <> EXCLUDED.shape"


def _catch_up(connection: BaseDatabaseWrapper, kept: Kept, own_sql: str) -> None:
    """Every result's row kept in `kept`'s shape, batch by batch; none kept for a result gone."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(id), max(id) FROM ingest_result")
        low, high = cursor.fetchone()
    if low is not None:
        for start in range(low, high + 1, CATCH_UP_BATCH):
            with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
                # No parameter: the statement's text holds a % of its own (leaderboard.api_sql's dates).
                cursor.execute(_catch_up_statement(kept, own_sql, start, start + CATCH_UP_BATCH))
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} k WHERE NOT EXISTS (SELECT 1 FROM ingest_result r "
                       "WHERE r.id = k.result_id)")


def installed(connection: BaseDatabaseWrapper) -> tuple[str | None, set[str]]:
    """The shape the database's writer function writes (None: none installed) and the triggers present."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT obj_description(to_regprocedure(%s), 'pg_proc')", [f"{_WRITTEN}()"])
        shape = cursor.fetchone()[0]
        cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname = ANY(%s)", [list(_TRIGGERS)])
        return shape, {row[0] for row in cursor.fetchall()}


def install(connection: BaseDatabaseWrapper, kept: Kept, own_sql: str) -> None:
    """The writer's functions for `kept`'s shape and the triggers that are missing (creating one locks out
    writes of results for that moment, never reads), in one short transaction; then every row kept in that
    shape, batch by batch. Idempotent."""
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        for statement in _functions(kept, own_sql):
            cursor.execute(statement)
        present = installed(connection)[1]
        for name, body in _TRIGGERS.items():
            if name not in present:
                cursor.execute(f"CREATE TRIGGER {name} {body}")
    _catch_up(connection, kept, own_sql)


def catch_up(using: str, form_of: Callable[[str], tuple[Kept, str]]) -> None:
    """Every result's row kept in the running code's shape, where the triggers did not see the writes (a load
    with triggers off: `session_replication_role = replica`, as bench/browse.py loads its data; rows of the
    current shape written then stay as they are: only new rows are loaded that way)."""
    connection = connections[using]
    if connection.vendor != "postgresql" or not available(connection):
        return
    kept, own_sql = form_of(using)
    _catch_up(connection, kept, own_sql)


def drop(connection: BaseDatabaseWrapper) -> None:
    with connection.cursor() as cursor:
        for name in _TRIGGERS:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name} ON ingest_result")
        cursor.execute(f"DROP FUNCTION IF EXISTS {_WRITTEN}()")
        cursor.execute(f"DROP FUNCTION IF EXISTS {_GONE}()")


def ensure(using: str, form_of: Callable[[str], tuple[Kept, str]]) -> None:
    """After every `migrate`: the writer of the running code's shape (`form_of(using)`: the kept form and the
    SQL of Result's own columns, leaderboard.api.kept_form) installed, where the table is."""
    connection = connections[using]
    if connection.vendor != "postgresql" or MIGRATION not in MigrationRecorder(connection).applied_migrations():
        return
    kept, own_sql = form_of(using)
    if installed(connection) == (kept.shape, set(_TRIGGERS)):
        return
    install(connection, kept, own_sql)
