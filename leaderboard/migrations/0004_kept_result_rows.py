from django.db import migrations

from leaderboard import kept_rows


def create(apps, schema_editor) -> None:
    # PostgreSQL only: elsewhere the list is written by Python and keeps nothing. The writer's functions and
    # triggers hold SQL made by the code, so post_migrate installs them after this (leaderboard.kept_rows).
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE TABLE IF NOT EXISTS {kept_rows.TABLE} "
            "(result_id bigint PRIMARY KEY, shape text NOT NULL, parts text[] NOT NULL, "
            "created_at timestamptz NOT NULL, round_id bigint NOT NULL, organization_id bigint NOT NULL)"
        )


def remove(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        kept_rows.drop(schema_editor.connection)
        schema_editor.execute(f"DROP TABLE IF EXISTS {kept_rows.TABLE}")


class Migration(migrations.Migration):
    """The results list's rows kept written as JSON (leaderboard.kept_rows)."""

    dependencies = [
        ("leaderboard", "0003_catalog_moved"),
        ("ingest", "0018_round_publication_triggers"),
    ]

    operations = [migrations.RunPython(create, remove, elidable=False)]
