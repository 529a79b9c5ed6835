"""Migration 0015's trigram indexes for the search: made on PostgreSQL where pg_trgm can be created, and
a database that refuses the extension migrates anyway (the search then reads every system)."""

from __future__ import annotations

import importlib

import pytest
from django.db import DatabaseError, connection

migration = importlib.import_module("ingest.migrations.0015_system_search_trigram_indexes")


class _Connection:
    vendor = "postgresql"
    alias = "default"


class _RefusingEditor:
    """A schema editor on a database whose owner may not create extensions."""

    connection = _Connection()

    def __init__(self) -> None:
        self.executed: list[str] = []

    def execute(self, sql: str) -> None:
        self.executed.append(sql)
        if "EXTENSION" in sql:
            raise DatabaseError("permission denied to create extension \"pg_trgm\"")


@pytest.mark.django_db
def test_a_database_that_refuses_the_extension_migrates_without_the_indexes(caplog) -> None:
    editor = _RefusingEditor()
    migration.create_indexes(None, editor)  # no exception: the migration goes on
    assert editor.executed == ["CREATE EXTENSION IF NOT EXISTS pg_trgm"]
    assert "pg_trgm could not be created" in caplog.text


@pytest.mark.django_db
def test_postgresql_has_a_trigram_index_per_searched_column() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("trigram indexes exist on PostgreSQL only")
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'ingest_system' "
                       "AND indexname LIKE 'system_search_%%'")
        found = dict(cursor.fetchall())
    assert set(found) == set(migration.INDEXES)
    for name, column in migration.INDEXES.items():
        assert "gin_trgm_ops" in found[name] and f"upper(({column})::text)" in found[name]
