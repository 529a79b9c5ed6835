"""The review workflow end to end: flag → answer → resubmission → decision → publication, audited."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import AuditEvent, Membership
from accounts.services import membership_add
from ingest.models import Result, Submission
from reviews.models import Borrowing, Flag, Notification
from tests.mllog_edit import rewrite_log, shift_times
from tests.people import PASSWORD, make_people, open_round, set_phase, tar_gz_of, token_for

pytestmark = pytest.mark.django_db


def _bundle(root: Path, org: str, system: str, benchmark: str, dest: Path) -> Path:
    """A one-item copy of a demo submitter folder that a test may change."""
    folder = dest / org
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(root / org / "systems" / f"{system}.json", folder / "systems" / f"{system}.json")
    shutil.copytree(root / org / "results" / system / benchmark, folder / "results" / system / benchmark)
    return folder


def _upload(user, folder: Path, round_slug: str) -> Submission:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    data = io.BytesIO(tar_gz_of(folder))
    data.name = "bundle.tar.gz"
    response = client.post("/api/v1/submissions/", {"round": round_slug, "bundle": data}, format="multipart")
    assert response.status_code == 201, response.content
    return Submission.objects.get(pk=response.json()["id"])


@pytest.fixture
def review(demo_tree, tmp_path, django_capture_on_commit_callbacks):
    """Acme and Zeta submitted to a round now in review; carol reviews for Zeta; chair chairs."""
    root, manifest = demo_tree
    demo = root / manifest.round("demo-2024a").folder
    people = make_people()
    membership_add(user=people.carol, organization=people.zeta, role=Membership.Role.REVIEWER)
    round_ = open_round()
    round_.chairs.add(people.chair)
    acme_folder = _bundle(demo, "Larkspur_Compute", "atlas_lx4_n1", "bert", tmp_path / "acme")
    zeta_folder = _bundle(demo, "Tessellate_Cloud", "tc2-accel-8x32", "bert", tmp_path / "zeta")
    with django_capture_on_commit_callbacks(execute=True):
        _upload(people.alice, acme_folder, round_.slug)
        _upload(people.carol, zeta_folder, round_.slug)
    set_phase(round_, "review")
    acme = Result.objects.current().get(organization=people.acme)
    zeta = Result.objects.current().get(organization=people.zeta)
    return people, round_, acme, zeta, acme_folder


def _client(user) -> Client:
    client = Client()
    client.login(username=user.username, password=PASSWORD)
    return client


def test_flag_answer_resubmission_decision_publication(review, django_capture_on_commit_callbacks, tmp_path) -> None:
    people, round_, acme, _, acme_folder = review
    carol, alice, chair = _client(people.carol), _client(people.alice), _client(people.chair)

    # A reviewer of another submitting organization raises a flag anchored to a file and line.
    with django_capture_on_commit_callbacks(execute=True):
        response = carol.post(f"/results/{acme.pk}/flags/new/", {
            "rule": "compliance/eval_accuracy", "description": "The target is reached only once, at the end.",
            "anchor_file": acme.runs.first().file, "anchor_line": "42", "run": "0"})
    flag = Flag.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/flags/{flag.pk}/"
    assert (flag.state, flag.raised_by_organization, flag.run.position) == (Flag.State.OPEN, people.zeta, 0)
    assert Notification.objects.filter(user=people.alice, url=f"/flags/{flag.pk}/").exists()
    assert any("was flagged" in m.subject for m in mail.outbox)

    # The flagged organization answers: the flag becomes answered.
    alice.post(f"/flags/{flag.pk}/comment/", {"body": "We will rerun with evaluation every epoch."})
    flag.refresh_from_db()
    assert flag.state == Flag.State.ANSWERED

    # It resubmits during review, in answer to the flag; the diff against the flagged version is shown.
    log = acme_folder / "results/atlas_lx4_n1/bert/result_0.txt"
    log.write_text(log.read_text().replace('"submission_platform", "value": "', '"submission_platform", "value": "v2 '))
    archive = tmp_path / "fixed.tar.gz"
    archive.write_bytes(tar_gz_of(acme_folder))
    with django_capture_on_commit_callbacks(execute=True), archive.open("rb") as handle:
        response = alice.post(f"/flags/{flag.pk}/resubmit/", {"bundle": handle})
    assert response.status_code == 302
    flag.refresh_from_db()
    assert flag.resubmission is not None and flag.resubmission.state == Submission.State.VERIFIED
    page = chair.get(f"/flags/{flag.pk}/").content.decode()
    assert f"Resubmission #{flag.resubmission.pk} against the flagged version" in page

    # The chair keeps one remark private, then decides.
    chair.post(f"/flags/{flag.pk}/comment/", {"body": "Internal: checked the rerun logs.", "private": "on"})
    chair.post(f"/flags/{flag.pk}/decision/", {"outcome": Flag.Outcome.FIXED, "note": "Rerun accepted."})
    flag.refresh_from_db()
    assert (flag.state, flag.outcome, flag.decided_by) == (Flag.State.RESOLVED, Flag.Outcome.FIXED, people.chair)

    # Publication: the review record is public, without the private remark.
    set_phase(round_, "published")
    new = Result.objects.current().get(organization=people.acme)
    assert new.submission == flag.resubmission
    public = Client().get(f"/flags/{flag.pk}/").content.decode()
    assert "We will rerun" in public and "Fixed by resubmission" in public
    assert "Internal: checked" not in public
    assert Client().get(f"/results/{acme.pk}/").status_code == 200

    # Every state change left an audit row with who, what and before → after, in order.
    trail = list(AuditEvent.objects.filter(subject_type="flag", subject_id=flag.pk).order_by("pk")
                 .values_list("action", "actor_label", "before", "after"))
    assert [t[0] for t in trail] == ["flag.create", "flag.state", "flag.resubmission", "flag.decide"]
    assert trail[0][1] == "carol" and trail[1][2:] == ({"state": "open"}, {"state": "answered"})
    assert trail[3][1] == "chair" and trail[3][3]["outcome"] == "fixed"
    assert AuditEvent.objects.filter(action="comment.create").count() == 2


def test_an_undecided_flag_keeps_a_result_out_of_the_public_record(review) -> None:
    people, round_, acme, zeta, _ = review
    flag = Flag.objects.create(round=round_, result=acme, raised_by=people.carol,
                               raised_by_organization=people.zeta, rule="rcp", description="too fast")
    set_phase(round_, "published")
    anonymous = Client()
    assert anonymous.get(f"/results/{acme.pk}/").status_code == 404
    assert anonymous.get(f"/results/{zeta.pk}/").status_code == 200
    assert acme.system_name not in anonymous.get(f"/rounds/{round_.slug}/").content.decode()
    assert APIClient().get(f"/api/v1/results/{acme.pk}/").status_code == 404
    # The organization itself still sees it, and the chair can decide after the publication date.
    assert _client(people.alice).get(f"/results/{acme.pk}/").status_code == 200
    _client(people.chair).post(f"/flags/{flag.pk}/decision/", {"outcome": Flag.Outcome.REJECTED, "note": "No issue."})
    assert anonymous.get(f"/results/{acme.pk}/").status_code == 200


@pytest.mark.parametrize(
    ("outcome", "extra", "check"),
    [
        (Flag.Outcome.SCALED, {"scaling_factor": "1.25"},
         lambda r, old: r.scaling_source == "review" and abs(r.score - old.raw_score * 1.25) < 1e-12
         and abs(r.accelerator_minutes - r.score * r.accelerator_count) < 1e-9),
        (Flag.Outcome.MOVED_TO_OPEN, {}, lambda r, old: r.division == "open"),
        (Flag.Outcome.WITHDRAWN, {}, lambda r, old: r.withdrawn_at is not None
         and not Result.objects.current().filter(pk=r.pk).exists()),
        (Flag.Outcome.REJECTED, {}, lambda r, old: (r.score, r.division) == (old.score, old.division)),
    ],
)
def test_each_decision_has_its_effect_and_is_audited(review, outcome, extra, check) -> None:
    people, round_, acme, _, _ = review
    flag = Flag.objects.create(round=round_, result=acme, raised_by=people.carol,
                               raised_by_organization=people.zeta, rule="rcp", description="too fast")
    response = _client(people.chair).post(f"/flags/{flag.pk}/decision/", {"outcome": outcome, **extra})
    assert response.status_code == 302
    result = Result.objects.get(pk=acme.pk)
    assert check(result, acme)
    assert AuditEvent.objects.filter(action="flag.decide", subject_id=flag.pk).exists()
    if outcome != Flag.Outcome.REJECTED:
        assert AuditEvent.objects.filter(subject_type="result", subject_id=acme.pk,
                                         action__in=["result.rescale", "result.division", "result.withdraw"]).exists()


def test_fixed_needs_a_resubmission_and_scaled_needs_a_factor(review) -> None:
    people, round_, acme, _, _ = review
    flag = Flag.objects.create(round=round_, result=acme, raised_by=people.carol,
                               raised_by_organization=people.zeta, rule="rcp", description="too fast")
    chair = _client(people.chair)
    chair.post(f"/flags/{flag.pk}/decision/", {"outcome": Flag.Outcome.FIXED})
    chair.post(f"/flags/{flag.pk}/decision/", {"outcome": Flag.Outcome.SCALED})
    flag.refresh_from_db()
    assert flag.state == Flag.State.OPEN


def test_only_the_right_people_may_raise_answer_and_decide(review) -> None:
    people, round_, acme, _, _ = review
    # bob reviews for Acme itself: he may not flag his own organization's result.
    _client(people.bob).post(f"/results/{acme.pk}/flags/new/", {"rule": "x", "description": "y"})
    # dave's organization did not submit: he does not even see the result.
    assert _client(people.dave).post(f"/results/{acme.pk}/flags/new/", {"rule": "x", "description": "y"}
                                     ).status_code == 404
    assert Flag.objects.count() == 0
    flag = Flag.objects.create(round=round_, result=acme, raised_by=people.carol,
                               raised_by_organization=people.zeta, rule="rcp", description="too fast")
    _client(people.carol).post(f"/flags/{flag.pk}/decision/", {"outcome": Flag.Outcome.REJECTED})  # not a chair
    _client(people.carol).post(f"/flags/{flag.pk}/comment/", {"body": "private?", "private": "on"})  # not a chair
    flag.refresh_from_db()
    assert flag.state == Flag.State.OPEN and flag.comments.count() == 0


def test_flags_are_raised_only_during_review(review) -> None:
    people, round_, acme, _, _ = review
    set_phase(round_, "open")
    _client(people.carol).post(f"/results/{acme.pk}/flags/new/", {"rule": "x", "description": "y"})
    assert Flag.objects.count() == 0


def test_the_api_raises_comments_and_decides_with_the_same_permissions(review) -> None:
    people, round_, acme, _, _ = review

    def api(user, scope: str = "submit") -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user, scope)}")
        return client

    created = api(people.carol).post("/api/v1/flags/", {"result": acme.pk, "rule": "seed", "description": "dup"},
                                     format="json")
    assert created.status_code == 201, created.content
    flag_id = created.json()["id"]
    assert api(people.carol, "read").post(f"/api/v1/flags/{flag_id}/comments/", {"body": "x"},
                                          format="json").status_code == 403  # read scope
    assert api(people.alice).post(f"/api/v1/flags/{flag_id}/comments/", {"body": "Seeds differ, see line 10"},
                                  format="json").status_code == 201
    assert api(people.alice).post(f"/api/v1/flags/{flag_id}/decision/", {"outcome": "rejected"},
                                  format="json").status_code == 403
    decided = api(people.chair).post(f"/api/v1/flags/{flag_id}/decision/", {"outcome": "rejected", "note": "ok"},
                                     format="json")
    assert decided.status_code == 200 and decided.json()["state"] == "resolved"
    assert APIClient().get(f"/api/v1/flags/{flag_id}/").status_code == 404  # anonymous, before publication
    set_phase(round_, "published")
    public = APIClient().get(f"/api/v1/flags/{flag_id}/").json()
    assert public["outcome"] == "rejected" and len(public["comments"]) == 1


def _borrow_with(user, entry: Result, source: Result, folder: Path, tmp_path: Path, capture) -> Borrowing:
    """Post `folder` as `entry`'s borrowing from `source`, let its verification run, return the borrowing."""
    archive = tmp_path / "borrowing.tar.gz"
    archive.write_bytes(tar_gz_of(folder))
    with capture(execute=True), archive.open("rb") as handle:
        _client(user).post(f"/results/{entry.pk}/borrow/?source={source.pk}", {"source": source.pk, "bundle": handle})
    return Borrowing.objects.get()


