import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_organization_auditevent_moved'),
        ('catalog', '0001_initial'),
        ('reviews', '0001_initial'),
    ]

    # The tables stay where they are: only Django's idea of which app owns them changes.
    state_operations = [
        migrations.AlterField(
            model_name='borrowing',
            name='organization',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='borrowings', to='accounts.organization'),
        ),
        migrations.AlterField(
            model_name='borrowing',
            name='round',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='borrowings', to='catalog.round'),
        ),
        migrations.AlterField(
            model_name='comment',
            name='organization',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='accounts.organization'),
        ),
        migrations.AlterField(
            model_name='flag',
            name='raised_by_organization',
            field=models.ForeignKey(blank=True, help_text='Empty when a chair raised it', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='flags_raised', to='accounts.organization'),
        ),
        migrations.AlterField(
            model_name='flag',
            name='round',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='flags', to='catalog.round'),
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
