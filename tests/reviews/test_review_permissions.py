"""Who may do what in a round's review: every persona against every review page and endpoint, per phase.

Acme (alice submits, bob reviews) and Zeta (carol submits and reviews) each upload a bert and a resnet
result once for the module; Omega (dave) submits nothing; `chair` chairs the round; `staff` is a site
admin, whom `reviews.access.is_chair` treats as a chair of every round. carol has raised two flags on
Acme's results: one still undecided (on bert) and one the chair rejected (on resnet), each with a
public and a private comment. Each test moves the round into a phase and tries one action as one
persona inside its own savepoint, so what it writes is rolled back.

The expected rules are written out below, independently of `reviews.access` and `ingest.visibility`:
- a flag is seen by whoever sees its result: Acme's members always, carol and the chair during
  review, everyone after publication, except that an undecided flag keeps its result (and so the
  flag) out of the public record; the chair keeps seeing the round after publication;
- flags are raised only during review, by a reviewer of another submitting organization or a chair;
- only Acme's submitters and admins (alice, not bob the reviewer) answer, resubmit and borrow;
  resubmitting and borrowing are uploads, which the round takes while open or, for these two,
  during review;
- the two organizations involved and the chairs comment; only chairs decide and mark a comment
  private; private comments are read by the chairs and the members of the two organizations;
- the chairs' dashboard answers 404 to everyone else;
- a refusal tells a visitor who may see the flag why (403, or a redirect with an error message),
  and anyone else nothing (404 or the login page), with none of the flag's text in the body.

In the open phase the flags exist only as they would after a chair moved the deadline back.
"""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.contrib.messages import get_messages
from django.db import transaction
from django.http import HttpResponse
from django.test import Client, TestCase, override_settings
from rest_framework.test import APIClient

from accounts.models import Membership
from accounts.services import membership_add
from catalog.models import Round
from ingest.models import Result, Submission
from reviews.models import Borrowing, Comment, Flag, Notification
from tests.people import People, make_people, open_round, set_phase, tar_gz_of, token_for

pytestmark = pytest.mark.django_db

OPEN, REVIEW, PUBLISHED = Round.Phase.OPEN, Round.Phase.REVIEW, Round.Phase.PUBLISHED
PHASES = [OPEN, REVIEW, PUBLISHED]
PERSONAS = ["alice", "bob", "carol", "dave", "chair", "anonymous", "staff"]
LOGIN = "/accounts/login/"

# --- the rules, written out --------------------------------------------------------------------------

ACME = {"alice", "bob"}  # members of the flagged results' organization
ANSWERERS = {"alice"}  # Acme's submitters and admins; bob only reviews
CHAIRS = {"chair", "staff"}
RAISERS = {"carol"} | CHAIRS  # carol reviews for Zeta, which submitted to the round
COMMENTERS = ANSWERERS | {"carol"} | CHAIRS  # the two organizations involved (bob reviews, he does not answer)
PRIVATE_READERS = ACME | {"carol"} | CHAIRS


def sees(phase: str, persona: str, *, undecided: bool, organization: str = "acme") -> bool:
    """Whether `persona` sees an Acme (or Zeta) result, and so its flags, in `phase`."""
    members = ACME if organization == "acme" else {"carol"}
    if persona in members or persona == "staff":
        return True
    if phase == PUBLISHED:
        return persona == "chair" or not undecided
    return phase == REVIEW and persona in ACME | {"carol", "chair"}


def accepts_answer_uploads(phase: str) -> bool:
    return phase in (OPEN, REVIEW)


# --- one world for the module ------------------------------------------------------------------------

@dataclass(frozen=True)
class Texts:
    """A flag's text, each piece unique, so that a response that shows any of it is caught."""

    rule: str
    description: str
    public: str
    private: str

    @property
    def all(self) -> tuple[str, ...]:
        return (self.rule, self.description, self.public, self.private)


HELD = Texts("rcp/held-Q7", "Converges too early on every run (held Q7).", "Zeta: see run 3 (public Q7P).",
             "Chair: asked Zeta for its logs (private Q7X).")
DECIDED = Texts("seed/decided-R3", "Seeds repeat across runs (decided R3).", "Acme: seeds differ (public R3P).",
                "Chair: checked the seeds (private R3X).")


@dataclass(frozen=True)
class World:
    people: People = field(repr=False)
    round: Round
    held: int  # undecided flag on Acme's bert result
    decided: int  # rejected flag on Acme's resnet result
    acme_bert: int
    acme_resnet: int
    zeta_resnet: int
    borrowing: int  # a pending borrowing of Acme's bert entry
    tokens: dict[tuple[str, str], str] = field(repr=False)  # (persona, scope) → secret
    resubmission: bytes = field(repr=False)  # Acme's bert again, alone: a new bundle
    borrowed: bytes = field(repr=False)  # Acme's resnet again, alone

    def user(self, persona: str) -> object | None:
        return None if persona == "anonymous" else getattr(self.people, persona)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("review-permissions-store")