def _borrowable(entry: Result, source: Result) -> dict:
    """The source's modifiable hyperparameters (batch size aside) that differ from the entry's."""
    modifiable = set(entry.benchmark.modifiable_hyperparameters)
    mine = entry.runs.first().hyperparameters
    return {k: v for k, v in source.runs.first().hyperparameters.items()
            if k in modifiable and k != "global_batch_size" and mine.get(k) != v}


def test_borrowing_is_checked_and_leaves_a_lineage(review, django_capture_on_commit_callbacks, tmp_path) -> None:
    people, _round, acme, zeta, acme_folder = review
    borrowed = _borrowable(acme, zeta)
    assert borrowed, "the two demo entries must differ in some modifiable hyperparameter"
    for log in sorted((acme_folder / "results/atlas_lx4_n1/bert").glob("result_*.txt")):
        rewrite_log(log, borrowed)
        shift_times(log, 86_400_000)  # trained again, a day later
    archive = tmp_path / "borrowed.tar.gz"
    archive.write_bytes(tar_gz_of(acme_folder))
    alice = _client(people.alice)
    page = alice.get(f"/results/{acme.pk}/borrow/?source={zeta.pk}").content.decode()
    assert "must become the source" in page
    with django_capture_on_commit_callbacks(execute=True), archive.open("rb") as handle:
        alice.post(f"/results/{acme.pk}/borrow/?source={zeta.pk}", {"source": zeta.pk, "bundle": handle})
    borrowing = Borrowing.objects.get()
    assert borrowing.state == Borrowing.State.ACCEPTED, list(borrowing.result.findings.values_list("message",
                                                                                                   flat=True))
    new = Result.objects.current().get(organization=people.acme)
    assert new.borrowed_from == zeta and new.pk != acme.pk
    assert "Hyperparameters borrowed from" in alice.get(f"/results/{new.pk}/").content.decode()
    # Once per entry.
    with archive.open("rb") as handle:
        alice.post(f"/results/{new.pk}/borrow/?source={zeta.pk}", {"source": zeta.pk, "bundle": handle})
    assert Borrowing.objects.count() == 1



