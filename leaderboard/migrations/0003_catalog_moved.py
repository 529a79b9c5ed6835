from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0007_catalog_and_organizations_moved'),
        ('leaderboard', '0002_round_chairs_round_closes_at'),
        ('reviews', '0002_catalog_and_organizations_moved'),
    ]

    # The tables stay where they are: only Django's idea of which app owns them changes.
    state_operations = [
        migrations.RemoveField(
            model_name='round',
            name='chairs',
        ),
        migrations.DeleteModel(
            name='Benchmark',
        ),
        migrations.DeleteModel(
            name='Round',
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
