"""Backup and restore of everything Podium knows: the database (as Django fixtures, so a backup restores
into any supported database) and the files (the bundle store, the run and reproduction logs, the shipped
implementations), in one tar file with a manifest of counts and checksums. docs/operating.md gives the
procedure; for very large databases it also gives the pg_dump route, which this does not replace.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import transaction

from core.cache import bump_generation
from core.errors import BadRequest, Conflict
from ingest import storage
from ingest.implementations import ARCHIVES
from ingest.storage import sha256_file

# What a backup holds of the database: the apps' own rows and the users and groups they point at.
# Content types, permissions, sessions and the admin's log are rebuilt or do not matter.
APPS = ("auth.user", "auth.group", "catalog", "accounts", "ingest", "reviews", "runners")
# Sessions live in accounts but are not kept: a session key is a bearer credential, which a backup file
# must not carry, and people sign in again after a restore.
EXCLUDED = ("accounts.Session",)
MANIFEST = "manifest.json"
DATABASE = "database.json"


def file_roots() -> dict[str, Path]:
    if not storage.is_local():
        # A bucket is backed up by its own means (versioning, replication): docs/operating.md, "Storage".
        raise Conflict("the bundle store is an S3 bucket: backup and restore here cover only a filesystem "
                       "store; dump the database with pg_dump and copy the bucket with its own tools")
    bundles = Path(settings.PODIUM_BUNDLE_DIR)
    # logs/: the run logs (storage.put_run_log), which an imported result cannot get back from any bundle;
    # implementations/: the code the submissions shipped (ingest.implementations), which runners fetch.
    return {"bundles": bundles, "reproductions": bundles.parent / "reproductions",
            "logs": bundles.parent / storage.RUN_LOGS, "implementations": bundles.parent / ARCHIVES}


def _counts() -> dict[str, int]:
    models = []
    for label in APPS:
        if "." in label:
            models.append(apps.get_model(label))
        else:
            models += [m for m in apps.get_app_config(label).get_models() if m._meta.label not in EXCLUDED]
    return {m._meta.label: m._default_manager.count() for m in models}


def backup_write(target: Path) -> dict[str, Any]:
    """Write the backup to `target` (a .tar file) and return its manifest."""
    roots = file_roots()  # first: refuses a bucket before any work
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / DATABASE
        with transaction.atomic():  # one consistent view of the rows and their counts
            call_command("dumpdata", *APPS, exclude=list(EXCLUDED), natural_foreign=True, indent=None,
                         output=str(dump), verbosity=0)
            counts = _counts()
        files: dict[str, str] = {}
        with tarfile.open(target, "w") as archive:
            archive.add(dump, arcname=DATABASE)
            for name, root in roots.items():
                if not root.is_dir():
                    continue
                for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")):
                    arcname = f"{name}/{path.relative_to(root).as_posix()}"
                    files[arcname] = sha256_file(path)
                    archive.add(path, arcname=arcname)
            manifest = {"format": 1, "counts": counts, "files": files, "database_sha256": sha256_file(dump)}
            data = json.dumps(manifest, indent=1, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return manifest


def backup_restore(source: Path, *, force: bool = False) -> dict[str, Any]:
    """Restore a backup into an empty database and store (after `migrate`). Refuses a database that holds
    submissions unless forced, a damaged archive, and a file whose checksum differs; returns the manifest."""
    file_roots()  # refuses a bucket before reading anything
    if not tarfile.is_tarfile(source):
        raise BadRequest(f"{source} is not a Podium backup (not a tar file)")
    with tarfile.open(source, "r") as archive, tempfile.TemporaryDirectory() as tmp:
        try:
            manifest = json.loads(archive.extractfile(MANIFEST).read())  # type: ignore[union-attr]
        except (KeyError, AttributeError, ValueError):
            raise BadRequest(f"{source} has no readable {MANIFEST}: not a Podium backup") from None
        if not force and apps.get_model("ingest", "Submission").objects.exists():
            raise Conflict("the database holds submissions already: restore into an empty one (or --force)")
        archive.extract(DATABASE, tmp, filter="data")
        dump = Path(tmp) / DATABASE
        if sha256_file(dump) != manifest["database_sha256"]:
            raise BadRequest(f"{DATABASE} in {source} does not match its checksum")
        roots = file_roots()
        for arcname, sha256 in manifest["files"].items():
            name, _, rel = arcname.partition("/")
            if name not in roots or ".." in Path(rel).parts or rel.startswith("/"):
                raise BadRequest(f"{arcname!r} in {source} is not a place Podium keeps files")
            member = archive.extractfile(arcname)
            if member is None:
                raise BadRequest(f"{arcname!r} is listed but missing in {source}")
            target = roots[name] / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as out:
                shutil.copyfileobj(member, out, 1 << 20)
            if sha256_file(target) != sha256:
                target.unlink()
                raise BadRequest(f"{arcname!r} in {source} does not match its checksum")
        with transaction.atomic():
            call_command("loaddata", str(dump), verbosity=0)
            bump_generation()  # on commit: no answer cached before the restore is served after it
        restored = _counts()
        missing = {label: (n, restored.get(label, 0)) for label, n in manifest["counts"].items()
                   if restored.get(label, 0) < n}
        if missing:
            raise Conflict(f"rows missing after the restore: {missing}")
    return manifest
