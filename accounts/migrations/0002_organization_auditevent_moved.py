import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from catalog.migration_helpers import move_content_types


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        ('ingest', '0006_result_reproduction'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # The tables stay where they are: only Django's idea of which app owns them changes.
    state_operations = [
        migrations.CreateModel(
            name='Organization',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=120, unique=True)),
                ('slug', models.SlugField(max_length=120, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['name'],
                'db_table': 'ingest_organization',
            },
        ),
        migrations.AlterField(
            model_name='invitation',
            name='organization',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='accounts.organization'),
        ),
        migrations.AlterField(
            model_name='membership',
            name='organization',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='accounts.organization'),
        ),
        migrations.CreateModel(
            name='AuditEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('actor_label', models.CharField(help_text='User name or the command that acted', max_length=120)),
                ('action', models.CharField(max_length=60)),
                ('subject_type', models.CharField(max_length=40)),
                ('subject_id', models.PositiveBigIntegerField()),
                ('before', models.JSONField(blank=True, default=dict)),
                ('after', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'db_table': 'ingest_auditevent',
                'indexes': [models.Index(fields=['subject_type', 'subject_id'], name='ingest_audi_subject_0b9a4b_idx')],
            },
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
        migrations.RunPython(move_content_types("ingest", "accounts", ["organization", "auditevent"]),
                             move_content_types("accounts", "ingest", ["organization", "auditevent"])),
    ]
