
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0007_catalog_and_organizations_moved'),
    ]

    operations = [
        migrations.AlterField(
            model_name='result',
            name='rcp_status',
            field=models.CharField(choices=[('not_applicable', 'RCP check not applicable'), ('pass', 'passes the RCP check'), ('fail', 'fails the RCP check'), ('tool_error', 'the RCP checker could not judge it')], default='not_applicable', max_length=16),
        ),
        migrations.AlterField(
            model_name='result',
            name='reproduction',
            field=models.CharField(blank=True, choices=[('', 'not reproduced'), ('reproduced', 'Reproduced'), ('mismatch', 'Mismatch'), ('failed', 'Failed')], help_text='Verdict of the newest judged reproduction: reproduced, mismatch, failed', max_length=12),
        ),
    ]