@pytest.fixture(autouse=True)
def _isolated_storage(settings, store: Path) -> None:
    """Overrides the per-test store of tests/conftest.py: the module's bundles must outlive one test."""
    settings.PODIUM_BUNDLE_DIR = store / "bundles"
    settings.PODIUM_SCRATCH_DIR = store / "scratch"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _folder(source_org: Path, system: str, benchmarks: list[str], target: Path) -> Path:
    folder = target / source_org.name
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(source_org / "systems" / f"{system}.json", folder / "systems" / f"{system}.json")
    for benchmark in benchmarks:
        shutil.copytree(source_org / "results" / system / benchmark, folder / "results" / system / benchmark)
    return folder


def _named(data: bytes, name: str = "bundle.tar.gz") -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = name
    return handle


def _upload(user: object, round_: Round, data: bytes) -> Submission:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user, 'submit')}")
    # Inside the module's transaction nothing commits, so run the queued verification by hand.
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = client.post("/api/v1/submissions/", {"round": round_.slug, "bundle": _named(data)},
                               format="multipart")
    assert response.status_code == 201, response.content
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.state == Submission.State.VERIFIED, submission.state
    return submission


def _flag(round_: Round, result: Result, people: People, texts: Texts, *, decided: bool) -> Flag:
    flag = Flag.objects.create(round=round_, result=result, raised_by=people.carol,
                               raised_by_organization=people.zeta, rule=texts.rule, description=texts.description)
    Comment.objects.create(flag=flag, author=people.carol, organization=people.zeta, body=texts.public)
    Comment.objects.create(flag=flag, author=people.chair, body=texts.private, private=True)
    if decided:
        Flag.objects.filter(pk=flag.pk).update(state=Flag.State.RESOLVED, outcome=Flag.Outcome.REJECTED,
                                               decided_by=people.chair,
                                               decision_note="No issue.")
    return flag


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, demo_tree, tmp_path_factory: pytest.TempPathFactory,
          store: Path) -> Iterator[World]:
    """Built once in a transaction that is rolled back after the module (each test nests a savepoint)."""
    from config.celery import app

    root, manifest = demo_tree
    demo = root / manifest.round("demo-2024a").folder
    work = tmp_path_factory.mktemp("review-bundles")
    acme = tar_gz_of(_folder(demo / "Larkspur_Compute", "atlas_lx4_n1", ["bert", "resnet"], work / "acme"))
    zeta = tar_gz_of(_folder(demo / "Tessellate_Cloud", "tc2-accel-8x32", ["bert", "resnet"], work / "zeta"))
    resubmission = tar_gz_of(_folder(demo / "Larkspur_Compute", "atlas_lx4_n1", ["bert"], work / "resubmit"))
    borrowed = tar_gz_of(_folder(demo / "Larkspur_Compute", "atlas_lx4_n1", ["resnet"], work / "borrow"))
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True  # tests/conftest.py sets it per test, after this module fixture
    atomic = transaction.atomic()
    with django_db_blocker.unblock(), override_settings(
        PODIUM_BUNDLE_DIR=store / "bundles", PODIUM_SCRATCH_DIR=store / "scratch",
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
    ):
        atomic.__enter__()
        try:
            people = make_people()
            membership_add(user=people.carol, organization=people.zeta, role=Membership.Role.REVIEWER)
            round_ = open_round()
            round_.chairs.add(people.chair)
            acme_submission = _upload(people.alice, round_, acme)
            zeta_submission = _upload(people.carol, round_, zeta)
            set_phase(round_, REVIEW)
            acme_bert = acme_submission.results.get(benchmark_key="bert")
            acme_resnet = acme_submission.results.get(benchmark_key="resnet")
            zeta_bert = zeta_submission.results.get(benchmark_key="bert")
            zeta_resnet = zeta_submission.results.get(benchmark_key="resnet")
            held = _flag(round_, acme_bert, people, HELD, decided=False)
            decided = _flag(round_, acme_resnet, people, DECIDED, decided=True)
            borrowing = Borrowing.objects.create(
                round=round_, organization=people.acme, system_slug=acme_bert.system_slug, benchmark_key="bert",
                entry=acme_bert, source=zeta_bert, created_by=people.alice)
            tokens = {(persona, scope): token_for(getattr(people, persona), scope)
                      for persona in PERSONAS if persona != "anonymous" for scope in ("read", "submit")}
            built = World(people=people, round=round_, held=held.pk, decided=decided.pk, acme_bert=acme_bert.pk,
                          acme_resnet=acme_resnet.pk, zeta_resnet=zeta_resnet.pk, borrowing=borrowing.pk,
                          tokens=tokens, resubmission=resubmission, borrowed=borrowed)
        except BaseException:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)
            raise
        finally:
            app.conf.task_always_eager = eager
    yield built
    with django_db_blocker.unblock():
        transaction.set_rollback(True)
        atomic.__exit__(None, None, None)


# --- clients and common assertions -------------------------------------------------------------------

def web(world: World, persona: str) -> Client:
    client = Client()
    user = world.user(persona)
    if user is not None:
        client.force_login(user)
    return client


def api(world: World, persona: str, scope: str = "read") -> APIClient:
    client = APIClient()
    if persona != "anonymous":
        client.credentials(HTTP_AUTHORIZATION=f"Token {world.tokens[persona, scope]}")
    return client


