"""Uploading over the API and the web page, asynchronous verification, versions, faults, the sweeper."""

from __future__ import annotations

import datetime
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from django.core import mail
from django.db import OperationalError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import AuditEvent
from ingest.models import Result, Submission
from ingest.services import submissions
from tests.people import PASSWORD, set_phase, tar_gz_of, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme_bundle(demo_tree, tmp_path) -> bytes:
    """One clean item (resnet on one system): enough for most tests, quick to verify."""
    root, manifest = demo_tree
    source = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    folder = tmp_path / "bundle" / "Larkspur_Compute"
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(source / "systems/atlas_lx4_n1.json", folder / "systems/atlas_lx4_n1.json")
    shutil.copytree(source / "results/atlas_lx4_n1/resnet", folder / "results/atlas_lx4_n1/resnet")
    return tar_gz_of(folder)


@pytest.fixture
def full_bundle(demo_tree) -> bytes:
    """A whole demo submitter folder: 7 items on two systems, one run broken on purpose."""
    root, manifest = demo_tree
    return tar_gz_of(root / manifest.round("demo-2024a").folder / "Larkspur_Compute")


def api(user=None, scope: str = "submit") -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user, scope)}")
    return client


def upload(client: APIClient, data: bytes, round_slug: str = "open-v4.0", name: str = "bundle.tar.gz", **extra):
    return client.post("/api/v1/submissions/", {"round": round_slug, "bundle": _file(data, name), **extra},
                       format="multipart")


def _file(data: bytes, name: str) -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = name
    return handle


