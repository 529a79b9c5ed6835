from django.db import migrations

# The round charts (leaderboard.chart_views) read one benchmark of one division of one round, ranked by
# score, and only the few columns a chart point and the embargo rule need. Covering them lets
# PostgreSQL answer with an index-only scan of that benchmark's entries instead of filtering every
# result of the round (20,000 in bench/browse.py's larger round: 20 ms against 1 ms). PostgreSQL only,
# like 0011's orderings: SQLite has no INCLUDE, and its small databases do not need it.
NAME = "result_chart_points"
COLUMNS = "round_id, benchmark_key, division, score, id"
INCLUDED = ("organization_id, verdict, runs_cv, accelerator_count, host_count, submitter, system_name, system_slug, "
            "accelerator_model, category")


def create_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {NAME} ON ingest_result ({COLUMNS}) INCLUDE ({INCLUDED}) "
                          "WHERE is_current AND withdrawn_at IS NULL")


def drop_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {NAME}")


class Migration(migrations.Migration):

    dependencies = [
        ("ingest", "0011_result_browse_indexes"),
    ]

    operations = [
        migrations.RunPython(create_index, drop_index),
    ]
