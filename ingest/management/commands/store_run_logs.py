"""python manage.py store_run_logs: keep the run logs of submissions verified before Podium kept them.

Every run log is stored content-addressed when its submission is verified (ingest.storage.put_run_log);
this backfills the logs of uploads verified earlier, from their stored bundles. It stores only what is
missing, so running it twice stores nothing the second time. Imported results have no stored bundle:
importing their tree again (`import_results DIR`) keeps their logs, and this command says how many lack one.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest import storage
from ingest.bundles import BundleRejected, extract_bundle
from ingest.engine.tree import items_of
from ingest.models import Run, Submission
from ingest.services.submissions import upload_limits


class Command(BaseCommand):
    help = "Store the run logs of uploaded submissions that were verified before run logs were kept."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="only say what is missing")

    def handle(self, *args: Any, **options: Any) -> None:
        missing: dict[int, set[str]] = {}  # submission id -> sha256 of its runs' logs not stored
        imported = 0
        present: set[str] = set()
        rows = Run.objects.values_list("result__submission_id", "result__submission__source", "sha256").distinct()
        for submission_id, source, sha256 in rows.iterator():
            if sha256 in present:
                continue
            if storage.has_run_log(sha256):
                present.add(sha256)
            elif source == Submission.Source.UPLOAD:
                missing.setdefault(submission_id, set()).add(sha256)
            else:
                imported += 1
        stored, failed = 0, []
        for submission in Submission.objects.filter(pk__in=missing).order_by("pk"):
            wanted = missing[submission.pk] - present
            if options["dry_run"] or not wanted:
                continue
            try:
                found = _store_from_bundle(submission, wanted)
            except (OSError, BundleRejected) as exc:  # StorageError is an OSError
                failed.append(f"submission #{submission.pk}: {type(exc).__name__}: {exc}")
                continue
            present |= found
            stored += len(found)
            if found != wanted:
                failed.append(f"submission #{submission.pk}: {len(wanted - found)} log(s) not in its bundle")
        lacking = sum(len(shas) for shas in missing.values())
        self.stdout.write(
            (f"{lacking} run log(s) of {len(missing)} upload(s) missing (dry run, nothing stored)"
             if options["dry_run"] else f"stored {stored} run log(s) from {len(missing)} upload(s)")
            + f"; {len(present)} already stored"
            + (f"; {imported} run(s) of imported results lack their log: import their tree again" if imported else "")
        )
        for line in failed:
            self.stderr.write(line)
        if failed:
            raise CommandError(f"{len(failed)} submission(s) could not be backfilled; see above")


def _store_from_bundle(submission: Submission, wanted: set[str]) -> set[str]:
    """Unpack the submission's stored bundle (checked against its sha256) and store the wanted logs."""
    found: set[str] = set()
    with tempfile.TemporaryDirectory(dir=storage.scratch_dir(), prefix="podium-backfill-") as tmp:
        dest = Path(tmp) / submission.organization.slug
        with storage.open_verified(submission.bundle_path, submission.sha256) as bundle:
            folder = extract_bundle(bundle, dest, limits=upload_limits())
        for source in items_of(folder):
            for path in source.result_files:
                data = path.read_bytes()
                sha256 = hashlib.sha256(data).hexdigest()
                if sha256 in wanted and sha256 not in found:
                    storage.put_run_log(data, sha256)
                    found.add(sha256)
    return found
