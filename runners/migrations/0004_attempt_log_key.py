"""Reproduction logs were stored under absolute paths (<PODIUM_BUNDLE_DIR's parent>/reproductions/<name>);
they are now keys relative to the `bundles` storage's root ("reproductions/<name>"), which a worker on
another host, or a bucket, can resolve. The files themselves stay where they are: the filesystem storage's
root is that same parent folder."""

from pathlib import PurePosixPath

from django.conf import settings
from django.db import migrations


def _root() -> PurePosixPath:
    return PurePosixPath(str(settings.PODIUM_BUNDLE_DIR)).parent


def to_keys(apps, schema_editor):
    Attempt = apps.get_model("runners", "Attempt")
    root = _root()
    for attempt in Attempt.objects.filter(log_path__startswith="/").only("pk", "log_path"):
        path = PurePosixPath(attempt.log_path)
        # Moved since (PODIUM_VAR_DIR changed): the writer always named the file reproductions/<name>.
        key = path.relative_to(root).as_posix() if path.is_relative_to(root) else f"reproductions/{path.name}"
        Attempt.objects.filter(pk=attempt.pk).update(log_path=key)


def to_paths(apps, schema_editor):
    Attempt = apps.get_model("runners", "Attempt")
    root = _root()
    for attempt in Attempt.objects.exclude(log_path="").exclude(log_path__startswith="/").only("pk", "log_path"):
        Attempt.objects.filter(pk=attempt.pk).update(log_path=str(root / attempt.log_path))


class Migration(migrations.Migration):
    dependencies = [
        ("runners", "0003_attempt_judgement"),
    ]

    operations = [
        migrations.RunPython(to_keys, to_paths),
    ]
