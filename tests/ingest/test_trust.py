"""A verified score that cannot be gamed, and a lifecycle that loses nothing (issues 10 and 11), in-process:
the submitter is who uploads, known bytes say so and can be made current again, the newest upload holds
an entry whatever order verifications finish in, faults are classified once, and only an official score
is called official."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest
from django.db import DataError, OperationalError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from core.errors import BadRequest
from ingest.models import Finding, Result, Submission
from ingest.services import results as results_service
from ingest.services import submissions
from tests.people import PASSWORD, tar_gz_of, token_for

pytestmark = pytest.mark.django_db


def item_folder(demo_tree, tmp_path: Path, org: str = "Larkspur_Compute", system: str = "atlas_lx4_n1",
                benchmark: str = "resnet", name: str = "bundle") -> Path:
    root, manifest = demo_tree
    source = root / manifest.round("demo-2024a").folder / org
    folder = tmp_path / name / org
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(source / f"systems/{system}.json", folder / f"systems/{system}.json")
    shutil.copytree(source / f"results/{system}/{benchmark}", folder / f"results/{system}/{benchmark}")
    return folder


def api(user, scope: str = "submit") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user, scope)}")
    return client


def upload(client: APIClient, data: bytes, **extra):
    handle = io.BytesIO(data)
    handle.name = "bundle.tar.gz"
    return client.post("/api/v1/submissions/", {"round": "open-v4.0", "bundle": handle, **extra}, format="multipart")


def variant(folder: Path, n: int) -> bytes:
    """The same entry with different bytes: a comment line appended to one log (not an :::MLLOG line)."""
    log = sorted((folder / "results").glob("*/*/result_*.txt"))[0]
    log.write_text(log.read_text() + f"# upload {n}\n")
    return tar_gz_of(folder)


# --- the submitter is who uploads ------------------------------------------------------------------


def test_a_bundle_of_another_organization_is_noncompliant_with_both_names(people, round_open, demo_tree, tmp_path,
                                                                          django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path, org="Tessellate_Cloud", system="tc2-accel-8x2")
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(api(people.alice), tar_gz_of(folder))  # alice submits for Larkspur Compute
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.state == Submission.State.NONCOMPLIANT
    result = submission.results.get()
    assert result.verdict == Result.Verdict.NONCOMPLIANT and not result.is_official
    messages = list(result.findings.filter(checker="submitter").values_list("message", flat=True))
    assert any("'Tessellate_Cloud'" in m and "Larkspur Compute" in m for m in messages), messages


def test_a_system_description_naming_another_submitter_is_an_error(people, round_open, demo_tree, tmp_path,
                                                                    django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    path = folder / "systems/atlas_lx4_n1.json"
    description = json.loads(path.read_text())
    description["submitter"] = "Another Company"
    path.write_text(json.dumps(description))
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(api(people.alice), tar_gz_of(folder))
    result = Submission.objects.get(pk=response.json()["id"]).results.get()
    finding = result.findings.get(checker="submitter", rule="submitter")
    assert finding.severity == Finding.Severity.ERROR and "'Another Company'" in finding.message
    assert result.verdict == Result.Verdict.NONCOMPLIANT


def test_names_compare_as_mlcommons_writes_them(people, round_open, demo_tree, tmp_path,
                                                django_capture_on_commit_callbacks):
    # Folder "Larkspur_Compute", system JSON "Larkspur_Compute", organization "Larkspur Compute": one name.
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(api(people.alice), tar_gz_of(item_folder(demo_tree, tmp_path)))
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.state == Submission.State.VERIFIED
    assert not submission.findings.filter(checker="submitter").exists()


# --- known bytes ------------------------------------------------------------------------------------


def test_known_bytes_say_which_submission_they_are_and_can_be_made_current_again(
        people, round_open, demo_tree, tmp_path, django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    first_bytes = variant(folder, 1)
    client = api(people.alice)
    with django_capture_on_commit_callbacks(execute=True):
        first = upload(client, first_bytes).json()["id"]
        second = upload(client, variant(folder, 2)).json()["id"]
    assert Submission.objects.get(pk=first).state == Submission.State.SUPERSEDED

    again = upload(client, first_bytes)
    body = again.json()
    assert again.status_code == 200 and body["id"] == first and body["created"] is False and body["current"] is False
    assert f"These bytes are submission #{first}" in body["detail"] and "no longer current" in body["detail"]
    assert Submission.objects.get(pk=first).state == Submission.State.SUPERSEDED  # asking is not acting

    with django_capture_on_commit_callbacks(execute=True):
        made = upload(client, first_bytes, make_current="true").json()
    assert made["id"] == first
    first_submission = Submission.objects.get(pk=first)
    assert first_submission.state == Submission.State.VERIFIED and first_submission.attempts == 2
    current = Result.objects.current().get(organization=people.acme)
    assert current.submission_id == first
    assert Submission.objects.get(pk=second).state == Submission.State.SUPERSEDED
    # Nothing was overwritten: the first upload's first verdict is still there, as history.
    assert Result.objects.filter(submission_id=first).count() == 2


def test_the_web_page_says_so_and_offers_to_make_it_current(people, round_open, demo_tree, tmp_path,
                                                            django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    first_bytes = variant(folder, 1)
    web = Client()
    web.login(username="alice", password=PASSWORD)

    def post(data: bytes):
        handle = io.BytesIO(data)
        handle.name = "bundle.tar.gz"
        return web.post("/submit/", {"round": "open-v4.0", "bundle": handle}, follow=True)

    with django_capture_on_commit_callbacks(execute=True):
        first = post(first_bytes).redirect_chain[-1][0]
        post(variant(folder, 2))
    page = post(first_bytes).content.decode()
    first_pk = int(first.rstrip("/").rsplit("/", 1)[-1])
    assert f"These bytes are submission #{first_pk}" in page
    assert 'id="make-current"' in page
    with django_capture_on_commit_callbacks(execute=True):
        web.post(f"/submissions/{first_pk}/make-current/")
    assert Result.objects.current().get(organization=people.acme).submission_id == first_pk
    assert 'id="make-current"' not in web.get(f"/submissions/{first_pk}/").content.decode()


def test_only_its_organization_makes_a_submission_current(people, round_open, demo_tree, tmp_path,
                                                          django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    with django_capture_on_commit_callbacks(execute=True):
        first = upload(api(people.alice), variant(folder, 1)).json()["id"]
        upload(api(people.alice), variant(folder, 2))
    outsider = Client()
    outsider.login(username="dave", password=PASSWORD)
    assert outsider.post(f"/submissions/{first}/make-current/").status_code == 404
    assert Submission.objects.get(pk=first).state == Submission.State.SUPERSEDED


# --- the newest upload holds the entry ---------------------------------------------------------------


def test_an_older_upload_verified_after_a_newer_one_is_stored_as_history(people, round_open, demo_tree, tmp_path,
                                                                        django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    client = api(people.alice)
    with django_capture_on_commit_callbacks(execute=False):  # nothing is verified yet
        older = upload(client, variant(folder, 1)).json()["id"]
        newer = upload(client, variant(folder, 2)).json()["id"]
    assert submissions.submission_verify(submission_id=newer) == Submission.State.VERIFIED
    # A broker outage delayed the older upload; the sweeper hands it over after the newer finished.
    assert submissions.submission_verify(submission_id=older) == Submission.State.SUPERSEDED
    current = Result.objects.current().get(organization=people.acme)
    assert current.submission_id == newer
    late = Result.objects.get(submission_id=older)
    assert not late.is_current and late.superseded_by == current


def test_only_a_final_submission_is_ever_superseded(people, round_open, demo_tree, tmp_path,
                                                    django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    client = api(people.alice)
    with django_capture_on_commit_callbacks(execute=False):
        waiting = upload(client, variant(folder, 1)).json()["id"]
        newer = upload(client, variant(folder, 2)).json()["id"]
    submissions.submission_verify(submission_id=newer)
    assert Submission.objects.get(pk=waiting).state == Submission.State.RECEIVED
    assert submissions.submission_verify(submission_id=waiting) == Submission.State.SUPERSEDED


def test_an_older_submission_is_superseded_only_once_none_of_its_results_is_current(
        people, round_open, demo_tree, tmp_path, django_capture_on_commit_callbacks):
    from accounts.models import AuditEvent

    two = tmp_path / "two" / "Larkspur_Compute"
    for benchmark in ("resnet", "bert"):
        shutil.copytree(item_folder(demo_tree, tmp_path, benchmark=benchmark, name=benchmark), two, dirs_exist_ok=True)
    client = api(people.alice)
    with django_capture_on_commit_callbacks(execute=True):
        both = upload(client, tar_gz_of(two)).json()["id"]
        # A new version of one of its two entries: the other is still current, so the submission stands.
        resnet = upload(client, variant(item_folder(demo_tree, tmp_path, name="resnet-again"), 1)).json()["id"]
    assert Submission.objects.get(pk=both).state == Submission.State.VERIFIED
    with django_capture_on_commit_callbacks(execute=True):
        again = item_folder(demo_tree, tmp_path, benchmark="bert", name="bert-again")
        bert = upload(client, variant(again, 2)).json()["id"]
    states = dict(Submission.objects.filter(pk__in=[both, resnet, bert]).values_list("pk", "state"))
    assert states == {both: Submission.State.SUPERSEDED, resnet: Submission.State.VERIFIED,
                      bert: Submission.State.VERIFIED}
    superseded = AuditEvent.objects.filter(action="submission.state", subject_type="submission", subject_id=both,
                                           after__state=Submission.State.SUPERSEDED)
    assert [event.after["by"] for event in superseded] == [bert]


# --- faults are classified once ------------------------------------------------------------------------


def test_a_platform_fault_hands_the_submission_back_and_is_retried(people, round_open, demo_tree, tmp_path,
                                                                  django_capture_on_commit_callbacks, monkeypatch):
    with django_capture_on_commit_callbacks(execute=False):
        pk = upload(api(people.alice), tar_gz_of(item_folder(demo_tree, tmp_path))).json()["id"]

    def database_gone(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(submissions, "result_store", database_gone)
    with pytest.raises(submissions.PlatformFault):
        submissions.submission_verify(submission_id=pk)
    submission = Submission.objects.get(pk=pk)
    assert submission.state == Submission.State.RECEIVED and submission.lease_expires_at is None
    assert not Result.objects.filter(submission=submission).exists()


def test_a_fault_of_podiums_own_ends_in_error_at_once_with_nothing_current(
        people, round_open, demo_tree, tmp_path, django_capture_on_commit_callbacks, monkeypatch):
    folder = tmp_path / "two" / "Larkspur_Compute"
    for benchmark in ("resnet", "bert"):
        item = item_folder(demo_tree, tmp_path, benchmark=benchmark, name=benchmark)
        shutil.copytree(item, folder, dirs_exist_ok=True)
    with django_capture_on_commit_callbacks(execute=False):
        pk = upload(api(people.alice), tar_gz_of(folder)).json()["id"]
    real_store = submissions.result_store
    calls = []

    def second_item_breaks(**kwargs):
        calls.append(kwargs["report"].benchmark)
        if len(calls) == 2:
            raise DataError("value out of range for type integer")
        return real_store(**kwargs)

    monkeypatch.setattr(submissions, "result_store", second_item_breaks)
    assert submissions.submission_verify(submission_id=pk) == Submission.State.ERROR
    submission = Submission.objects.get(pk=pk)
    assert submission.attempts == 1  # never retried: retrying a bug of ours changes nothing
    assert len(calls) == 2 and not Result.objects.filter(submission=submission).exists()  # nothing half-stored


def _working_copies() -> set[str]:
    from ingest import storage

    return {p.name for p in storage.scratch_dir().glob("podium-verify-*")}


def test_the_working_copies_go_once_the_verdict_is_stored_whatever_the_outcome(
        people, round_open, demo_tree, tmp_path, django_capture_on_commit_callbacks, monkeypatch):
    """The unpacked bundle and the checkers' copies are removed after the store (not on the way to the verdict),
    and on every path: a verdict, a platform fault handed back, a bug of ours."""
    before = _working_copies()
    seen_at_store: list[set[str]] = []
    real_store = submissions.result_store

    def store_then(outcome):
        def store(**kwargs):
            seen_at_store.append(_working_copies() - before)
            if outcome is not None:
                raise outcome
            return real_store(**kwargs)
        return store

    folder = item_folder(demo_tree, tmp_path)
    for n, (outcome, expected) in enumerate([
            (None, Submission.State.VERIFIED),
            (OperationalError("server closed the connection unexpectedly"), submissions.PlatformFault),
            (DataError("value out of range for type integer"), Submission.State.ERROR)]):
        with django_capture_on_commit_callbacks(execute=False):
            pk = upload(api(people.alice), variant(folder, n)).json()["id"]
        monkeypatch.setattr(submissions, "result_store", store_then(outcome))
        if isinstance(expected, type):
            with pytest.raises(expected):
                submissions.submission_verify(submission_id=pk)
        else:
            assert submissions.submission_verify(submission_id=pk) == expected
        assert len(seen_at_store[-1]) == 1  # still there while the verdict is stored
        assert _working_copies() == before, outcome  # and gone after, whatever happened


# --- the lease ------------------------------------------------------------------------------------------


def test_a_lapsed_lease_is_handed_to_another_worker_and_a_live_one_is_not(people, round_open, demo_tree, tmp_path,
                                                                          django_capture_on_commit_callbacks,
                                                                          settings):
    with django_capture_on_commit_callbacks(execute=False):
        pk = upload(api(people.alice), tar_gz_of(item_folder(demo_tree, tmp_path))).json()["id"]
    claimed = submissions._claim(pk)
    assert claimed is not None and claimed.lease_expires_at > timezone.now()
    with django_capture_on_commit_callbacks(execute=False):
        assert submissions.submissions_sweep() == []  # the worker is alive
        later = claimed.lease_expires_at + settings.PODIUM_VERIFY_LEASE / 10
        assert submissions.submissions_sweep(now=later) == [pk]
    assert Submission.objects.get(pk=pk).state == Submission.State.RECEIVED
    # The first worker, if it was only slow, finds it lost and stores nothing.
    assert submissions._store(claimed, submissions._Judged([], [])) is None


# --- only an official score is official ------------------------------------------------------------------


def test_a_noncompliant_result_has_no_official_score_and_is_not_ranked(people, round_open, demo_tree, tmp_path,
                                                                      django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    path = folder / "systems/atlas_lx4_n1.json"
    description = json.loads(path.read_text())
    description["submitter"] = "Another Company"  # an error finding, the runs still give a number
    path.write_text(json.dumps(description))
    with django_capture_on_commit_callbacks(execute=True):
        pk = upload(api(people.alice), tar_gz_of(folder)).json()["id"]
    result = Result.objects.get(submission_id=pk)
    assert result.score is not None and math.isfinite(result.score) and not result.is_official
    web = Client()
    web.login(username="alice", password=PASSWORD)
    page = web.get(f"/results/{result.pk}/").content.decode()
    assert "No official score" in page and "Official score" not in page
    assert not Result.objects.ranked().filter(pk=result.pk).exists()
    row = APIClient().get(f"/api/v1/results/{result.pk}/", HTTP_AUTHORIZATION=f"Token {token_for(people.alice)}")
    assert row.json()["official"] is False


def test_a_chairs_scaling_factor_is_finite_and_at_least_one(people, round_open, demo_tree, tmp_path,
                                                            django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        pk = upload(api(people.alice), tar_gz_of(item_folder(demo_tree, tmp_path))).json()["id"]
    result = Result.objects.get(submission_id=pk)
    for factor in (0.5, 1e-9, math.inf, math.nan, 1e308):
        with pytest.raises(BadRequest):
            results_service.result_rescale(result=result, factor=factor, actor=people.chair, reason="test")
    assert results_service.result_rescale(result=result, factor=1.25, actor=people.chair, reason="test").score == \
        pytest.approx(result.raw_score * 1.25)
