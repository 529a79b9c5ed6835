"""Keeps Result.round_publication_date, the copy of its round's publication date, exact: the database does it.

Why a copy: the embargo ("published, or granted") is a condition on every results query, and reading the
date from the round joins catalog_round into each of them. With the join PostgreSQL plans the results list's
page against every index of ingest_result once per join order: 0.71 ms of planning against 0.21 ms without
it, for a query that runs in 0.1 ms (20,000 results); a signed-in API page took 5.9 -> 5.3 ms in process.

Why triggers, not a signal: the embargo now trusts the copy, so a copy that lagged would show a result
before its round's publication. A `post_save` on Round misses `Round.objects.update()`, raw SQL and a
restore; a trigger sees every write of either table, whoever makes it:
- a result written (inserted, or its round changed) takes its round's date, whatever value it was given;
- a round inserted or whose date changed gives the date to its results (a restore may insert a round after
  its results: the foreign keys are checked at commit).
A result's write locks its round's row (FOR SHARE) to read the date, so that it and a change of the date
in another transaction see each other whichever commits first (a rare pair of them can deadlock instead,
which PostgreSQL ends by failing one: a verification is then retried, as after any database fault).
PostgreSQL and SQLite both have them (SQLite's triggers cannot assign NEW, so there the row is updated
after it is written, in the same statement's transaction; SQLite runs one writer at a time). SQLite
drops a table's triggers when Django rebuilds the table for an ALTER: `ensure_triggers` (post_migrate)
installs them again after every `migrate`, and brings every copy in step once more.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.recorder import MigrationRecorder
from django.db.models.signals import pre_save

from ingest.models import Result

# The migration that installs the triggers: before it, the schema may lack the column they write.
MIGRATION = ("ingest", "0018_round_publication_triggers")

_POSTGRES = [
    """
    CREATE OR REPLACE FUNCTION podium_result_takes_round_date() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- FOR SHARE: a change of the round's date under way (uncommitted) is waited for and read once
        -- committed, and one begun after waits for this transaction, whose results its trigger then sees.
        -- Read plainly, a result written beside such a change kept the old date (its round's trigger could
        -- not see the uncommitted row): a round moved later would have shown that result at the old date.
        NEW.round_publication_date := (SELECT publication_date FROM catalog_round WHERE id = NEW.round_id
                                       FOR SHARE);
        RETURN NEW;
    END $$
    """,
    """
    CREATE OR REPLACE FUNCTION podium_round_gives_date() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE ingest_result SET round_publication_date = NEW.publication_date
        WHERE round_id = NEW.id AND round_publication_date IS DISTINCT FROM NEW.publication_date;
        RETURN NULL;
    END $$
    """,
    "DROP TRIGGER IF EXISTS podium_result_round_date ON ingest_result",
    """
    CREATE TRIGGER podium_result_round_date BEFORE INSERT OR UPDATE OF round_id, round_publication_date
    ON ingest_result FOR EACH ROW EXECUTE FUNCTION podium_result_takes_round_date()
    """,
    "DROP TRIGGER IF EXISTS podium_round_date_inserted ON catalog_round",
    """
    CREATE TRIGGER podium_round_date_inserted AFTER INSERT ON catalog_round
    FOR EACH ROW EXECUTE FUNCTION podium_round_gives_date()
    """,
    "DROP TRIGGER IF EXISTS podium_round_date_changed ON catalog_round",
    """
    CREATE TRIGGER podium_round_date_changed AFTER UPDATE OF publication_date ON catalog_round
    FOR EACH ROW WHEN (OLD.publication_date IS DISTINCT FROM NEW.publication_date)
    EXECUTE FUNCTION podium_round_gives_date()
    """,
]

_POSTGRES_DROP = [
    "DROP TRIGGER IF EXISTS podium_result_round_date ON ingest_result",
    "DROP TRIGGER IF EXISTS podium_round_date_inserted ON catalog_round",
    "DROP TRIGGER IF EXISTS podium_round_date_changed ON catalog_round",
    "DROP FUNCTION IF EXISTS podium_result_takes_round_date()",
    "DROP FUNCTION IF EXISTS podium_round_gives_date()",
]

# SQLite runs a trigger's own UPDATE of its table without firing that trigger again (recursive_triggers is
# off), and `IS NOT` compares NULLs as values.
_ROUND_DATE = "(SELECT publication_date FROM catalog_round WHERE id = NEW.round_id)"
_SQLITE_TRIGGERS = {
    "podium_result_round_date_inserted": f"""
        AFTER INSERT ON ingest_result BEGIN
            UPDATE ingest_result SET round_publication_date = {_ROUND_DATE}
            WHERE id = NEW.id AND round_publication_date IS NOT {_ROUND_DATE};
        END""",
    "podium_result_round_date_changed": f"""
        AFTER UPDATE OF round_id, round_publication_date ON ingest_result BEGIN
            UPDATE ingest_result SET round_publication_date = {_ROUND_DATE}
            WHERE id = NEW.id AND round_publication_date IS NOT {_ROUND_DATE};
        END""",
    "podium_round_date_inserted": """
        AFTER INSERT ON catalog_round BEGIN
            UPDATE ingest_result SET round_publication_date = NEW.publication_date
            WHERE round_id = NEW.id AND round_publication_date IS NOT NEW.publication_date;
        END""",
    "podium_round_date_changed": """
        AFTER UPDATE OF publication_date ON catalog_round
        WHEN OLD.publication_date IS NOT NEW.publication_date BEGIN
            UPDATE ingest_result SET round_publication_date = NEW.publication_date
            WHERE round_id = NEW.id AND round_publication_date IS NOT NEW.publication_date;
        END""",
}

# Every copy brought in step with its round (once when the triggers are installed: rows written before).
_CATCH_UP = """
    UPDATE ingest_result SET round_publication_date =
        (SELECT publication_date FROM catalog_round WHERE catalog_round.id = ingest_result.round_id)
    WHERE round_publication_date {differs}
        (SELECT publication_date FROM catalog_round WHERE catalog_round.id = ingest_result.round_id)
