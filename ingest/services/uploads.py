"""An upload as the web page, the API and the CLI hand it in: where it goes (round, organization) and
what it is (a bundle, or a system JSON with result files), turned into one submission_upload call."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db.models import QuerySet

from accounts.access import UPLOAD_ROLES
from accounts.models import Organization
from accounts.viewer import viewer_of
from catalog.models import Round
from core import compiled
from ingest import storage
from ingest.bundles import LooseFile
from ingest.services.submissions import UploadOutcome, UploadRefused, submission_upload, submission_upload_files


@dataclass(frozen=True)
class UploadRequest:
    round: str
    organization: str = ""
    bundle: UploadedFile | None = None
    system: UploadedFile | None = None
    results: tuple[UploadedFile, ...] = ()
    benchmark: str | None = None
    make_current: bool = False


@contextlib.contextmanager
def saved_upload(upload: UploadedFile) -> Iterator[Path]:
    """The uploaded file as a file on disk while the block runs. A large upload is the temporary file Django
    streamed it to (FILE_UPLOAD_MAX_MEMORY_SIZE), not copied again: a 1 GiB bundle's copy took seconds of its
    request. A small one, held in memory, is written once into the scratch folder, in chunks, and removed
    after the block (a file of its own there, not a folder made for it: each folder made and removed is two
    more writes to the disk's metadata on the way to the verdict)."""
    temporary = getattr(upload, "temporary_file_path", None)
    if temporary is not None:
        yield Path(temporary())
        return
    with tempfile.NamedTemporaryFile(dir=storage.scratch_dir(), prefix="podium-upload-", suffix=".bin") as out:
        for chunk in upload.chunks():
            out.write(chunk)
        out.flush()
        yield Path(out.name)


def upload_target(*, actor: User, round_slug: str, organization_slug: str = ""
                  ) -> tuple[Round, Organization]:
    """The round and the organization an upload is for; the organization may be left out by someone who
    submits for exactly one."""
    round_ = _one("ingest.uploads.round", lambda: Round.objects.filter(slug=_SLUG).order_by(), round_slug)
    if round_ is None:
        raise UploadRefused(f"No round {round_slug!r}.")
    # The organizations the actor may upload for (accounts.access.organizations_of's), known from the viewer.
    choices = viewer_of(actor).organization_ids(UPLOAD_ROLES)
    if organization_slug:
        organization = _one("ingest.uploads.organization", lambda: Organization.objects.filter(slug=_SLUG).order_by(),
                            organization_slug)
        if organization is None or organization.pk not in choices:
            raise UploadRefused("You may not submit for this organization (or it does not exist).")
        return round_, organization
    only = _one("ingest.uploads.only_organization", lambda: Organization.objects.filter(pk=_ID).order_by(),
                next(iter(choices))) if len(choices) == 1 else None
    if only is None:
        raise UploadRefused("You may not submit for any organization." if not choices else
                            "You submit for several organizations: name one.")
    return round_, only


# Every upload reads its round and organization first, on the way to its verdict: through the ORM the two reads cost
# ~1.0 ms of the web server's CPU (bench/upload_latency.py), built once per process (core.compiled) a fraction.
_SLUG = compiled.texts(1)[0]
_ID = compiled.ids(1)[0]


def _one(name: str, build: Callable[[], QuerySet[Any]], value: str | int) -> Any:
    found = compiled.objects(name, build, {_ID if isinstance(value, int) else _SLUG: value}, prepare=True)
    return found[0] if found else None


def upload_receive(*, actor: User, upload: UploadRequest) -> UploadOutcome:
    if upload.bundle is not None and (upload.system is not None or upload.results):
        raise UploadRefused("Send either a bundle or a system JSON with result files, not both.")
    if upload.bundle is None and not (upload.system is not None and upload.results):
        raise UploadRefused("Send a bundle (.tar.gz or .zip), or a system JSON and at least one result file.")
    round_, organization = upload_target(actor=actor, round_slug=upload.round,
                                         organization_slug=upload.organization)
    if upload.bundle is not None:
        with saved_upload(upload.bundle) as path:
            return submission_upload(actor=actor, organization=organization, round=round_, archive=path,
                                     original_name=upload.bundle.name or "upload", make_current=upload.make_current)
    assert upload.system is not None
    return submission_upload_files(
        actor=actor, organization=organization, round=round_,
        system_json=LooseFile(name=upload.system.name or "system.json", data=upload.system.read()),
        result_files=[LooseFile(name=f.name or "result.txt", data=f.read()) for f in upload.results],
        benchmark=upload.benchmark, make_current=upload.make_current,
    )