def test_upload_is_stored_then_verified_after_commit(people, round_open, full_bundle,
                                                     django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = upload(api(people.alice), full_bundle)
    assert response.status_code == 201, response.content
    # The task was queued once, and only once the upload committed.
    queued = [cb for cb in callbacks if cb.__qualname__.startswith("submission_upload.")]
    assert len(queued) == 1
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.state == Submission.State.VERIFIED
    assert submission.uploaded_by == people.alice and submission.organization == people.acme
    assert (Path(submission.bundle_path).name).startswith(submission.sha256)
    assert submission.results.count() == 7
    assert all(r.score is not None for r in submission.results.all())
    status = api(people.alice).get(f"/api/v1/submissions/{submission.pk}/").json()
    assert status["state"] == "verified" and status["queue_position"] is None
    assert {r["benchmark"] for r in status["results"]} == {"resnet", "ssd", "bert", "llama2_70b_lora"}
    actions = list(AuditEvent.objects.filter(subject_type="submission", subject_id=submission.pk)
                   .values_list("action", flat=True))
    assert {"submission.create", "submission.state", "submission.finish"} <= set(actions)


@pytest.mark.parametrize("large", [False, True])
def test_an_uploaded_bundle_is_written_to_disk_at_most_once(people, round_open, acme_bundle, settings, monkeypatch,
                                                           large: bool) -> None:
    """A large upload is the temporary file Django streamed it to, not a copy; a small one, held in memory, is
    written once, as a file of its own in the scratch folder, and is gone after the request."""
    if large:
        settings.FILE_UPLOAD_MAX_MEMORY_SIZE = len(acme_bundle) - 1
    from ingest.services import uploads

    given: list[tuple[Path, bytes]] = []
    real = uploads.submission_upload

    def recorded(**kwargs):
        given.append((kwargs["archive"], kwargs["archive"].read_bytes()))
        return real(**kwargs)

    monkeypatch.setattr(uploads, "submission_upload", recorded)
    response = upload(api(people.alice), acme_bundle)
    assert response.status_code == 201, response.content
    [(archive, data)] = given
    assert data == acme_bundle
    expected = Path(settings.FILE_UPLOAD_TEMP_DIR) if large else Path(settings.PODIUM_SCRATCH_DIR)
    assert archive.parent == expected
    assert not archive.exists()


def test_a_new_upload_is_answered_not_current_without_asking_the_database(people, round_open, acme_bundle,
                                                                          django_assert_num_queries) -> None:
    from ingest.services.submissions import UploadOutcome

    response = upload(api(people.alice), acme_bundle)
    assert response.status_code == 201 and response.json()["current"] is False
    submission = Submission.objects.get(pk=response.json()["id"])
    with django_assert_num_queries(0):  # no results yet: none can be current
        assert UploadOutcome(submission, created=True).is_current is False
    with django_assert_num_queries(1):  # bytes uploaded before: their results are looked at
        assert UploadOutcome(submission, created=False).is_current is False


def test_same_bytes_again_return_the_existing_submission(people, round_open, acme_bundle,
                                                          django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        first = upload(api(people.alice), acme_bundle)
        second = upload(api(people.alice), acme_bundle, name="renamed.tgz")
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert Submission.objects.count() == 1


def test_a_new_upload_supersedes_the_old_version_and_keeps_history(people, round_open, demo_tree, tmp_path,
                                                                   django_capture_on_commit_callbacks) -> None:
    root, manifest = demo_tree
    folder = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    with django_capture_on_commit_callbacks(execute=True):
        first = upload(api(people.alice), tar_gz_of(folder)).json()["id"]
    # Same systems and benchmarks, one run changed: a new version.
    copy = tmp_path / "Larkspur_Compute"
    shutil.copytree(folder, copy)
    log = copy / "results/atlas_lx4_n1/resnet/result_0.txt"
    log.write_text(log.read_text().replace('"status": "success"', '"status": "aborted"'))
    with django_capture_on_commit_callbacks(execute=True):
        second = upload(api(people.alice), tar_gz_of(copy)).json()["id"]
    old = Submission.objects.get(pk=first)
    new = Submission.objects.get(pk=second)
    assert old.state == Submission.State.SUPERSEDED and new.state == Submission.State.VERIFIED
    resnet = Result.objects.filter(organization=people.acme, system_slug="atlas_lx4_n1", benchmark_key="resnet")
    assert resnet.count() == 2 and resnet.filter(is_current=True).get().submission == new
    assert old.results.filter(is_current=False).count() == old.results.count()


def test_the_replaced_version_is_changed_once_on_postgresql(people, round_open, demo_tree, tmp_path,
                                                             django_capture_on_commit_callbacks) -> None:
    """results._next_result_id: on PostgreSQL the new version's id is drawn with the read that locks the current one,
    which one UPDATE then takes out of the current and points at its successor; elsewhere two UPDATEs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    root, manifest = demo_tree
    folder = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    item = tmp_path / "Larkspur_Compute"
    (item / "systems").mkdir(parents=True)
    shutil.copyfile(folder / "systems/atlas_lx4_n1.json", item / "systems/atlas_lx4_n1.json")
    shutil.copytree(folder / "results/atlas_lx4_n1/resnet", item / "results/atlas_lx4_n1/resnet")
    with django_capture_on_commit_callbacks(execute=True):
        upload(api(people.alice), tar_gz_of(item))
    log = item / "results/atlas_lx4_n1/resnet/result_0.txt"
    log.write_text(log.read_text().replace('"status": "success"', '"status": "aborted"'))
    with CaptureQueriesContext(connection) as seen, django_capture_on_commit_callbacks(execute=True):
        upload(api(people.alice), tar_gz_of(item))
    updates = [q["sql"] for q in seen.captured_queries if q["sql"].startswith('UPDATE "ingest_result"')]
    assert len(updates) == (1 if connection.vendor == "postgresql" else 2), updates
    old, new = Result.objects.filter(benchmark_key="resnet").order_by("submission__uploaded_at", "submission_id")
    assert (old.is_current, new.is_current, old.superseded_by_id, new.superseded_by_id) == (False, True, new.pk, None)
    assert new.digest != old.digest  # the changed log: a new version, not the same bytes again


def test_loose_files_are_packed_into_a_bundle(people, round_open, demo_tree,
                                              django_capture_on_commit_callbacks) -> None:
    root, manifest = demo_tree
    org = root / manifest.round("demo-2024a").folder / "Tessellate_Cloud"
    results = sorted((org / "results/tc2-accel-8x2/resnet").glob("result_*.txt"))
    files = [_file(p.read_bytes(), p.name) for p in results]
    with django_capture_on_commit_callbacks(execute=True):
        response = api(people.carol).post("/api/v1/submissions/", {
            "round": "open-v4.0",
            "system": _file((org / "systems/tc2-accel-8x2.json").read_bytes(), "tc2-accel-8x2.json"),
            "results": files,
        }, format="multipart")
    assert response.status_code == 201, response.content
    result = Submission.objects.get().results.get()
    assert (result.system_slug, result.benchmark_key, result.verdict) == ("tc2-accel-8x2", "resnet", "verified")
    assert result.runs.first().file.startswith("zeta/results/tc2-accel-8x2/resnet/")


@pytest.mark.parametrize(
    ("case", "status", "fragment"),
    [
        ("read_scope", 403, "read scope"),
        ("no_token", 401, "credentials"),
        ("bad_token", 401, "Unknown token"),
        ("revoked", 401, "revoked"),
        ("not_a_submitter", 400, "may not submit"),
        ("round_closed", 400, "accepts uploads only while open"),
        ("unknown_round", 400, "No round"),
        ("both_kinds", 400, "either a bundle"),
    ],
)
def test_refused_uploads_say_why_and_store_nothing(case, status, fragment, people, round_open, acme_bundle) -> None:
    client = api(people.alice)
    data: dict = {}
    if case == "read_scope":
        client = api(people.alice, scope="read")
    elif case == "no_token":
        client = APIClient()
    elif case == "bad_token":
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Token pod_deadbeef_notarealsecret")
    elif case == "revoked":
        from accounts.models import ApiToken
        from accounts.services import api_token_revoke

        secret = token_for(people.alice)
        api_token_revoke(token=ApiToken.objects.get(prefix=secret.split("_")[1]), actor=people.alice)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    elif case == "not_a_submitter":
        client = api(people.bob)  # a reviewer of Acme, not a submitter
    elif case == "round_closed":
        set_phase(round_open, "review")
    elif case == "unknown_round":
        data = {"round": "nope"}
    elif case == "both_kinds":
        data = {"system": _file(b"{}", "s.json")}
    payload = {"round": "open-v4.0", "bundle": _file(acme_bundle, "b.tar.gz"), **data}
    response = client.post("/api/v1/submissions/", payload, format="multipart")
    assert response.status_code == status, response.content
    assert fragment in response.content.decode()
    assert Submission.objects.count() == 0


@pytest.mark.parametrize(
    ("name", "make", "fragment"),
    [
        ("traversal", "traversal", "points outside the bundle"),
        ("symlink", "symlink", "symbolic link"),
        ("corrupt", "corrupt", "damaged"),
        ("not_an_archive", "random", "not a .tar.gz or .zip"),
        ("wrong_layout", "layout", "systems/"),
        ("bad_json", "bad_json", "line 1, column"),
    ],
)
def test_hostile_bundles_are_refused_at_once_and_nothing_is_stored(name, make, fragment, people, round_open,
                                                                    acme_bundle, settings) -> None:
    data = _hostile(make, acme_bundle)
    response = upload(api(people.alice), data)
    assert response.status_code == 400, response.content
    assert fragment in response.json()["detail"]
    assert Submission.objects.count() == 0
    store = Path(settings.PODIUM_BUNDLE_DIR)
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*"))


def test_oversize_bundles_are_refused(people, round_open, acme_bundle, settings) -> None:
    settings.PODIUM_MAX_BUNDLE_BYTES = 1000
    response = upload(api(people.alice), acme_bundle)
    assert response.status_code == 400 and "limit is 1,000 bytes" in response.json()["detail"]


def _hostile(kind: str, good: bytes) -> bytes:
    buffer = io.BytesIO()
    if kind == "corrupt":
        return good[: len(good) // 2]
    if kind == "random":
        return b"\x00\x01not an archive at all" * 50
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        def add(name: str, data: bytes = b"x", **attrs: object) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for key, value in attrs.items():
                setattr(info, key, value)
            archive.addfile(info, io.BytesIO(data) if info.isfile() else None)

        if kind == "traversal":
            add("Org/systems/../../../../etc/evil", b"boom")
        elif kind == "symlink":
            add("Org/results/s/resnet/result_0.txt", b"", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        elif kind == "layout":
            add("Org/logs/result_0.txt", b"hello")
        elif kind == "bad_json":
            add("Org/systems/s.json", b"{ nope")
            add("Org/results/s/resnet/result_0.txt", b":::MLLOG {}\n")
    return buffer.getvalue()


def test_status_shows_queue_position_while_waiting(people, round_open, acme_bundle) -> None:
    # Without executing the on-commit callbacks nothing is verified: the upload waits in the queue.
    first = upload(api(people.alice), acme_bundle).json()["id"]
    status = api(people.alice).get(f"/api/v1/submissions/{first}/").json()
    assert status["state"] == "received" and status["queue_position"] == 1
    assert status["elapsed_seconds"] >= 0


def test_a_platform_fault_is_retried_and_never_blamed_on_the_submitter(people, round_open, full_bundle,
                                                                         monkeypatch,
                                                                         django_capture_on_commit_callbacks) -> None:
    real = submissions.verify_item
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(submissions, "verify_item", flaky)
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(api(people.alice), full_bundle)
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.state == Submission.State.VERIFIED
    assert submission.attempts == 2
    # The item stored before the fault was not stored again on the retry.
    assert submission.results.count() == 7
    assert AuditEvent.objects.filter(subject_id=submission.pk, after__reason="platform fault, will retry").exists()


def test_a_bug_ends_in_error_with_a_neutral_message(people, round_open, acme_bundle, monkeypatch,
                                                    django_capture_on_commit_callbacks) -> None:
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug of ours")

    monkeypatch.setattr(submissions, "verify_item", broken)
    with django_capture_on_commit_callbacks(execute=True):
        submission_id = upload(api(people.alice), acme_bundle).json()["id"]
    submission = Submission.objects.get(pk=submission_id)
    assert submission.state == Submission.State.ERROR and "ZeroDivisionError" in submission.error_detail
    status = api(people.alice).get(f"/api/v1/submissions/{submission_id}/").json()
    assert "not a fault of your bundle" in status["error"]
    assert "ZeroDivisionError" not in json.dumps(status)  # the detail is for operators
    assert any("not a fault of your bundle" in m.body for m in mail.outbox)


def test_the_organization_is_mailed_when_verification_ends(people, round_open, acme_bundle,
                                                           django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        upload(api(people.alice), acme_bundle)
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert sorted(message.to) == ["alice@example.org", "bob@example.org"]
    assert "verified" in message.subject and "/submissions/" in message.body


def test_sweeper_redispatches_lost_and_dead_work(people, round_open, acme_bundle, settings, monkeypatch) -> None:
    lost_id = upload(api(people.alice), acme_bundle).json()["id"]  # never enqueued: callbacks not run
    Submission.objects.filter(pk=lost_id).update(queued_at=timezone.now() - datetime.timedelta(minutes=10))
    queued: list[int] = []
    monkeypatch.setattr(submissions, "enqueue", queued.append)
    requeued = submissions.submissions_sweep()
    assert requeued == [lost_id]
    # Dead worker: left verifying past the deadline.
    Submission.objects.filter(pk=lost_id).update(state=Submission.State.VERIFYING,
                                                 started_at=timezone.now() - datetime.timedelta(hours=1))
    assert submissions.submissions_sweep() == [lost_id]
    # Too many attempts: the sweeper gives up, as a platform error.
    Submission.objects.filter(pk=lost_id).update(state=Submission.State.VERIFYING,
                                                 attempts=settings.PODIUM_VERIFY_MAX_ATTEMPTS,
                                                 started_at=timezone.now() - datetime.timedelta(hours=1))
    submissions.submissions_sweep()
    assert Submission.objects.get(pk=lost_id).state == Submission.State.ERROR


def test_uploads_are_rate_limited(people, round_open, acme_bundle, monkeypatch) -> None:
    from django.core.cache import cache
    from rest_framework.throttling import SimpleRateThrottle

    # DRF reads its rates once, at import: patch the class, not the setting.
    rates = {**SimpleRateThrottle.THROTTLE_RATES, "uploads": "2/hour"}
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    cache.clear()
    client = api(people.alice)
    codes = [upload(client, acme_bundle + bytes([i])).status_code for i in range(3)]
    cache.clear()
    assert codes[2] == 429
    assert Submission.objects.count() <= 2


def test_web_upload_page_needs_login_and_csrf(people, round_open, acme_bundle) -> None:
    anonymous = Client()
    assert anonymous.get("/submit/").status_code == 302
    client = Client(enforce_csrf_checks=True)
    client.login(username="alice", password=PASSWORD)
    refused = client.post("/submit/", {"round": "open-v4.0", "organization": "acme",
                                       "bundle": _file(acme_bundle, "b.tar.gz")})
    assert refused.status_code == 403  # no CSRF token
    page = client.get("/submit/")
    token = page.cookies["csrftoken"].value
    response = client.post("/submit/", {"round": "open-v4.0", "organization": "acme",
                                        "bundle": _file(acme_bundle, "b.tar.gz"), "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    submission = Submission.objects.get()
    assert response["Location"] == f"/submissions/{submission.pk}/"


def test_web_upload_refusal_is_shown_on_the_page(people, round_open) -> None:
    client = Client()
    client.login(username="alice", password=PASSWORD)
    response = client.post("/submit/", {"round": "open-v4.0", "organization": "acme",
                                        "bundle": _file(b"garbage" * 10, "b.zip")})
    assert response.status_code == 400
    assert "not a .tar.gz or .zip" in response.content.decode()
    assert Submission.objects.count() == 0


def test_status_page_groups_findings_by_file_and_offers_the_report(people, round_open, full_bundle,
                                                                   django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        submission_id = upload(api(people.alice), full_bundle).json()["id"]
    client = Client()
    client.login(username="bob", password=PASSWORD)
    html = client.get(f"/submissions/{submission_id}/").content.decode()
    assert "Findings by file" in html and "result_3.txt" in html and "quality target not reached" in html
    assert "hx-get" not in html  # final: the page stops polling
    report = client.get(f"/submissions/{submission_id}/report.json")
    assert report["Content-Disposition"].startswith("attachment")
    assert json.loads(report.content)["state"] == "verified"


def test_run_logs_are_served_only_to_those_who_may_see_the_result(people, round_open, acme_bundle,
                                                                  django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        submission_id = upload(api(people.alice), acme_bundle).json()["id"]
    result = Submission.objects.get(pk=submission_id).results.first()
    url = f"/results/{result.pk}/runs/0/log"
    owner = Client()
    owner.login(username="alice", password=PASSWORD)
    response = owner.get(url)
    assert response.status_code == 200 and b":::MLLOG" in response.content
    assert response["X-Content-Type-Options"] == "nosniff"
    assert Client().get(url).status_code == 404  # anonymous, before publication
    outsider = Client()
    outsider.login(username="dave", password=PASSWORD)
    assert outsider.get(url).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_verdict_is_stored_without_savepoints_and_locks_the_submission_once(people, round_open, demo_tree,
                                                                               tmp_path, monkeypatch) -> None:
    """Each statement is a round trip on PostgreSQL on the way to the verdict: the services the verdict's
    transaction calls take no savepoint of their own inside it, and the row locked once stays locked (a new
    version of entries whose systems are known: a system's first upload creates its row, in a savepoint)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(submissions, "enqueue", lambda submission_id: None)
    root, manifest = demo_tree
    folder = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    first = upload(api(people.alice), tar_gz_of(folder)).json()["id"]
    assert submissions.submission_verify(submission_id=first) == Submission.State.VERIFIED
    copy = tmp_path / "Larkspur_Compute"  # other bytes, the same entries
    shutil.copytree(folder, copy)
    (copy / "README.md").write_text("a second version\n")
    submission_id = upload(api(people.alice), tar_gz_of(copy)).json()["id"]
    with CaptureQueriesContext(connection) as queries:
        assert submissions.submission_verify(submission_id=submission_id) == Submission.State.VERIFIED
    statements = [q["sql"].upper() for q in queries.captured_queries]
    assert not [s for s in statements if "SAVEPOINT" in s]
    # Locks taken only to hold the row (FOR UPDATE on PostgreSQL; SQLite locks the whole file): _store's, which
    # also asks whether the row is still this attempt's; not one more per stored item (the bundle has 7).
    # submission_finish locks it in the statement that judges it.
    lease_check = 'SELECT "INGEST_SUBMISSION"."ID" AS "PK" FROM "INGEST_SUBMISSION" WHERE'
    locks = [s for s in statements if s.startswith(lease_check)]
    assert len(locks) == 1, locks
    assert Result.objects.filter(submission_id=submission_id, is_current=True).count() == 7
    # The claim's audit row (on PostgreSQL in the claim's one statement), then the verdict's in one INSERT
    # (accounts.services.audit_batch): a row per result, the final state, the older version superseded, in that order.
    audits = [s for s in statements if 'INSERT INTO "ACCOUNTS_AUDITEVENT"' in s]
    assert len(audits) == 2, audits
    verdict = AuditEvent.objects.filter(created_at__gte=Submission.objects.get(pk=submission_id).started_at)
    actions = [e.action for e in verdict.order_by("id")]
    assert actions == ["submission.state"] + ["result.create"] * 7 + ["submission.finish", "submission.state"]
    assert verdict.order_by("id").last().subject_id == first  # superseded


@pytest.mark.django_db(transaction=True)
def test_an_upload_is_stored_without_a_savepoint(people, round_open, acme_bundle, monkeypatch) -> None:
    """Its row is inserted with its audit row, not got-or-created (a savepoint and a second look, three round trips on
    PostgreSQL on the way to the verdict); on PostgreSQL both in one statement that commits on its own (no BEGIN, no
    COMMIT), queued once it is committed."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    queued: list[tuple[int, bool]] = []
    monkeypatch.setattr(submissions, "enqueue", lambda submission_id: queued.append(
        (submission_id, connection.in_atomic_block)))
    client = api(people.alice)
    with CaptureQueriesContext(connection) as queries:
        response = upload(client, acme_bundle)
    assert response.status_code == 201
    statements = [q["sql"].upper() for q in queries.captured_queries]
    assert not [s for s in statements if "SAVEPOINT" in s]
    inserts = [s for s in statements if 'INSERT INTO "INGEST_SUBMISSION"' in s]
    assert len(inserts) == 1
    submission = Submission.objects.get()
    assert queued == [(submission.pk, False)]
    if connection.vendor == "postgresql":
        assert 'INSERT INTO "ACCOUNTS_AUDITEVENT"' in inserts[0]
        assert not [s for s in statements if s in ("BEGIN", "COMMIT") or s.startswith('INSERT INTO "ACCOUNTS')]
    event = AuditEvent.objects.get(action="submission.create")
    assert (event.actor_id, event.actor_label, event.subject_type, event.subject_id, event.before, event.after) == (
        people.alice.pk, people.alice.username, "submission", submission.pk, {},
        {"state": "received", "sha256": submission.sha256, "name": "bundle.tar.gz"})
    assert submission.created_at <= event.created_at


@pytest.mark.django_db(transaction=True)
def test_an_upload_inside_a_callers_transaction_is_queued_at_its_commit(people, round_open, acme_bundle, tmp_path,
                                                                        monkeypatch) -> None:
    """The review app uploads inside its own transaction: the submission and its audit row are written there (a
    savepoint, so that the same bytes stored meanwhile leave the caller's transaction usable) and queued only once it
    commits; rolled back, nothing stays and nothing is queued."""
    from django.db import transaction

    queued: list[int] = []
    monkeypatch.setattr(submissions, "enqueue", queued.append)
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(acme_bundle)
    with transaction.atomic():
        outcome = submissions.submission_upload(actor=people.alice, organization=people.acme, round=round_open,
                                                archive=archive, original_name="bundle.tar.gz")
        assert queued == [] and AuditEvent.objects.filter(action="submission.create").count() == 1
    assert queued == [outcome.submission.pk]
    other = tmp_path / "other.tar.gz"
    other.write_bytes(acme_bundle + b"\0" * 1024)  # other bytes, the same tree
    with pytest.raises(RuntimeError, match="the caller's rollback"), transaction.atomic():
        submissions.submission_upload(actor=people.alice, organization=people.acme, round=round_open,
                                      archive=other, original_name="bundle.tar.gz")
        raise RuntimeError("the caller's rollback")
    assert queued == [outcome.submission.pk] and Submission.objects.count() == 1
    assert AuditEvent.objects.filter(action="submission.create").count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_upload_stands_when_its_hand_over_fails_after_its_commit(people, round_open, acme_bundle,
                                                                    monkeypatch) -> None:
    """Committed, the upload is answered and queued whatever happens to its unpacked folder: its verification then
    unpacks the stored archive."""
    from django.db import connection

    from ingest import handoff

    queued: list[int] = []
    monkeypatch.setattr(submissions, "enqueue", queued.append)

    def full_disk(*args: object, **kwargs: object) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(handoff, "hand_over", full_disk)
    client = api(people.alice)
    if connection.vendor != "postgresql":  # there it is inside the upload's transaction: refused whole
        with pytest.raises(OSError):
            upload(client, acme_bundle)
        assert not Submission.objects.exists() and queued == []
        return
    response = upload(client, acme_bundle)
    assert response.status_code == 201, response.content
    assert queued == [response.json()["id"]] == [Submission.objects.get().pk]


@pytest.mark.django_db(transaction=True)
def test_the_same_bytes_uploaded_at_the_same_moment_answer_with_one_submission(people, round_open, acme_bundle,
                                                                              monkeypatch) -> None:
    """Another request stores the same bytes between this one's look and its insert: the insert fails on the
    unique bundle, and this upload answers with that submission, queues nothing and hands nothing over."""
    from ingest import storage
    from tests.factories import SubmissionFactory

    queued: list[int] = []
    monkeypatch.setattr(submissions, "enqueue", queued.append)
    real_store = storage.store

    def store_while_another_request_inserts(archive, sha256, suffix):
        SubmissionFactory(round=round_open, organization=people.acme, sha256=sha256)
        return real_store(archive, sha256, suffix)

    monkeypatch.setattr(storage, "store", store_while_another_request_inserts)
    response = upload(api(people.alice), acme_bundle)
    assert response.status_code == 200, response.content
    other = Submission.objects.get()
    assert response.json()["id"] == other.pk
    assert queued == [] and not AuditEvent.objects.filter(action="submission.create").exists()
    scratch = Path(storage.scratch_dir())
    assert not [p for p in scratch.iterdir() if p.name.startswith(("podium-upload-", "podium-handoff"))]




@pytest.mark.django_db(transaction=True)
def test_a_result_stored_as_locked_outside_a_transaction_is_refused(people, round_open) -> None:
    """`locked=True` skips the lock and the savepoint because the caller's transaction holds both: outside one
    (autocommit) nothing would hold the row, and the item's rows would commit one by one."""
    from ingest.services.results import result_store
    from tests.factories import SubmissionFactory

    submission = SubmissionFactory(round=round_open, organization=people.acme)
    with pytest.raises(RuntimeError, match="inside the transaction"):
        result_store(submission=submission, report=None, actor="worker", locked=True)  # type: ignore[arg-type]
    assert not Result.objects.exists()


def test_the_upload_target_is_the_round_and_an_organization_the_actor_submits_for(people, round_open) -> None:
    """upload_target reads its round and organization through statements built once: the same choices and
    refusals as the ORM's, whatever the slugs hold."""
    from accounts.models import Membership
    from accounts.services import membership_add
    from ingest.services.submissions import UploadRefused
    from ingest.services.uploads import upload_target

    def refusal(**given: object) -> str:
        with pytest.raises(UploadRefused) as refused:
            upload_target(**given)  # type: ignore[arg-type]
        return str(refused.value)

    assert upload_target(actor=people.alice, round_slug="open-v4.0") == (round_open, people.acme)
    assert upload_target(actor=people.alice, round_slug="open-v4.0", organization_slug="acme")[1] == people.acme
    for slug in ("zeta", "nope", "acme' OR '1'='1", "%"):  # another's, none, hostile
        assert "may not submit for this organization" in refusal(actor=people.alice, round_slug="open-v4.0",
                                                                  organization_slug=slug)
    for slug in ("nope", "open-v4.0' --", "%", ""):
        assert "No round" in refusal(actor=people.alice, round_slug=slug)
    assert "any organization" in refusal(actor=people.bob, round_slug="open-v4.0")  # a reviewer only
    membership_add(user=people.carol, organization=people.acme, role=Membership.Role.SUBMITTER)
    assert "several organizations" in refusal(actor=people.carol, round_slug="open-v4.0")
    assert upload_target(actor=people.carol, round_slug="open-v4.0", organization_slug="zeta") == (
        round_open, people.zeta)
