import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_organization_auditevent_moved'),
        ('catalog', '0001_initial'),
        ('ingest', '0006_result_reproduction'),
        ('reviews', '0002_catalog_and_organizations_moved'),
        ('runners', '0002_organization_moved'),
    ]

    # The tables stay where they are: only Django's idea of which app owns them changes.
    state_operations = [
        migrations.AlterField(
            model_name='submission',
            name='organization',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='submissions', to='accounts.organization'),
        ),
        migrations.AlterField(
            model_name='system',
            name='organization',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='systems', to='accounts.organization'),
        ),
        migrations.AlterField(
            model_name='result',
            name='organization',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='results', to='accounts.organization'),
        ),
        migrations.AlterField(
            model_name='result',
            name='benchmark',
            field=models.ForeignKey(blank=True, help_text='Null when the folder names no benchmark of the round', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='results', to='catalog.benchmark'),
        ),
        migrations.AlterField(
            model_name='result',
            name='round',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='results', to='catalog.round'),
        ),
        migrations.AlterField(
            model_name='submission',
            name='round',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='submissions', to='catalog.round'),
        ),
        migrations.AlterField(
            model_name='system',
            name='round',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='systems', to='catalog.round'),
        ),
        migrations.DeleteModel(
            name='AuditEvent',
        ),
        migrations.DeleteModel(
            name='Organization',
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
