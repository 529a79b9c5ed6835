"""Bundles and reproduction logs in an S3-compatible bucket, over real HTTP: moto's standalone server
(installed with the dev extra) runs on 127.0.0.1, so these tests need no outside service and run everywhere."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from django.test import Client

from ingest import storage
from ingest.models import Submission
from runners import services
from runners.models import Attempt, ReproductionJob
from tests.ingest.test_uploads import acme_bundle, api, upload  # noqa: F401  (acme_bundle: a fixture)
from tests.people import PASSWORD
from tests.runners.test_agent_api import CPU, _agent, _claim, _result
from tests.runners.test_judging import _finish, _log, operator  # noqa: F401  (operator: a fixture)

pytestmark = pytest.mark.django_db

KEY, SECRET = "podium-test", "podium-test-secret"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # generous: only a server that never starts fails here
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def bucket(s3_endpoint: str, settings):
    """A fresh bucket of its own, and the `bundles` storage pointed at it (changing STORAGES resets Django's
    cache of storage instances)."""
    name = f"podium-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                          region_name="us-east-1")
    client.create_bucket(Bucket=name)
    settings.STORAGES = {**settings.STORAGES, "bundles": {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {"bucket_name": name, "endpoint_url": s3_endpoint, "access_key": KEY, "secret_key": SECRET,
                    "region_name": "us-east-1", "file_overwrite": True, "default_acl": None},
    }}
    assert not storage.is_local()
    return client, name


def _keys(bucket) -> set[str]:
    client, name = bucket
    return {item["Key"] for item in client.list_objects_v2(Bucket=name).get("Contents", [])}


def _files_under(folder: Path) -> list[Path]:
    """Stored files under folder. The scratch folder holds per-machine working files (the results
    cache's generation stamp among them), never something a second web machine would need."""
    if not folder.exists():
        return []
    return [p for p in folder.rglob("*") if p.is_file() and "scratch" not in p.relative_to(folder).parts]


def test_an_upload_is_stored_in_the_bucket_verified_and_its_run_log_served(
        people, round_open, acme_bundle, bucket, settings, django_capture_on_commit_callbacks) -> None:  # noqa: F811
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(api(people.alice), acme_bundle)
    assert response.status_code == 201, response.content
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.state == Submission.State.VERIFIED
    assert submission.bundle_path == f"{submission.sha256[:2]}/{submission.sha256}.tar.gz"
    runs = submission.results.first().runs.all()
    # The bundle, and every run log under its content address (storage.put_run_log).
    assert _keys(bucket) == {f"bundles/{submission.bundle_path}", *(storage.run_log_key(r.sha256) for r in runs)}
    assert _files_under(Path(settings.PODIUM_BUNDLE_DIR)) == []

    owner = Client()
    owner.login(username="alice", password=PASSWORD)
    log = owner.get(f"/results/{submission.results.first().pk}/runs/0/log")
    assert log.status_code == 200 and b":::MLLOG" in log.content


def test_verification_fetches_the_bundle_from_the_bucket_not_from_the_web_s_folder(
        people, round_open, acme_bundle, bucket, settings, tmp_path,  # noqa: F811
        django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=False) as queued:
        submission_id = upload(api(people.alice), acme_bundle).json()["id"]
    # The worker's host: none of the web's folders, a scratch folder of its own.
    shutil.rmtree(Path(settings.PODIUM_BUNDLE_DIR).parent)
    settings.PODIUM_BUNDLE_DIR = tmp_path / "worker-has-no-such-folder" / "bundles"
    settings.PODIUM_SCRATCH_DIR = tmp_path / "worker-scratch"
    for callback in queued:
        callback()
    assert Submission.objects.get(pk=submission_id).state == Submission.State.VERIFIED
    assert not (tmp_path / "worker-has-no-such-folder").exists()


def test_a_bundle_changed_in_the_bucket_is_refused_on_read(people, round_open, acme_bundle, bucket,  # noqa: F811
                                                            django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        submission_id = upload(api(people.alice), acme_bundle).json()["id"]
    submission = Submission.objects.get(pk=submission_id)
    client, name = bucket
    client.put_object(Bucket=name, Key=f"bundles/{submission.bundle_path}", Body=b"not the bundle")
    with pytest.raises(storage.StorageError, match="does not match its checksum"), \
            storage.open_verified(submission.bundle_path, submission.sha256):
        pass


def test_a_reproduction_log_is_stored_under_a_relative_key_and_judged_from_the_bucket(
        operator, bucket, settings) -> None:  # noqa: F811
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    client, _ = _agent(operator)
    answer = _finish(client, _claim(client, CPU), _log(seed=3))
    # Judged, so read back from the bucket: the log's content decides the reason.
    assert answer["judgement"] == "judged" and "it logs seed [3], the job asked for 1" in answer["reason"]
    attempt = Attempt.objects.get(job=job)
    assert attempt.log_path.startswith("reproductions/job") and attempt.log_path in _keys(bucket)
    assert _files_under(Path(settings.PODIUM_BUNDLE_DIR).parent) == []


def test_backup_refuses_and_the_litter_sweep_skips_a_bucket(bucket, tmp_path) -> None:
    from core.errors import Conflict
    from ingest.backup import backup_write
    from ingest.cleanup import store_sweep

    with pytest.raises(Conflict, match="S3 bucket"):
        backup_write(tmp_path / "backup.tar")
    assert not (tmp_path / "backup.tar").exists()
    assert store_sweep(cutoff=time.time()) == ([], [])