"""


def _statements(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return [*_POSTGRES, _CATCH_UP.format(differs="IS DISTINCT FROM")]
    if vendor == "sqlite":
        return [statement for name, body in _SQLITE_TRIGGERS.items()
                for statement in (f"DROP TRIGGER IF EXISTS {name}", f"CREATE TRIGGER {name} {body}")
                ] + [_CATCH_UP.format(differs="IS NOT")]
    raise NotImplementedError(f"no publication date triggers for {vendor}")


def install_triggers(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Installs (or replaces) the triggers and brings every copy in step: idempotent."""
    for statement in _statements(schema_editor.connection.vendor):
        schema_editor.execute(statement)


def _drop_statements(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return _POSTGRES_DROP
    return [f"DROP TRIGGER IF EXISTS {name}" for name in _SQLITE_TRIGGERS]


def drop_triggers(schema_editor: BaseDatabaseSchemaEditor) -> None:
    for statement in _drop_statements(schema_editor.connection.vendor):
        schema_editor.execute(statement)


def installed_triggers(connection: BaseDatabaseWrapper) -> set[str]:
    """Which of this module's triggers the database has."""
    names = sorted(expected_triggers(connection.vendor))
    slots = ", ".join(["%s"] * len(names))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname IN ({slots})", names)
        else:
            cursor.execute(f"SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN ({slots})", names)
        return {row[0] for row in cursor.fetchall()}


def expected_triggers(vendor: str) -> set[str]:
    if vendor == "postgresql":
        return {"podium_result_round_date", "podium_round_date_inserted", "podium_round_date_changed"}
    return set(_SQLITE_TRIGGERS)


def ensure_triggers(using: str = "default", **kwargs: Any) -> None:
    """After every `migrate`: the triggers again where a table rebuild dropped them (SQLite), once their
    migration is applied (a migration back to an older schema removes them, and they must stay away)."""
    connection = connections[using]
    if connection.vendor not in ("postgresql", "sqlite"):
        return
    if MIGRATION not in MigrationRecorder(connection).applied_migrations():
        return
    if installed_triggers(connection) == expected_triggers(connection.vendor):
        return
    # A plain cursor, not a schema editor: SQLite refuses one inside a transaction (a test's).
    with connection.cursor() as cursor:
        for statement in _statements(connection.vendor):
            cursor.execute(statement)


def _result_inserting(sender: type[Result], instance: Result, raw: bool = False, **kwargs: Any) -> None:
    """The same date on the object in memory as the trigger writes in the row (no reading it back)."""
    if raw or not instance._state.adding or instance.round_publication_date is not None:
        return
    # The round is already loaded wherever results are stored (result_store, the factories).
    instance.round_publication_date = instance.round.publication_date


def connect() -> None:
    """Called once from IngestConfig.ready()."""
    pre_save.connect(_result_inserting, sender=Result, dispatch_uid="ingest.publication.result")
