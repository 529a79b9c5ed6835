import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from catalog.migration_helpers import move_content_types


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('leaderboard', '0002_round_chairs_round_closes_at'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # The tables stay where they are: only Django's idea of which app owns them changes.
    state_operations = [
        migrations.CreateModel(
            name='Round',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.CharField(max_length=64, unique=True, validators=[django.core.validators.RegexValidator('^[a-z0-9][a-z0-9.-]*$', 'Use lowercase letters, digits, dots and hyphens, e.g. training-v4.0.')])),
                ('name', models.CharField(max_length=120)),
                ('usage', models.CharField(default='training', max_length=16)),
                ('ruleset', models.CharField(help_text='mlperf-logging ruleset, e.g. 4.0.0', max_length=16)),
                ('submission_deadline', models.DateTimeField(blank=True, null=True)),
                ('review_start', models.DateTimeField(blank=True, null=True)),
                ('review_end', models.DateTimeField(blank=True, null=True)),
                ('publication_date', models.DateTimeField(blank=True, null=True)),
                ('closes_at', models.DateTimeField(blank=True, help_text='After this the round is closed to changes', null=True)),
                ('source', models.TextField(blank=True, help_text="Where the round's facts come from")),
                ('is_demo', models.BooleanField(default=False)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('chairs', models.ManyToManyField(blank=True, related_name='chaired_rounds', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-publication_date', '-ruleset', 'slug'],
                'db_table': 'leaderboard_round',
            },
        ),
        migrations.CreateModel(
            name='Benchmark',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(help_text='mlperf-logging name, e.g. resnet', max_length=40)),
                ('name', models.CharField(max_length=80)),
                ('area', models.CharField(blank=True, max_length=60)),
                ('task', models.CharField(blank=True, max_length=120)),
                ('model', models.CharField(blank=True, max_length=120)),
                ('dataset', models.CharField(blank=True, max_length=120)),
                ('quality_metric', models.CharField(blank=True, max_length=120)),
                ('quality_target', models.FloatField(blank=True, null=True)),
                ('target_direction', models.CharField(choices=[('higher', 'higher is better'), ('lower', 'lower is better')], default='higher', max_length=8)),
                ('target_text', models.CharField(blank=True, max_length=200)),
                ('required_runs', models.PositiveSmallIntegerField()),
                ('olympic_k', models.PositiveSmallIntegerField(default=1)),
                ('modifiable_hyperparameters', models.JSONField(blank=True, default=list)),
                ('source', models.TextField(blank=True)),
                ('position', models.PositiveSmallIntegerField(default=0)),
                ('round', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='benchmarks', to='catalog.round')),
            ],
            options={
                'ordering': ['round', 'position', 'key'],
                'db_table': 'leaderboard_benchmark',
                'constraints': [models.UniqueConstraint(fields=('round', 'key'), name='benchmark_unique_per_round')],
            },
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
        migrations.RunPython(move_content_types("leaderboard", "catalog", ["round", "benchmark"]),
                             move_content_types("catalog", "leaderboard", ["round", "benchmark"])),
    ]
