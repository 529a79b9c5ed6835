"""Implementations a submission ships: packed and stored by content while its bundle is verified,
recorded with the submission's results, tied to them by `config_<system>.sh`, read back for browsing
and for the runners that reproduce them.

`implementations_pack` runs where the bundle is extracted (no database writes: the verification's
`_judge`, the importer's tree); `implementations_record` writes the rows in the transaction that stores
the results. `implementation_for(result)` is the one selector the result page and the runners use.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage
from django.db import transaction

from accounts.services import audit_record
from catalog.models import Round
from core.cache import bump_generation
from ingest import storage
from ingest.bundles.implementations import BENCHMARKS, IMPLEMENTATIONS, ImplementationLimits, scan_implementations
from ingest.bundles.implementations import pack as pack_tree
from ingest.models import Finding, Implementation, Result, Submission

ARCHIVES = "implementations"  # their folder in the bundle store, beside the bundles and the logs
MISSING_RULE = "implementation"
MAX_SHOWN_BYTES = 512 * 1024  # a file shown on a page; larger ones are cut, with a note


@dataclass(frozen=True)
class Packed:
    """An implementation stored in the bundle store, ready to be recorded with its submission."""

    benchmark: str
    name: str
    path: str
    digest: str
    archive_key: str
    archive_sha256: str
    archive_bytes: int
    files: list[dict[str, Any]]
    systems: list[str]


def archive_key(sha256: str) -> str:
    return f"{ARCHIVES}/{sha256[:2]}/{sha256}.tar.gz"


def _put_archive(data: bytes, sha256: str) -> str:
    """Once per content: the same implementation shipped again is the same object."""
    backend = storage.bundle_storage()
    key = archive_key(sha256)
    if backend.exists(key):
        # A process killed while saving leaves a partial file under the name: kept only if it is whole.
        if storage._sha256_stored(backend, key) == sha256:
            if isinstance(backend, FileSystemStorage):
                # Young again: the litter sweep (ingest.cleanup) takes an old archive no row names, and the
                # row that names this one commits only after the verification that packed it.
                os.utime(backend.path(key))
            return key
        backend.delete(key)
    saved = backend.save(key, ContentFile(data))
    if saved != key:
        raise storage.StorageError(f"the storage stored {key} as {saved}: it must keep the names it is given")
    return key


def implementations_pack(folder: Path, *, problems: list[str] | None = None) -> list[Packed]:
    """Screen, pack and store the implementations under `folder/benchmarks/`. Problems (which an upload
    refused already; an import skips) are appended to `problems` when given."""
    trees, found_problems = scan_implementations(folder, ImplementationLimits())
    if problems is not None:
        problems.extend(found_problems)
    packed = []
    for tree in trees:
        data = pack_tree(tree)
        sha256 = hashlib.sha256(data).hexdigest()
        packed.append(Packed(
            benchmark=tree.benchmark, name=tree.name, path=tree.rel, digest=tree.digest,
            archive_key=_put_archive(data, sha256), archive_sha256=sha256, archive_bytes=len(data),
            files=[{"path": f.path, "size": f.size, "sha256": f.sha256} for f in tree.files], systems=tree.systems))
    return packed


@transaction.atomic(savepoint=False)  # in an upload's verdict: see ingest.services.results.submission_finish
def implementations_record(*, submission: Submission, packed: list[Packed], actor: User | str) -> list[Implementation]:
    """The submission's implementations as rows; one already recorded (a retried verification) is kept."""
    recorded = []
    for item in packed:
        implementation, created = Implementation.objects.get_or_create(
            submission=submission, benchmark_key=item.benchmark, name=item.name,
            defaults={"organization_id": submission.organization_id, "round_id": submission.round_id,
                      "path": item.path, "digest": item.digest, "archive_key": item.archive_key,
                      "archive_sha256": item.archive_sha256, "archive_bytes": item.archive_bytes,
                      "files": item.files, "systems": item.systems})
        if created:
            audit_record(actor=actor, action="implementation.create", subject=implementation,
                         after={"path": item.path, "digest": item.digest, "systems": item.systems,
                                "files": len(item.files)})
            bump_generation(round_id=submission.round_id)  # a result page links its code
        recorded.append(implementation)
    return recorded


def implementations_required(round_: Round) -> bool:
    """Whether the round requires each result's code: a round that spot-checks a sample of its results
    (`reproduction_sample_size`, runners/sampling.py) must be able to run any of them again."""
    return round_.reproduction_sample_size > 0


