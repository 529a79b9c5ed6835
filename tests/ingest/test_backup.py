"""A backup restores into an empty database and store with every submission, result, finding, flag and
file: the same scores and the same downloadable logs (issue 14; docs/operating.md)."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from rest_framework.test import APIClient

from core.cache import generation
from ingest.models import Finding, Result, Run, Submission
from reviews.models import Flag
from tests.people import PASSWORD, make_people, open_round, tar_gz_of, token_for

pytestmark = pytest.mark.django_db(transaction=True)


def _upload(demo_tree, tmp_path: Path) -> Submission:
    people = make_people()
    open_round()
    root, manifest = demo_tree
    bundle = tar_gz_of(root / manifest.round("demo-2024a").folder / "Larkspur_Compute")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(people.alice)}")
    handle = io.BytesIO(bundle)
    handle.name = "bundle.tar.gz"
    pk = client.post("/api/v1/submissions/", {"round": "open-v4.0", "bundle": handle}, format="multipart").json()["id"]
    submission = Submission.objects.get(pk=pk)
    result = submission.results.order_by("pk").first()
    Flag.objects.create(round=result.round, result=result, raised_by=people.chair, rule="seed",
                        description="seeds repeat")
    return submission


def _logs(client: Client) -> dict[tuple[int, int], bytes]:
    return {(run.result_id, run.position): client.get(f"/results/{run.result_id}/runs/{run.position}/log").content
            for run in Run.objects.all()}


def _state() -> dict[str, object]:
    return {
        "submissions": sorted(Submission.objects.values_list("pk", "state", "sha256")),
        "scores": sorted(Result.objects.values_list("pk", "score", "verdict", "is_current")),
        "findings": Finding.objects.count(),
        "flags": sorted(Flag.objects.values_list("pk", "result_id", "rule")),
    }


def test_a_backup_restores_everything_into_an_empty_database_and_store(demo_tree, tmp_path,
                                                                       django_capture_on_commit_callbacks) -> None:
    _upload(demo_tree, tmp_path)
    web = Client()
    web.login(username="alice", password=PASSWORD)
    before, logs = _state(), _logs(web)
    assert before["findings"] and before["flags"] and logs and all(logs.values())
    backup = tmp_path / "podium-backup.tar"
    call_command("backup", str(backup), stdout=io.StringIO())
    with tarfile.open(backup) as archive:
        dumped = json.loads(archive.extractfile("database.json").read())
    # alice is signed in (above), but a session key is a bearer credential: the backup holds none.
    assert {row["model"] for row in dumped} >= {"auth.user", "accounts.membership"}
    assert not [row for row in dumped if row["model"] == "accounts.session"]

    call_command("flush", interactive=False, verbosity=0)
    shutil.rmtree(settings.PODIUM_BUNDLE_DIR)
    assert not Submission.objects.exists() and not Path(settings.PODIUM_BUNDLE_DIR).exists()

    out = io.StringIO()
    number = generation()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("restore", str(backup), stdout=out)
    assert out.getvalue().startswith("restored ")
    assert _state() == before
    assert generation() > number  # no answer cached before the restore is served after it
    web = Client()
    assert web.login(username="alice", password=PASSWORD)  # the users and their passwords came back too
    assert _logs(web) == logs


def test_restore_refuses_a_database_with_submissions_and_a_damaged_archive(demo_tree, tmp_path) -> None:
    _upload(demo_tree, tmp_path)
    backup = tmp_path / "podium-backup.tar"
    call_command("backup", str(backup), stdout=io.StringIO())
    with pytest.raises(CommandError, match="holds submissions already"):
        call_command("restore", str(backup))

    call_command("flush", interactive=False, verbosity=0)
    damaged = tmp_path / "damaged.tar"
    with tarfile.open(backup) as source, tarfile.open(damaged, "w") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read()
            if member.name.startswith("bundles/"):
                data = data[:-1] + bytes([data[-1] ^ 1])  # one bit flipped in a stored bundle
            member.size = len(data)
            target.addfile(member, io.BytesIO(data))
    with pytest.raises(CommandError, match="does not match its checksum"):
        call_command("restore", str(damaged))
    assert not Submission.objects.exists()
    not_a_backup = tmp_path / "nothing.tar"
    not_a_backup.write_bytes(b"hello")
    with pytest.raises(CommandError, match="not a Podium backup"):
        call_command("restore", str(not_a_backup))