def assert_no_leak(response: HttpResponse, *texts: str) -> None:
    body = response.content.decode(errors="replace")
    leaked = [text for text in texts or (*HELD.all, *DECIDED.all) if text in body]
    assert not leaked, f"a refusal ({response.status_code}) shows {leaked}"


def errors(response: HttpResponse) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request) if m.level_tag == "error"]


def assert_page_refused(response: HttpResponse, persona: str, *, visible: bool, back_to: str) -> None:
    """A form post refused: the login page, a 404 that confirms nothing, or back with the reason."""
    if persona == "anonymous":
        assert response.status_code == 302 and response["Location"].startswith(LOGIN), response
    elif not visible:
        assert response.status_code == 404, response
    else:
        assert response.status_code == 302 and response["Location"] == back_to, response
        assert errors(response), "the refusal should say why"
    assert_no_leak(response)


def assert_api_refused(response: HttpResponse, persona: str, *, visible: bool) -> None:
    if persona == "anonymous":
        assert response.status_code == 401, response  # "sign in or send a token"
    else:
        assert response.status_code == (403 if visible else 404), (response.status_code, response.content)
    assert_no_leak(response)


# --- the actions -------------------------------------------------------------------------------------

Check = Callable[[World, str, str, bool], None]


def _flag_id(world: World, which: str) -> int:
    return world.held if which == "undecided" else world.decided


def _texts(which: str) -> Texts:
    return HELD if which == "undecided" else DECIDED


def view_page(which: str) -> Check:
    def check(world: World, phase: str, persona: str, allowed: bool) -> None:
        texts = _texts(which)
        response = web(world, persona).get(f"/flags/{_flag_id(world, which)}/")
        if allowed:
            body = response.content.decode()
            assert response.status_code == 200
            assert texts.description in body and texts.public in body
        else:
            assert response.status_code == 404
            assert_no_leak(response)
    return check


def api_detail(which: str) -> Check:
    def check(world: World, phase: str, persona: str, allowed: bool) -> None:
        texts = _texts(which)
        response = api(world, persona).get(f"/api/v1/flags/{_flag_id(world, which)}/")
        if allowed:
            assert response.status_code == 200
            data = response.json()
            assert data["description"] == texts.description
            assert texts.public in [c["body"] for c in data["comments"]]
        else:
            assert response.status_code == 404
            assert_no_leak(response)
    return check


def api_list(which: str) -> Check:
    def check(world: World, phase: str, persona: str, allowed: bool) -> None:
        response = api(world, persona).get("/api/v1/flags/")
        assert response.status_code == 200
        listed = {flag["id"] for flag in response.json()}
        assert (_flag_id(world, which) in listed) is allowed, listed
        if not allowed:
            assert_no_leak(response, *_texts(which).all)
    return check


def see_private_page(world: World, phase: str, persona: str, allowed: bool) -> None:
    for which in ("undecided", "decided"):
        if not sees(phase, persona, undecided=which == "undecided"):
            continue  # the flag itself is hidden: view_page covers that
        texts = _texts(which)
        body = web(world, persona).get(f"/flags/{_flag_id(world, which)}/").content.decode()
        assert texts.public in body
        assert (texts.private in body) is allowed, which


def see_private_api(world: World, phase: str, persona: str, allowed: bool) -> None:
    listed = {flag["id"]: flag for flag in api(world, persona).get("/api/v1/flags/").json()}
    for which in ("undecided", "decided"):
        if not sees(phase, persona, undecided=which == "undecided"):
            continue
        texts = _texts(which)
        detail = api(world, persona).get(f"/api/v1/flags/{_flag_id(world, which)}/").json()
        for flag in (detail, listed[_flag_id(world, which)]):
            bodies = [c["body"] for c in flag["comments"]]
            assert texts.public in bodies
            assert (texts.private in bodies) is allowed, which


NEW_RULE, NEW_DESCRIPTION = "compliance/new-flag", "A new flag's description."


def raise_page(world: World, phase: str, persona: str, allowed: bool) -> None:
    result = f"/results/{world.acme_resnet}/"
    response = web(world, persona).post(f"{result}flags/new/", {"rule": NEW_RULE, "description": NEW_DESCRIPTION})
    flag = Flag.objects.filter(rule=NEW_RULE).first()
    if allowed:
        assert flag is not None and response.status_code == 302 and response["Location"] == f"/flags/{flag.pk}/"
        assert flag.raised_by_organization == (world.people.zeta if persona == "carol" else None)
    else:
        assert flag is None
        assert_page_refused(response, persona, visible=sees(phase, persona, undecided=False), back_to=result)


def raise_api(world: World, phase: str, persona: str, allowed: bool) -> None:
    response = api(world, persona, "submit").post(
        "/api/v1/flags/", {"result": world.acme_resnet, "rule": NEW_RULE, "description": NEW_DESCRIPTION},
        format="json")
    if allowed:
        assert response.status_code == 201, response.content
        assert Flag.objects.filter(pk=response.json()["id"], rule=NEW_RULE).exists()
    else:
        assert not Flag.objects.filter(rule=NEW_RULE).exists()
        assert_api_refused(response, persona, visible=sees(phase, persona, undecided=False))