@pytest.mark.parametrize("edit", ["hyperparameters only", "hyperparameters and every timestamp but run_start"])
def test_a_borrowing_whose_logs_were_edited_not_rerun_is_refused(review, django_capture_on_commit_callbacks,
                                                                 tmp_path, edit) -> None:
    people, _round, acme, zeta, acme_folder = review
    borrowed = _borrowable(acme, zeta)
    for log in sorted((acme_folder / "results/atlas_lx4_n1/bert").glob("result_*.txt")):
        rewrite_log(log, borrowed)
        if edit != "hyperparameters only":
            shift_times(log, 1000, keep=("run_start",))
    borrowing = _borrow_with(people.alice, acme, zeta, acme_folder, tmp_path, django_capture_on_commit_callbacks)
    assert borrowing.state == Borrowing.State.REFUSED
    reasons = list(borrowing.result.findings.filter(rule="re-run").values_list("message", flat=True))
    assert reasons and all("must train again" in reason for reason in reasons)
    # The entry stays as it was: the previous version is current again.
    assert Result.objects.current().get(organization=people.acme, benchmark_key="bert") == acme


def test_a_borrowing_that_changes_the_system_description_is_refused_and_the_entry_stays(
    review, django_capture_on_commit_callbacks, tmp_path
) -> None:
    people, _round, acme, zeta, acme_folder = review
    system = acme_folder / "systems/atlas_lx4_n1.json"
    system.write_text(system.read_text().replace('"cooling": "', '"cooling": "water, '))
    borrowing = _borrow_with(people.alice, acme, zeta, acme_folder, tmp_path, django_capture_on_commit_callbacks)
    assert borrowing.state == Borrowing.State.REFUSED
    assert borrowing.result.findings.filter(checker="borrowing", rule="system-description").exists()
    current = Result.objects.current().get(organization=people.acme)
    assert current.pk == acme.pk and current.borrowed_from is None  # the entry stands as it was
