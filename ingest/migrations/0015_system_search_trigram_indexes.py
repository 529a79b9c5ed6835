import logging

from django.db import DatabaseError, migrations, transaction

log = logging.getLogger(__name__)

# The search (leaderboard.selectors.search) finds systems whose name, slug or accelerator model contains the
# words, case-insensitive: Django writes UPPER(column) LIKE UPPER('%words%'), which no B-tree serves, so
# every system was read (40 ms for 25,000 systems, bench/page_growth.py's 200,000 results). A trigram index
# on each UPPER(column) serves it for words of three characters or more (0.25 ms); shorter words still read
# every system. PostgreSQL only, and only where the pg_trgm extension can be created (a trusted extension
# since PostgreSQL 13: the database's owner may create it): without it the search works as before, slower.
INDEXES = {
    "system_search_name": "name",
    "system_search_slug": "slug",
    "system_search_accelerator": "accelerator_model_name",
}


def create_indexes(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=schema_editor.connection.alias):  # a savepoint: a refusal ends nothing
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except DatabaseError as exc:
        log.warning("pg_trgm could not be created (%s): the search reads every system, without an index", exc)
        return
    for name, column in INDEXES.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON ingest_system "
                              f"USING gin (UPPER({column}::text) gin_trgm_ops)")


def drop_indexes(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):

    dependencies = [
        ("ingest", "0014_result_table_choices"),
    ]

    operations = [
        migrations.RunPython(create_indexes, drop_indexes),
    ]