def raise_form(world: World, phase: str, persona: str, allowed: bool) -> None:
    """The result page offers the form exactly to those who may raise a flag."""
    response = web(world, persona).get(f"/results/{world.acme_resnet}/")
    if not sees(phase, persona, undecided=False):
        assert response.status_code == 404 and not allowed
        return
    assert response.status_code == 200
    assert ('id="flag-form"' in response.content.decode()) is allowed


NEW_COMMENT = "A new remark in the thread."


def comment_page(private: bool) -> Check:
    def check(world: World, phase: str, persona: str, allowed: bool) -> None:
        flag = f"/flags/{world.held}/"
        data = {"body": NEW_COMMENT, **({"private": "on"} if private else {})}
        response = web(world, persona).post(f"{flag}comment/", data)
        comment = Comment.objects.filter(body=NEW_COMMENT).first()
        state = Flag.objects.get(pk=world.held).state
        if allowed:
            assert comment is not None and comment.private is private
            assert response.status_code == 302 and response["Location"] == flag
            # An answer from the flagged organization moves the flag on; anyone else's remark does not.
            assert state == (Flag.State.ANSWERED if persona in ANSWERERS else Flag.State.OPEN)
        else:
            assert comment is None and state == Flag.State.OPEN
            assert_page_refused(response, persona, visible=sees(phase, persona, undecided=True), back_to=flag)
    return check


def comment_api(private: bool) -> Check:
    def check(world: World, phase: str, persona: str, allowed: bool) -> None:
        response = api(world, persona, "submit").post(f"/api/v1/flags/{world.held}/comments/",
                                                      {"body": NEW_COMMENT, "private": private}, format="json")
        comment = Comment.objects.filter(body=NEW_COMMENT).first()
        if allowed:
            assert response.status_code == 201, response.content
            assert comment is not None and comment.private is private
            expected = Flag.State.ANSWERED if persona in ANSWERERS else Flag.State.OPEN
            assert Flag.objects.get(pk=world.held).state == expected
        else:
            assert comment is None and Flag.objects.get(pk=world.held).state == Flag.State.OPEN
            assert_api_refused(response, persona, visible=sees(phase, persona, undecided=True))
    return check


def decide_page(world: World, phase: str, persona: str, allowed: bool) -> None:
    flag = f"/flags/{world.held}/"
    response = web(world, persona).post(f"{flag}decision/", {"outcome": Flag.Outcome.REJECTED, "note": "No issue."})
    decided = Flag.objects.get(pk=world.held)
    if allowed:
        assert response.status_code == 302 and response["Location"] == flag
        assert (decided.state, decided.outcome) == (Flag.State.RESOLVED, Flag.Outcome.REJECTED)
    else:
        assert decided.state == Flag.State.OPEN
        assert_page_refused(response, persona, visible=sees(phase, persona, undecided=True), back_to=flag)


def decide_api(world: World, phase: str, persona: str, allowed: bool) -> None:
    response = api(world, persona, "submit").post(f"/api/v1/flags/{world.held}/decision/",
                                                  {"outcome": Flag.Outcome.REJECTED,
                                                   "note": "No issue."}, format="json")
    if allowed:
        assert response.status_code == 200, response.content
        assert response.json()["state"] == Flag.State.RESOLVED
    else:
        assert Flag.objects.get(pk=world.held).state == Flag.State.OPEN
        assert_api_refused(response, persona, visible=sees(phase, persona, undecided=True))


def offers_forms(world: World, phase: str, persona: str, allowed: bool) -> None:
    """The flag page offers the comment, private and decision forms exactly to those who may use them."""
    response = web(world, persona).get(f"/flags/{world.held}/")
    if not sees(phase, persona, undecided=True):
        assert response.status_code == 404 and not allowed
        return
    body = response.content.decode()
    assert ('id="comment-form"' in body) is (persona in COMMENTERS)
    assert ('name="private"' in body) is (persona in CHAIRS)
    assert ('id="decision-form"' in body) is (persona in CHAIRS)
    assert allowed is (persona in COMMENTERS)


def resubmit_page(world: World, phase: str, persona: str, allowed: bool) -> None:
    flag = f"/flags/{world.held}/"
    before = set(Submission.objects.values_list("pk", flat=True))
    response = web(world, persona).post(f"{flag}resubmit/", {"bundle": _named(world.resubmission)})
    new = Submission.objects.exclude(pk__in=before)
    answered = Flag.objects.get(pk=world.held)
    if allowed:
        # Accepted into verification: stored and queued (the queue runs after a commit that never comes here).
        assert response.status_code == 302 and response["Location"] == flag
        submission = new.get()
        assert (submission.organization, submission.state) == (world.people.acme, Submission.State.RECEIVED)
        assert (answered.resubmission, answered.state) == (submission, Flag.State.ANSWERED)
    else:
        assert not new.exists() and answered.resubmission is None
        assert_page_refused(response, persona, visible=sees(phase, persona, undecided=True), back_to=flag)


