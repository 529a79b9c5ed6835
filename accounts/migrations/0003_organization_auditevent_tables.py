from django.db import migrations


class Migration(migrations.Migration):
    """The moved tables take the accounts app's name; foreign keys follow the rename."""

    dependencies = [
        ("accounts", "0002_organization_auditevent_moved"),
        ("ingest", "0007_catalog_and_organizations_moved"),
    ]

    operations = [
        migrations.AlterModelTable(name="organization", table=None),
        migrations.AlterModelTable(name="auditevent", table=None),
        migrations.RenameIndex(model_name="auditevent", new_name="accounts_au_subject_2d2c8f_idx",
                               old_name="ingest_audi_subject_0b9a4b_idx"),
    ]