@transaction.atomic(savepoint=False)  # in an upload's verdict: see ingest.services.results.submission_finish
def implementation_findings_store(*, submission: Submission) -> list[Finding]:
    """A warning on each result of the submission that no implementation ties to its system, where its
    round requires one: stored beside the engine's findings once the results and the implementations are
    (the verification's store, the importer's). Warned, not refused: reviewers and chairs judge a missing
    folder, as MLCommons does, and the score stands. Once per result: a repeat adds nothing."""
    if not implementations_required(submission.round):
        return []
    stored = []
    for result in submission.results.select_related("organization").order_by("pk"):
        if implementation_for(result) is not None or result.findings.filter(checker="layout",
                                                                            rule=MISSING_RULE).exists():
            continue
        folder = f"{_org_folder(result)}/{BENCHMARKS}/{result.benchmark_key}/{IMPLEMENTATIONS}"
        stored.append(Finding.objects.create(
            submission=submission, result=result, severity=Finding.Severity.WARNING, checker="layout",
            rule=MISSING_RULE, file=folder[:500],
            message=(f"no implementation of {result.benchmark_key} with a config_{result.system_slug}.sh: this "
                     f"round reproduces a sample of its results, and a result is run again from the code it "
                     f"ships, {folder}/<implementation>/ with run_and_time.sh and config_<system>.sh"),
        ))
    if stored:
        # The findings API shows them: an import run again that adds only these finishes its submission
        # unchanged (no bump there), so they would wait for the next change to be seen.
        bump_generation(round_id=submission.round_id)
    return stored


def _org_folder(result: Result) -> str:
    """The submitter folder as the result's other findings name it (its runs' files), else the slug."""
    first = result.runs.order_by("position").values_list("file", flat=True).first() or ""
    folder, sep, rest = first.partition("/")
    return folder if sep and rest.startswith("results/") else result.organization.slug


# --- reading -------------------------------------------------------------------------------------------

def implementation_for(result: Result) -> Implementation | None:
    """The implementation that produced `result`: shipped with its submission (or, for an import that left
    the code unchanged, the organization's newest in the round) for its benchmark, with a
    `config_<system>.sh` for its system, as MLCommons ties them."""
    candidates = Implementation.objects.filter(round_id=result.round_id, organization_id=result.organization_id,
                                               benchmark_key=result.benchmark_key)
    matching = [impl for impl in candidates.order_by("-submission__uploaded_at", "-pk")
                if result.system_slug in impl.systems]
    own = [impl for impl in matching if impl.submission_id == result.submission_id]
    chosen = own or matching
    return chosen[0] if chosen else None


def implementation_results(implementation: Implementation) -> list[Result]:
    """The current results it is the implementation of."""
    results = Result.objects.filter(round_id=implementation.round_id, organization_id=implementation.organization_id,
                                    benchmark_key=implementation.benchmark_key, system_slug__in=implementation.systems)
    return [r for r in results.current().order_by("system_slug")
            if (found := implementation_for(r)) is not None and found.pk == implementation.pk]


@contextmanager
def implementation_archive(implementation: Implementation) -> Iterator[Path]:
    """A local, checked copy of the implementation's .tar.gz."""
    with storage.fetched(implementation.archive_key, implementation.archive_sha256) as path:
        yield path


def implementation_file(implementation: Implementation, path: str) -> tuple[bytes, bool] | None:
    """(the first MAX_SHOWN_BYTES of one of its files, whether it was cut), or None for a path it lacks."""
    listed = {f["path"]: f for f in implementation.files}
    if path not in listed:
        return None  # only names the scan listed: nothing the caller spells reaches the archive
    with implementation_archive(implementation) as archive, tarfile.open(archive, mode="r:gz") as tar:
        member = tar.getmember(path)
        stream = tar.extractfile(member)
        if stream is None:
            return None
        data = stream.read(MAX_SHOWN_BYTES + 1)
    return data[:MAX_SHOWN_BYTES], len(data) > MAX_SHOWN_BYTES


def is_text(data: bytes) -> bool:
    """Shown as text: no NUL byte, and UTF-8 (a character cut at the end of a shortened file is allowed)."""
    if b"\x00" in data:
        return False
    for cut in range(4):
        try:
            data[:len(data) - cut].decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False