def resubmit_form(world: World, phase: str, persona: str, allowed: bool) -> None:
    """The flag page offers the upload exactly when it would be accepted."""
    response = web(world, persona).get(f"/flags/{world.held}/")
    if not sees(phase, persona, undecided=True):
        assert response.status_code == 404 and not allowed
        return
    assert ('id="resubmit-form"' in response.content.decode()) is allowed


def borrow_page(world: World, phase: str, persona: str, allowed: bool) -> None:
    entry = f"/results/{world.acme_resnet}/borrow/"
    client = web(world, persona)
    response = client.post(f"{entry}?source={world.zeta_resnet}",
                           {"source": world.zeta_resnet, "bundle": _named(world.borrowed)})
    borrowing = Borrowing.objects.exclude(pk=world.borrowing).first()
    if allowed:
        assert borrowing is not None and (borrowing.entry_id, borrowing.source_id) == (world.acme_resnet,
                                                                                       world.zeta_resnet)
        assert response.status_code == 302 and response["Location"] == f"/submissions/{borrowing.submission_id}/"
        return
    assert borrowing is None
    if persona in ANSWERERS:
        # alice's own page: outside review Zeta's result is either not offered (open) or refused with a reason.
        assert response.status_code == 200
        body = response.content.decode()
        assert ("Borrowing happens during the review phase" in body) is (phase == PUBLISHED)
    elif persona == "anonymous":
        assert response.status_code == 302 and response["Location"].startswith(LOGIN)
    else:
        assert response.status_code == 404  # not the entry's organization: the page does not exist for them
    assert_no_leak(response)


def borrow_api(world: World, phase: str, persona: str, allowed: bool) -> None:
    response = api(world, persona, "submit").post(
        "/api/v1/borrowings/", {"entry": world.acme_resnet, "source": world.zeta_resnet,
                                "bundle": _named(world.borrowed)}, format="multipart")
    borrowing = Borrowing.objects.exclude(pk=world.borrowing).first()
    if allowed:
        assert response.status_code == 201, response.content
        assert borrowing is not None and borrowing.submission is not None
        return
    assert borrowing is None
    if persona in ANSWERERS:
        # Open: Zeta's result is still embargoed from alice (404); published: borrowing is over (400).
        assert response.status_code == (404 if phase == OPEN else 400), response.content
    else:
        # Whoever does not see both the entry and the source is told neither exists.
        visible = sees(phase, persona, undecided=False) and sees(phase, persona, undecided=False, organization="zeta")
        assert_api_refused(response, persona, visible=visible)


def borrowings_list(world: World, phase: str, persona: str, allowed: bool) -> None:
    response = api(world, persona).get("/api/v1/borrowings/")
    assert response.status_code == 200
    assert (world.borrowing in {b["id"] for b in response.json()}) is allowed


def dashboard(world: World, phase: str, persona: str, allowed: bool) -> None:
    response = web(world, persona).get(f"/rounds/{world.round.slug}/review/")
    if allowed:
        assert response.status_code == 200
        assert HELD.rule in response.content.decode()
    elif persona == "anonymous":
        assert response.status_code == 302 and response["Location"].startswith(LOGIN)
    else:
        assert response.status_code == 404
        assert_no_leak(response)


# action → (check, rule).
ACTIONS: dict[str, tuple[Check, Callable[[str, str], bool]]] = {
    "view_page[undecided]": (view_page("undecided"), lambda ph, p: sees(ph, p, undecided=True)),
    "view_page[decided]": (view_page("decided"), lambda ph, p: sees(ph, p, undecided=False)),
    "api_detail[undecided]": (api_detail("undecided"), lambda ph, p: sees(ph, p, undecided=True)),
    "api_detail[decided]": (api_detail("decided"), lambda ph, p: sees(ph, p, undecided=False)),
    "api_list[undecided]": (api_list("undecided"), lambda ph, p: sees(ph, p, undecided=True)),
    "api_list[decided]": (api_list("decided"), lambda ph, p: sees(ph, p, undecided=False)),
    "see_private_page": (see_private_page, lambda ph, p: p in PRIVATE_READERS and sees(ph, p, undecided=False)),
    "see_private_api": (see_private_api, lambda ph, p: p in PRIVATE_READERS and sees(ph, p, undecided=False)),
    "raise_page": (raise_page, lambda ph, p: ph == REVIEW and p in RAISERS),
    "raise_api": (raise_api, lambda ph, p: ph == REVIEW and p in RAISERS),
    "raise_form": (raise_form, lambda ph, p: ph == REVIEW and p in RAISERS),
    "comment_page": (comment_page(private=False), lambda ph, p: p in COMMENTERS and sees(ph, p, undecided=True)),
    "comment_api": (comment_api(private=False), lambda ph, p: p in COMMENTERS and sees(ph, p, undecided=True)),
    "private_page": (comment_page(private=True), lambda ph, p: p in CHAIRS and sees(ph, p, undecided=True)),
    "private_api": (comment_api(private=True), lambda ph, p: p in CHAIRS and sees(ph, p, undecided=True)),
    "offers_forms": (offers_forms, lambda ph, p: p in COMMENTERS and sees(ph, p, undecided=True)),
    "decide_page": (decide_page, lambda ph, p: p in CHAIRS and sees(ph, p, undecided=True)),
    "decide_api": (decide_api, lambda ph, p: p in CHAIRS and sees(ph, p, undecided=True)),
    "resubmit_page": (resubmit_page, lambda ph, p: p in ANSWERERS and accepts_answer_uploads(ph)),
    "resubmit_form": (resubmit_form, lambda ph, p: p in ANSWERERS and accepts_answer_uploads(ph)),
    "borrow_page": (borrow_page, lambda ph, p: p in ANSWERERS and ph == REVIEW),
    "borrow_api": (borrow_api, lambda ph, p: p in ANSWERERS and ph == REVIEW),
    "borrowings_list": (borrowings_list, lambda ph, p: sees(ph, p, undecided=True)),
    "dashboard": (dashboard, lambda ph, p: p in CHAIRS),
}

