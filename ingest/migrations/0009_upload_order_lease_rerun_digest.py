import django.utils.timezone
from django.db import migrations, models


def uploaded_when_created(apps, schema_editor):
    """Existing submissions were uploaded when they were created."""
    submission = apps.get_model("ingest", "Submission")
    submission.objects.update(uploaded_at=models.F("created_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0008_result_state_choices'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='rerun_digest',
            field=models.CharField(blank=True, help_text='sha256 of the log without its hyperparameter lines', max_length=64),
        ),
        migrations.AddField(
            model_name='submission',
            name='lease_expires_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='submission',
            name='uploaded_at',
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.RunPython(uploaded_when_created, migrations.RunPython.noop),
    ]
