import django.db.models.functions.text
from django.db import migrations, models

# The results API's `submitter` filter (leaderboard.filters.ResultFilter.filter_submitter) in the API's default
# order, read from an index and stopped after a page: one organization's results, or one submitter name's.
# Their OR could not be: PostgreSQL joins the two sides in a bitmap, which has no order, and sorted every
# match (an organization with 3,360 of 200,000 results: 8 ms, 2 ms at 20,000). The filter narrows to the
# organization alone when no result outside it carries the name, which is the usual case. PostgreSQL only,
# as migration 0011's orderings (SQLite cannot index NULLS LAST; these are not in Result.Meta).
DEFAULT_ORDER = "round_publication_date DESC NULLS LAST, benchmark_key, score ASC NULLS LAST, id"
INDEXES = {
    "result_api_org_default": f"organization_id, {DEFAULT_ORDER}",
    "result_api_submitter_default": f"UPPER(submitter::text), {DEFAULT_ORDER}",
}


def create_postgres_indexes(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, columns in INDEXES.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON ingest_result ({columns}) WHERE is_current")


def drop_postgres_indexes(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0003_organization_auditevent_tables'),
        ('catalog', '0004_reproduction_sample'),
        ('ingest', '0015_system_search_trigram_indexes'),
    ]

    operations = [
        # The new index first: a name is never without one while this runs.
        migrations.AddIndex(
            model_name='result',
            index=models.Index(django.db.models.functions.text.Upper('submitter'), models.F('organization'),
                               name='result_submitter_org'),
        ),
        migrations.RemoveIndex(
            model_name='result',
            name='result_submitter_upper',
        ),
        migrations.RunPython(create_postgres_indexes, drop_postgres_indexes),
    ]