# Known application bugs: {(action, phase, persona): reason}. They stay failing until fixed (strict).


def _cases() -> list:
    cases = []
    for action, (_check, rule) in ACTIONS.items():
        for phase in PHASES:
            for persona in PERSONAS:
                key = (action, phase, persona)
                verdict = "allowed" if rule(phase, persona) else "refused"
                cases.append(pytest.param(*key, id=f"{action}-{phase}-{persona}-{verdict}"))
    return cases


@pytest.mark.parametrize(("action", "phase", "persona"), _cases())
def test_review_permission(action: str, phase: str, persona: str, world: World) -> None:
    check, rule = ACTIONS[action]
    set_phase(world.round, phase)
    check(world, phase, persona, rule(phase, persona))


# --- the publication hold and new versions -----------------------------------------------------------

def test_a_resubmission_does_not_release_an_entry_whose_flag_is_undecided(world: World) -> None:
    """After publication the new version of a held entry is as hidden as the flagged one."""
    set_phase(world.round, REVIEW)
    with TestCase.captureOnCommitCallbacks(execute=True):
        web(world, "alice").post(f"/flags/{world.held}/resubmit/", {"bundle": _named(world.resubmission)})
    flag = Flag.objects.select_related("resubmission").get(pk=world.held)
    assert flag.state == Flag.State.ANSWERED and flag.resubmission.state == Submission.State.VERIFIED
    new = flag.resubmission.results.get(benchmark_key="bert")
    assert new.is_current and not Result.objects.get(pk=world.acme_bert).is_current
    set_phase(world.round, PUBLISHED)
    assert web(world, "chair").get(f"/results/{new.pk}/").status_code == 200
    assert web(world, "anonymous").get(f"/results/{world.acme_bert}/").status_code == 404
    assert web(world, "anonymous").get(f"/results/{new.pk}/").status_code == 404, "the new version is public"


def test_a_decision_applies_to_the_version_that_will_be_published(world: World) -> None:
    set_phase(world.round, REVIEW)
    with TestCase.captureOnCommitCallbacks(execute=True):
        web(world, "alice").post(f"/flags/{world.held}/resubmit/", {"bundle": _named(world.resubmission)})
    new = Flag.objects.get(pk=world.held).resubmission.results.get(benchmark_key="bert")
    web(world, "chair").post(f"/flags/{world.held}/decision/", {"outcome": Flag.Outcome.MOVED_TO_OPEN})
    assert Flag.objects.get(pk=world.held).state == Flag.State.RESOLVED
    new.refresh_from_db()
    assert new.is_current and new.division == "open"


def test_a_resubmission_carries_only_the_flagged_entry(world: World, demo_tree, tmp_path: Path) -> None:
    root, manifest = demo_tree
    folder = _folder(root / manifest.round("demo-2024a").folder / "Larkspur_Compute", "atlas_lx4_n1",
                     ["bert", "ssd"], tmp_path)  # ssd: an entry Acme did not submit before the deadline
    set_phase(world.round, REVIEW)
    submissions = Submission.objects.count()
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = web(world, "alice").post(f"/flags/{world.held}/resubmit/", {"bundle": _named(tar_gz_of(folder))},
                                            follow=True)
    assert "may carry only atlas_lx4_n1/bert; the bundle has atlas_lx4_n1/bert, atlas_lx4_n1/ssd" in \
        response.content.decode()
    assert Submission.objects.count() == submissions, "nothing is stored"
    assert not Result.objects.current().filter(organization=world.people.acme, benchmark_key="ssd").exists()
    assert Flag.objects.get(pk=world.held).resubmission is None


def test_a_resubmission_identical_to_an_earlier_upload_is_refused(world: World, demo_tree, tmp_path: Path) -> None:
    set_phase(world.round, REVIEW)
    with TestCase.captureOnCommitCallbacks(execute=True):
        web(world, "alice").post(f"/flags/{world.held}/resubmit/", {"bundle": _named(world.resubmission)})
    first = Flag.objects.get(pk=world.held).resubmission_id
    submissions = Submission.objects.count()
    response = web(world, "alice").post(f"/flags/{world.held}/resubmit/", {"bundle": _named(world.resubmission)},
                                        follow=True)
    assert f"identical to submission #{first}" in response.content.decode()
    assert Submission.objects.count() == submissions
    assert Flag.objects.get(pk=world.held).resubmission_id == first


