import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_organization_auditevent_moved'),
        ('runners', '0001_initial'),
    ]

    # The tables stay where they are: only Django's idea of which app owns them changes.
    state_operations = [
        migrations.AlterField(
            model_name='runner',
            name='organization',
            field=models.ForeignKey(blank=True, help_text="Empty for the site operator's runners", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='runners', to='accounts.organization'),
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
