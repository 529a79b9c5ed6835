"""Every event a user's e-mail carries is also on their Notifications page, with an unread count in the header."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import Membership
from accounts.services import membership_add
from ingest.models import Result, Submission
from ingest.signals import organization_notified
from reviews.models import Flag, Notification
from reviews.notify import notify_organization
from reviews.services import flag_comment, flag_decide, flag_raise
from tests.people import PASSWORD, make_people, open_round, set_phase, tar_gz_of, token_for

pytestmark = pytest.mark.django_db


def _bundle(root: Path, org: str, system: str, benchmark: str, dest: Path) -> Path:
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


def _client(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def _inbox(user) -> list[str]:
    return list(Notification.objects.filter(user=user).order_by("pk").values_list("text", flat=True))


@pytest.fixture
def review(demo_tree, tmp_path, django_capture_on_commit_callbacks):
    """Acme (alice) and Zeta (carol) submitted; the round is in review; carol reviews for Zeta."""
    root, manifest = demo_tree
    demo = root / manifest.round("demo-2024a").folder
    people = make_people()
    membership_add(user=people.carol, organization=people.zeta, role=Membership.Role.REVIEWER)
    round_ = open_round()
    round_.chairs.add(people.chair)
    with django_capture_on_commit_callbacks(execute=True):
        _upload(people.alice, _bundle(demo, "Larkspur_Compute", "atlas_lx4_n1", "bert", tmp_path / "a"), round_.slug)
        _upload(people.carol, _bundle(demo, "Tessellate_Cloud", "tc2-accel-8x32", "bert", tmp_path / "z"),
                round_.slug)
    set_phase(round_, "review")
    return people, round_, Result.objects.current().get(organization=people.acme)


def test_a_verdict_is_on_the_page_as_in_the_mail(review) -> None:
    people, _, acme = review
    [verdict] = [t for t in _inbox(people.alice) if "Submission #" in t]
    assert f"Submission #{acme.submission_id}" in verdict and "verified" in verdict
    # bob is a member of acme too (a reviewer): the organization's members hear it, and so does the mailbox.
    assert any("Submission #" in t for t in _inbox(people.bob))
    mailed = [m for m in mail.outbox if f"submission #{acme.submission_id}" in m.subject]
    assert mailed and sorted(mailed[0].to) == ["alice@example.org", "bob@example.org"]


def test_a_flag_on_their_result_notifies_the_flagged_organization(review, django_capture_on_commit_callbacks):
    people, _, acme = review
    with django_capture_on_commit_callbacks(execute=True):
        flag = flag_raise(actor=people.carol, result=acme, rule="rcp", description="too fast")
    assert any("was flagged: rcp" in t for t in _inbox(people.alice))
    assert Notification.objects.filter(user=people.alice, url=flag.get_absolute_url()).exists()
    assert not any("was flagged" in t for t in _inbox(people.carol))  # the raiser is not told of their own flag


def test_an_answer_notifies_the_raising_organization(review, django_capture_on_commit_callbacks) -> None:
    people, _, acme = review
    with django_capture_on_commit_callbacks(execute=True):
        flag = flag_raise(actor=people.carol, result=acme, rule="rcp", description="too fast")
        flag_comment(actor=people.alice, flag=flag, body="It converges as logged.")
    assert any(f"New answer on flag #{flag.pk}" in t for t in _inbox(people.carol))


def test_a_decision_names_the_chair_and_reaches_both_sides(review, django_capture_on_commit_callbacks) -> None:
    people, _, acme = review
    with django_capture_on_commit_callbacks(execute=True):
        flag = flag_raise(actor=people.carol, result=acme, rule="rcp", description="too fast")
        flag_decide(actor=people.chair, flag=flag, outcome=Flag.Outcome.REJECTED, note="It converges as logged.")
    for user in (people.alice, people.carol):
        [decided] = [t for t in _inbox(user) if "decided" in t]
        assert "decided by chair chair" in decided and "Rejected" in decided
    assert any("decided by chair chair" in m.subject and "It converges as logged." in m.body for m in mail.outbox)


def test_apps_below_reviews_notify_through_the_signal(review) -> None:
    """What runners (a reproduction's verdict) and ingest send arrives like any other notification."""
    people, _, acme = review
    mail.outbox.clear()
    organization_notified.send(sender=object, organization=people.acme, text="Reproduction #3: converged",
                               url=acme.get_absolute_url(), detail="7 of 7 runs reached the target")
    assert "Reproduction #3: converged" in _inbox(people.alice)
    assert [m.subject for m in mail.outbox] == ["[Podium] Reproduction #3: converged"]
    assert "7 of 7 runs" in mail.outbox[0].body


def test_a_user_without_an_address_still_gets_the_notification() -> None:
    people = make_people()
    people.alice.email = ""
    people.alice.save(update_fields=["email"])
    told = notify_organization(organization=people.acme, text="hello", url="/x/")
    assert told == 2 and _inbox(people.alice) == ["hello"]
    assert mail.outbox[0].to == ["bob@example.org"]


def test_hostile_text_is_cut_to_the_column_and_escaped_on_the_page() -> None:
    people = make_people()
    notify_organization(organization=people.acme, text="<script>alert(1)</script>" + "x" * 1000,
                        url="/results/1/")
    [text] = _inbox(people.alice)
    assert len(text) == 300
    page = _client(people.alice).get("/notifications/").content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page


def test_the_unread_count_drops_to_zero_once_the_page_is_seen() -> None:
    people = make_people()
    notify_organization(organization=people.acme, text="one", url="")
    notify_organization(organization=people.acme, text="two", url="")
    alice = _client(people.alice)
    assert alice.get("/submissions/").context["unread_notifications"] == 2
    page = alice.get("/notifications/")
    assert page.context["unread_notifications"] == 0
    assert page.content.decode().count('class="unread"') == 2  # marked on the page that marks them read
    assert alice.get("/submissions/").context["unread_notifications"] == 0
    assert _client(people.bob).get("/submissions/").context["unread_notifications"] == 2  # bob has not looked


def test_visitors_get_no_unread_count(client) -> None:
    assert "unread_notifications" not in client.get("/").context


def test_the_notifications_page_needs_a_sign_in(client) -> None:
    response = client.get("/notifications/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_reproduction_verdict_reaches_the_result_organization() -> None:
    """runners sends the signal when a job is judged: the page and the mailbox hear of it as of any event."""
    from django.contrib.auth import get_user_model

    from runners import services as runner_services
    from runners.models import ReproductionJob
    from tests.runners.test_agent_api import CPU, _agent, _claim, _complete, _result

    result = _result(accelerators=0, model="")
    member = get_user_model().objects.create_user("member", email="member@example.org", password=PASSWORD)
    membership_add(user=member, organization=result.organization, role=Membership.Role.REVIEWER)
    operator = get_user_model().objects.create_user("ops", is_staff=True)
    job = runner_services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    client, _ = _agent(operator, name="cpu-1")
    mail.outbox.clear()
    assert _complete(client, _claim(client, CPU)).status_code == 200  # judged on commit: a crash, "failed"

    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED
    [text] = _inbox(member)
    assert text == f"Convergence reproduction #{job.pk} of {result.system_name} / {result.benchmark_key}: failed " \
        "(runner cpu-1)"
    assert Notification.objects.get(user=member).url == job.get_absolute_url()
    [message] = mail.outbox
    assert message.subject == f"[Podium] {text}" and "exit code 1" in message.body
    assert _inbox(operator) == []  # not a member: operators watch their own page


def test_a_finished_resubmission_tells_the_flags_raiser_and_an_ordinary_one_joins_nothing(
        django_capture_on_commit_callbacks) -> None:
    """reviews.services.on_submission_finished runs after every verification: it asks for the ids of the
    borrowings and flags the submission answers, in one statement, and reads their rows (five joined models) only
    when there are some."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from reviews.services import on_submission_finished
    from tests.factories import OrganizationFactory, ResultFactory, SubmissionFactory

    raiser, submitter = OrganizationFactory(), OrganizationFactory()
    member = get_user_model().objects.create_user("raiser-member", password=PASSWORD)
    membership_add(user=member, organization=raiser, role=Membership.Role.SUBMITTER)
    result = ResultFactory(organization=submitter)
    ordinary = SubmissionFactory(organization=submitter, round=result.round)
    with CaptureQueriesContext(connection) as seen:
        on_submission_finished(submission=ordinary)
    assert len(seen.captured_queries) == 1
    assert not any("JOIN" in query["sql"] for query in seen.captured_queries)
    assert not Notification.objects.exists()

    answer = SubmissionFactory(organization=submitter, round=result.round)
    flag = Flag.objects.create(round=result.round, result=result, raised_by=member, raised_by_organization=raiser,
                               rule="rcp", description="too fast", resubmission=answer)
    with django_capture_on_commit_callbacks(execute=True):
        on_submission_finished(submission=answer)
    assert list(Notification.objects.filter(user=member).values_list("text", flat=True)) == [
        f"Flag #{flag.pk}: the resubmission is verified"]


def test_a_verdicts_notification_counts_its_own_results_and_error_findings_in_one_statement() -> None:
    """The verdict's mail says how many results and error findings it has: those of this submission only (not its
    warnings, not another upload's), counted by one statement (ingest.services.submissions._verdict_counts), and
    the members are read and told by one statement each."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from ingest.services.submissions import submission_notify
    from tests.factories import FindingFactory, ResultFactory, SubmissionFactory

    first = ResultFactory()
    submission = first.submission
    second = ResultFactory(system=first.system, submission=submission, benchmark__key="bert")
    FindingFactory(result=first)
    FindingFactory(result=None, submission=submission, rule="layout")  # the bundle's own, beside no result
    FindingFactory(result=second, severity="warning")
    elsewhere = ResultFactory(system=first.system, benchmark__key="ssd")  # another upload of the organization
    FindingFactory(result=elsewhere)
    member = get_user_model().objects.create_user("counted", email="counted@example.org", password=PASSWORD)
    membership_add(user=member, organization=submission.organization, role=Membership.Role.SUBMITTER)
    get_user_model().objects.create_user("outsider", email="outsider@example.org", password=PASSWORD)
    mail.outbox.clear()

    finished = Submission.objects.select_related("round", "organization").get(pk=submission.pk)
    with CaptureQueriesContext(connection) as seen:
        submission_notify(submission=finished)
    assert len(seen.captured_queries) == 3  # the counts, the members, the notifications
    [message] = mail.outbox
    assert message.to == ["counted@example.org"]
    assert "2 result(s); 2 error finding(s)." in message.body
    assert Notification.objects.filter(user=member).count() == 1

    empty = SubmissionFactory(organization=submission.organization, round=submission.round)
    mail.outbox.clear()
    submission_notify(submission=Submission.objects.select_related("round", "organization").get(pk=empty.pk))
    assert "0 result(s); 0 error finding(s)." in mail.outbox[0].body


def test_what_a_finished_submission_answers_is_read_in_one_statement() -> None:
    """reviews.services._waiting_on: the borrowings still pending on the submission and the flags it answers, and
    nothing else (a decided borrowing, another submission's flag)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from reviews.models import Borrowing
    from reviews.services import _waiting_on
    from tests.factories import ResultFactory, SubmissionFactory

    source = ResultFactory()
    entry = ResultFactory(system__round=source.round, benchmark__key="bert")
    other_entry = ResultFactory(system__round=source.round, benchmark__key="ssd")
    chair = get_user_model().objects.create_user("chair-of-it", password=PASSWORD)
    submission = SubmissionFactory(organization=entry.organization, round=source.round)
    elsewhere = SubmissionFactory(organization=entry.organization, round=source.round)

    def borrowing(of: Result, state: str) -> Borrowing:
        return Borrowing.objects.create(round=source.round, organization=of.organization, system_slug=of.system_slug,
                                        benchmark_key=of.benchmark_key, entry=of, source=source,
                                        submission=submission, created_by=chair, state=state)

    pending = borrowing(entry, Borrowing.State.PENDING)
    borrowing(other_entry, Borrowing.State.ACCEPTED)
    answered = Flag.objects.create(round=source.round, result=entry, raised_by=chair, rule="rcp",
                                   description="too fast", resubmission=submission)
    Flag.objects.create(round=source.round, result=entry, raised_by=chair, rule="seeds", description="same seeds",
                        resubmission=elsewhere)

    with CaptureQueriesContext(connection) as seen:
        assert _waiting_on(submission.pk) == ([pending.pk], [answered.pk])
    assert len(seen.captured_queries) == 1
    assert _waiting_on(elsewhere.pk)[0] == []
    assert _waiting_on(SubmissionFactory().pk) == ([], [])