def test_a_decision_waits_for_the_resubmission_s_verdict(world: World) -> None:
    set_phase(world.round, REVIEW)
    # Not executing the on-commit callbacks: the resubmission stays queued, unverified.
    with TestCase.captureOnCommitCallbacks(execute=False):
        web(world, "alice").post(f"/flags/{world.held}/resubmit/", {"bundle": _named(world.resubmission)})
    assert Flag.objects.get(pk=world.held).resubmission.state == Submission.State.RECEIVED
    response = web(world, "chair").post(f"/flags/{world.held}/decision/", {"outcome": Flag.Outcome.WITHDRAWN},
                                        follow=True)
    assert "still being verified" in response.content.decode()
    assert Flag.objects.get(pk=world.held).state == Flag.State.ANSWERED
    assert not Result.objects.get(pk=world.acme_bert).withdrawn_at


def test_fixed_by_resubmission_needs_a_verified_new_version(world: World, tmp_path: Path, demo_tree) -> None:
    root, manifest = demo_tree
    folder = _folder(root / manifest.round("demo-2024a").folder / "Larkspur_Compute", "atlas_lx4_n1", ["bert"],
                     tmp_path)
    for log in (folder / "results/atlas_lx4_n1/bert").glob("result_*.txt"):  # runs that never stop
        log.write_text("".join(line for line in log.read_text().splitlines(keepends=True) if '"run_stop"' not in line))
    set_phase(world.round, REVIEW)
    with TestCase.captureOnCommitCallbacks(execute=True):
        web(world, "alice").post(f"/flags/{world.held}/resubmit/", {"bundle": _named(tar_gz_of(folder))})
    assert Flag.objects.get(pk=world.held).resubmission.state == Submission.State.NONCOMPLIANT
    response = web(world, "chair").post(f"/flags/{world.held}/decision/", {"outcome": Flag.Outcome.FIXED}, follow=True)
    assert "needs a verified resubmission" in response.content.decode()
    assert Flag.objects.get(pk=world.held).state == Flag.State.ANSWERED


def test_a_borrowing_bundle_with_other_entries_is_refused_and_leaves_nothing(world: World, demo_tree,
                                                                            tmp_path: Path) -> None:
    root, manifest = demo_tree
    folder = _folder(root / manifest.round("demo-2024a").folder / "Larkspur_Compute", "atlas_lx4_n1",
                     ["resnet", "bert"], tmp_path)
    set_phase(world.round, REVIEW)
    submissions, borrowings = Submission.objects.count(), Borrowing.objects.count()
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = web(world, "alice").post(f"/results/{world.acme_resnet}/borrow/",
                                            {"source": world.zeta_resnet, "bundle": _named(tar_gz_of(folder))})
    assert response.status_code == 200  # the borrow page again, with the reason
    assert "may carry only atlas_lx4_n1/resnet" in response.content.decode()
    assert (Submission.objects.count(), Borrowing.objects.count()) == (submissions, borrowings)
    # The refusal did not use up the entry's one borrowing.
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = web(world, "alice").post(f"/results/{world.acme_resnet}/borrow/",
                                            {"source": world.zeta_resnet, "bundle": _named(world.borrowed)})
    borrowing = Borrowing.objects.get(entry_id=world.acme_resnet)
    assert response.status_code == 302 and borrowing.submission is not None
    assert borrowing.state != Borrowing.State.PENDING, "judged once its verification finished"


def test_the_api_takes_a_resubmission_from_the_flagged_organization_only(world: World) -> None:
    set_phase(world.round, REVIEW)
    url = f"/api/v1/flags/{world.held}/resubmission/"
    assert api(world, "anonymous").post(url, {"bundle": _named(world.resubmission)},
                                        format="multipart").status_code == 401
    assert api(world, "alice", "read").post(url, {"bundle": _named(world.resubmission)},
                                            format="multipart").status_code == 403
    refused = api(world, "carol", "submit").post(url, {"bundle": _named(world.resubmission)}, format="multipart")
    assert refused.status_code == 403 and "resubmits" in refused.json()["detail"]
    empty = api(world, "alice", "submit").post(url, {}, format="multipart")
    assert empty.status_code == 400 and "bundle" in empty.json()
    assert Flag.objects.get(pk=world.held).resubmission is None
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = api(world, "alice", "submit").post(url, {"bundle": _named(world.resubmission)},
                                                      format="multipart")
    assert response.status_code == 201, response.content
    body = response.json()
    flag = Flag.objects.get(pk=world.held)
    assert body["id"] == flag.resubmission_id and body["status_url"].endswith(f"/api/v1/submissions/{body['id']}/")
    assert flag.state == Flag.State.ANSWERED


