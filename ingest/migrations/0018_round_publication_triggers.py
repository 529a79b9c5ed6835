from django.db import migrations

from ingest import publication


def install(apps, schema_editor) -> None:
    publication.install_triggers(schema_editor)


def drop(apps, schema_editor) -> None:
    publication.drop_triggers(schema_editor)


class Migration(migrations.Migration):
    """Result.round_publication_date kept by the database (ingest.publication): the embargo reads it."""

    dependencies = [
        ("catalog", "0004_reproduction_sample"),
        ("ingest", "0017_values_row_inserts"),
    ]

    operations = [migrations.RunPython(install, drop, elidable=False)]
