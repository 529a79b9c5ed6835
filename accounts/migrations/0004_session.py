import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

# The backend a session names, which Django's get_user must find in AUTHENTICATION_BACKENDS.
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
SESSION_BACKEND = "accounts.sessions.SessionUserBackend"
BATCH = 2000


def _move(apps, source, target, backends):
    """Every unexpired session from one table to the other, its backend renamed (so nobody is signed out
    by the move), the user's id copied into the new table's column; then the old rows go."""
    # Django's store signs with a salt named after the store class ("...SessionStore"), which
    # accounts.sessions.SessionStore shares: one codec reads and writes both tables.
    from django.contrib.sessions.backends.db import SessionStore

    codec = SessionStore()
    old, new = apps.get_model(*source), apps.get_model(*target)
    users = set(apps.get_model(settings.AUTH_USER_MODEL).objects.values_list("pk", flat=True))
    with_user = any(field.name == "user" for field in new._meta.get_fields())
    batch = []
    for row in old.objects.filter(expire_date__gt=timezone.now()).iterator(chunk_size=BATCH):
        data = codec.decode(row.session_data)  # {} for data signed with another key: nobody's session
        if not data:
            continue
        if data.get("_auth_user_backend") == backends[0]:
            data["_auth_user_backend"] = backends[1]
        copy = new(session_key=row.session_key, session_data=codec.encode(data), expire_date=row.expire_date)
        if with_user:
            user_id = data.get("_auth_user_id")
            copy.user_id = int(user_id) if isinstance(user_id, str) and user_id.isdigit() and int(user_id) in users \
                else None
        batch.append(copy)
        if len(batch) >= BATCH:
            new.objects.bulk_create(batch, ignore_conflicts=True)
            batch = []
    new.objects.bulk_create(batch, ignore_conflicts=True)
    old.objects.all().delete()


def forwards(apps, schema_editor):
    _move(apps, ("sessions", "Session"), ("accounts", "Session"), (MODEL_BACKEND, SESSION_BACKEND))


def backwards(apps, schema_editor):
    _move(apps, ("accounts", "Session"), ("sessions", "Session"), (SESSION_BACKEND, MODEL_BACKEND))


class Migration(migrations.Migration):
    """Sessions move to accounts.Session, which keeps the signed-in user's id beside the signed data
    (accounts.sessions: the session, its user and their memberships in one statement)."""

    dependencies = [
        ('accounts', '0003_organization_auditevent_tables'),
        ('sessions', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Session',
            fields=[
                ('session_key', models.CharField(max_length=40, primary_key=True, serialize=False, verbose_name='session key')),
                ('session_data', models.TextField(verbose_name='session data')),
                ('expire_date', models.DateTimeField(db_index=True, verbose_name='expire date')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, db_constraint=False, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'session',
                'verbose_name_plural': 'sessions',
                'abstract': False,
            },
        ),
        migrations.RunPython(forwards, backwards),
    ]