@pytest.mark.parametrize(("persona", "told"), [
    ("alice", {"carol"}),  # an answer goes to the raising organization
    ("carol", {"alice", "bob"}),  # the raiser's comment goes to the flagged organization
    ("chair", {"alice", "bob", "carol"}),  # a chair's comment to both
])
def test_a_comment_notifies_the_other_side(world: World, persona: str, told: set[str]) -> None:
    set_phase(world.round, REVIEW)
    before = set(Notification.objects.values_list("pk", flat=True))
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = web(world, persona).post(f"/flags/{world.held}/comment/", {"body": "See the log, line 12."})
    assert response.status_code == 302
    new = Notification.objects.exclude(pk__in=before).select_related("user")
    assert {n.user.username for n in new} == told
    assert all(n.url == f"/flags/{world.held}/" for n in new)


# --- the publication hold on every read path ----------------------------------------------------------
# Published, Acme's bert entry held by the undecided flag: its result must not show on any page, API
# endpoint, export, chart, report or count to those who may not see it, while Acme's resnet result (same
# submission, same system) stays public. The system and the submission stay public through resnet and
# list only what the visitor may see.

def _held_paths(world: World) -> dict[str, str]:
    bert = Result.objects.select_related("round").get(pk=world.acme_bert)
    slug = bert.round.slug
    return {
        "result": f"/results/{bert.pk}/",
        "runs_chart": f"/results/{bert.pk}/runs.json",
        "convergence_chart": f"/results/{bert.pk}/convergence.json",
        "run_log": f"/results/{bert.pk}/runs/0/log",
        "compare": f"/compare/?ids={bert.pk}&ids={world.acme_resnet}",
        "api_result": f"/api/v1/results/{bert.pk}/",
        # Lists, pages and reports that hold other results too: the held one must not be among them.
        "system": f"/systems/{bert.system_id}/",
        "submission": f"/submissions/{bert.submission_id}/",
        "submission_status": f"/submissions/{bert.submission_id}/status/",
        "submission_report": f"/submissions/{bert.submission_id}/report.json",
        "round_table": f"/rounds/{slug}/",
        "export_csv": f"/rounds/{slug}/export.csv",
        "export_json": f"/rounds/{slug}/export.json",
        "scale_chart": f"/rounds/{slug}/charts/scale.json?benchmark=bert&division={bert.division or 'closed'}",
        "history_chart": f"/benchmarks/bert/history.json?division={bert.division or 'closed'}&scale=1",
    }


DETAIL_PATHS = ("result", "runs_chart", "convergence_chart", "run_log", "compare", "api_result")


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("path", [*DETAIL_PATHS, "system", "submission", "submission_status", "submission_report",
                                  "round_table", "export_csv", "export_json", "scale_chart", "history_chart"])
def test_a_held_result_shows_on_no_public_path(world: World, persona: str, path: str) -> None:
    set_phase(world.round, PUBLISHED)
    allowed = sees(PUBLISHED, persona, undecided=True)
    url = _held_paths(world)[path]
    client = api(world, persona) if url.startswith("/api/") else web(world, persona)
    response = client.get(url)
    marker = f"/results/{world.acme_bert}/"
    if path in DETAIL_PATHS:
        assert response.status_code == (200 if allowed else 404), (url, response.status_code)
        if not allowed:
            # The not-found page offers to sign in and come back (`?next=` echoes the address asked for, as it
            # does for a result that never existed): that echo is no leak, anything else naming the result is.
            body = re.sub(r'\?next=[^"]*"', '"', response.content.decode())
            assert marker not in body
        return
    assert response.status_code == 200, (url, response.status_code)  # public through Acme's resnet
    body = (b"".join(response.streaming_content) if response.streaming else response.content).decode()  # exports stream
    if path == "history_chart":  # draws the fastest of each round only, which need not be Acme's
        assert allowed or marker not in body, url
        return
    assert (marker in body) is allowed, url
    assert f"/results/{world.acme_resnet}/" in body or path.endswith("chart"), url


@pytest.mark.parametrize("persona", PERSONAS)
def test_a_held_result_is_in_no_public_list_or_count(world: World, persona: str) -> None:
    set_phase(world.round, PUBLISHED)
    allowed = sees(PUBLISHED, persona, undecided=True)
    client = api(world, persona)
    results = {row["id"] for row in client.get("/api/v1/results/?all_versions=1").json()["results"]}
    assert (world.acme_bert in results) is allowed and world.acme_resnet in results
    runs = {row["result"] for row in client.get("/api/v1/runs/").json()["results"]}
    assert (world.acme_bert in runs) is allowed and world.acme_resnet in runs
    findings = {row["result"] for row in client.get("/api/v1/findings/?page_size=500").json()["results"]}
    assert world.acme_bert not in findings or allowed
    acme = client.get(f"/api/v1/organizations/{world.people.acme.slug}/").json()
    assert acme["result_count"] == (2 if allowed else 1)  # a count with the held result gives it away
    home = web(world, persona).get("/").content.decode()
    row = re.search(rf'href="/rounds/{re.escape(world.round.slug)}/".*?</tr>', home, re.S)
    assert row is not None
    assert re.findall(r'<td class="num">(\d+)</td>', row.group(0)) == ["2", "4" if allowed else "3"]
    if persona != "anonymous":
        report = client.get(f"/api/v1/submissions/{Result.objects.get(pk=world.acme_bert).submission_id}/").json()
        assert (world.acme_bert in {r["id"] for r in report["results"]}) is allowed
