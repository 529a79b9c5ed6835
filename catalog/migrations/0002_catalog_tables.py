from django.db import migrations


class Migration(migrations.Migration):
    """The tables take the catalog's name; foreign keys and the chairs table follow the rename."""

    dependencies = [
        ("catalog", "0001_initial"),
        ("leaderboard", "0003_catalog_moved"),
    ]

    operations = [
        migrations.AlterModelTable(name="round", table=None),
        migrations.AlterModelTable(name="benchmark", table=None),
    ]
