"""The embargo, end to end: every persona against every page and API endpoint, in every phase.

One Acme result (alice uploads it) and one Zeta result (carol uploads it) are verified once for the
module; each test then moves the round into a phase and asks one endpoint as one persona. The rule
under test is `ingest.visibility`: published → everyone; before that the own organization; in review
also the round's other submitting organizations and its chairs; staff always.
"""

from __future__ import annotations

import datetime
import io
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client, TestCase, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import api_token_revoke
from catalog.models import Round
from ingest.models import Result, Submission
from leaderboard.templatetags.podium import minutes
from tests.people import People, make_people, open_round, set_phase, tar_gz_of, token_for

pytestmark = pytest.mark.django_db

PHASES = [Round.Phase.OPEN, Round.Phase.REVIEW, Round.Phase.PUBLISHED]
PERSONAS = ["owner", "co_member", "other_submitter", "non_submitter", "chair", "anonymous", "staff"]
# Persona → the username in tests.people (None: not signed in).
USERNAMES = {"owner": "alice", "co_member": "bob", "other_submitter": "carol", "non_submitter": "dave",
             "chair": "chair", "anonymous": None, "staff": "staff"}
MEMBERS = {"acme": {"owner", "co_member"}, "zeta": {"other_submitter"}}
SUBMITTING = MEMBERS["acme"] | MEMBERS["zeta"]


def sees(phase: str, persona: str, organization: str = "acme") -> bool:
    """The rule, written out independently of the application's query."""
    if phase == Round.Phase.PUBLISHED or persona == "staff" or persona in MEMBERS[organization]:
        return True
    return phase == Round.Phase.REVIEW and persona in SUBMITTING | {"chair"}


def round_page_opens(phase: str, persona: str) -> bool:
    """The round page itself (not its rows): published, or the visitor submits to or chairs it."""
    return phase == Round.Phase.PUBLISHED or persona in SUBMITTING | {"chair", "staff"}


# --- one verified upload per organization, shared by the whole module ---------------------------------

@dataclass(frozen=True)
class World:
    people: People
    round: Round
    submission_id: int
    result_id: int
    system_id: int
    zeta_submission_id: int
    names: tuple[str, ...]  # the Acme system's slug and name
    scores: tuple[str, ...]  # the Acme score as the pages and the API print it
    sha256: str
    zeta_system_name: str
    log_bytes: bytes

    @property
    def leaks(self) -> tuple[str, ...]:
        """Strings that only a response showing the Acme result can contain."""
        return (*self.names, *self.scores, self.sha256)

    def user(self, persona: str) -> object | None:
        name = USERNAMES[persona]
        return None if name is None else getattr(self.people, name)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("permissions-store")


@pytest.fixture(autouse=True)
def _isolated_storage(settings, store: Path) -> None:
    """Overrides the per-test store of tests/conftest.py: the module's bundles must outlive one test."""
    settings.PODIUM_BUNDLE_DIR = store / "bundles"
    settings.PODIUM_SCRATCH_DIR = store / "scratch"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _bundle(source_org: Path, system: str, benchmark: str, target: Path) -> bytes:
    folder = target / source_org.name
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(source_org / "systems" / f"{system}.json", folder / "systems" / f"{system}.json")
    shutil.copytree(source_org / "results" / system / benchmark, folder / "results" / system / benchmark)
    return tar_gz_of(folder)


def _upload(user: object, round_: Round, data: bytes) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user, 'submit')}")
    # Inside the module's transaction nothing commits, so run the queued verification by hand.
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = client.post("/api/v1/submissions/", {"round": round_.slug, "bundle": _named(data)},
                               format="multipart")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _named(data: bytes) -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = "bundle.tar.gz"
    return handle


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, demo_tree, tmp_path_factory: pytest.TempPathFactory,
          store: Path) -> Iterator[World]:
    """Built once in a transaction that is rolled back after the module (each test nests a savepoint)."""
    from config.celery import app

    root, manifest = demo_tree
    folder = root / manifest.round("demo-2024a").folder
    work = tmp_path_factory.mktemp("bundles")
    acme_bundle = _bundle(folder / "Larkspur_Compute", "atlas_lx4_n1", "resnet", work / "acme")
    zeta_bundle = _bundle(folder / "Tessellate_Cloud", "tc2-accel-8x2", "resnet", work / "zeta")
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
            round_ = open_round()
            round_.chairs.add(people.chair)
            submission_id = _upload(people.alice, round_, acme_bundle)
            zeta_submission_id = _upload(people.carol, round_, zeta_bundle)
            submission = Submission.objects.get(pk=submission_id)
            assert submission.state == Submission.State.VERIFIED, submission.state
            assert Submission.objects.get(pk=zeta_submission_id).state == Submission.State.VERIFIED
            result = Result.objects.select_related("system").get(submission=submission)
            assert result.score is not None
            log = (folder / "Larkspur_Compute/results/atlas_lx4_n1/resnet/result_0.txt").read_bytes()
            built = World(
                people=people, round=round_, submission_id=submission_id, result_id=result.pk,
                system_id=result.system_id, zeta_submission_id=zeta_submission_id,
                names=(result.system_slug, result.system.name),
                scores=(repr(result.score), f"{result.score:.2f}", minutes(result.score)),
                sha256=submission.sha256,
                zeta_system_name=Result.objects.get(submission_id=zeta_submission_id).system.name,
                log_bytes=log,
            )
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


# --- clients -------------------------------------------------------------------------------------------

def web_client(world: World, persona: str) -> Client:
    client = Client()
    user = world.user(persona)
    if user is not None:
        client.force_login(user)
    return client


def api_client(world: World, persona: str, *, scope: str = "read") -> APIClient:
    client = APIClient()
    user = world.user(persona)
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user, scope)}")
    return client


def assert_no_leak(world: World, body: bytes, where: str) -> None:
    text = body.decode(errors="replace")
    leaked = [marker for marker in world.leaks if marker and marker in text]
    assert not leaked, f"{where} leaks {leaked}"


# --- the matrix ----------------------------------------------------------------------------------------

# Endpoints that show exactly one Acme object: (name, path template, API?).
DETAIL = {
    "submission": ("/submissions/{submission}/", False),
    "submission_status": ("/submissions/{submission}/status/", False),
    "submission_report": ("/submissions/{submission}/report.json", False),
    "result": ("/results/{result}/", False),
    "system": ("/systems/{system}/", False),
    "run_log": ("/results/{result}/runs/0/log", False),
    "api_submission": ("/api/v1/submissions/{submission}/", True),
}
LISTS = ["round_table", "home", "my_submissions", "api_submissions"]  # checked by _check_<name> below

# Known visibility bugs: {(phase, persona, endpoint): reason}. Keep them failing until fixed (strict).
KNOWN_BUGS: dict[tuple[str, str, str], str] = {}


def _cases() -> list:
    cases = []
    for phase in PHASES:
        for persona in PERSONAS:
            for endpoint in [*DETAIL, *LISTS]:
                key = (phase, persona, endpoint)
                marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[key])] if key in KNOWN_BUGS else []
                verdict = "sees" if sees(phase, persona) else "hidden"
                if persona == "anonymous" and endpoint.startswith("api_"):
                    verdict = "401"
                cases.append(pytest.param(*key, marks=marks, id=f"{phase}-{persona}-{endpoint}-{verdict}"))
    return cases


def _path(world: World, template: str) -> str:
    return template.format(submission=world.submission_id, result=world.result_id, system=world.system_id)


@pytest.mark.parametrize(("phase", "persona", "endpoint"), _cases())
def test_embargo(phase: str, persona: str, endpoint: str, world: World) -> None:
    set_phase(world.round, phase)
    visible = sees(phase, persona)
    if endpoint in DETAIL:
        _check_detail(world, phase, persona, endpoint, visible)
    else:
        LIST_CHECKS[endpoint](world, phase, persona, visible)


def _check_detail(world: World, phase: str, persona: str, endpoint: str, visible: bool) -> None:
    template, is_api = DETAIL[endpoint]
    path = _path(world, template)
    client = api_client(world, persona) if is_api else web_client(world, persona)
    response = client.get(path)
    if is_api and persona == "anonymous":  # the API has no anonymous readers, published or not
        assert response.status_code == 401, (path, response.status_code)
        assert_no_leak(world, response.content, path)
        return
    if visible:
        assert response.status_code == 200, (path, response.status_code)
        if endpoint == "run_log":
            assert response.content == world.log_bytes
        else:
            body = response.content.decode()
            assert any(name in body for name in world.names), f"{path} does not show the system"
            assert any(score in body for score in world.scores), f"{path} does not show the score"
        return
    assert response.status_code == 404, (path, response.status_code)
    assert_no_leak(world, response.content, path)


def _check_round_table(world: World, phase: str, persona: str, visible: bool) -> None:
    path = f"/rounds/{world.round.slug}/"
    response = web_client(world, persona).get(path)
    assert response.status_code == (200 if round_page_opens(phase, persona) else 404), response.status_code
    body = response.content.decode()
    if visible:
        assert world.names[1] in body and f"/results/{world.result_id}/" in body
    else:
        assert_no_leak(world, response.content, path)
        assert f"/results/{world.result_id}/" not in body and f"/systems/{world.system_id}/" not in body
    if response.status_code == 200:  # the other organization's row follows the same rule
        assert (world.zeta_system_name in body) == sees(phase, persona, "zeta")


def _check_home(world: World, phase: str, persona: str, visible: bool) -> None:
    response = web_client(world, persona).get("/")
    assert response.status_code == 200
    body = response.content.decode()
    assert_no_leak(world, response.content, "/")
    counts = [organization for organization in ("acme", "zeta") if sees(phase, persona, organization)]
    row = re.search(rf'href="/rounds/{re.escape(world.round.slug)}/".*?</tr>', body, re.S)
    if not counts:
        assert row is None, "the round is listed with nothing visible in it"
        return
    assert row is not None, "the round is not listed though the visitor sees results in it"
    numbers = re.findall(r'<td class="num">(\d+)</td>', row.group(0))
    # Submitters, then results: a count that includes the hidden organization gives it away.
    assert numbers == [str(len(counts)), str(len(counts))], numbers


def _check_my_submissions(world: World, phase: str, persona: str, visible: bool) -> None:
    response = web_client(world, persona).get("/submissions/")
    if persona == "anonymous":
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
        return
    assert response.status_code == 200
    listed = f"/submissions/{world.submission_id}/" in response.content.decode()
    # "My submissions" lists the visitor's own organizations only, even where more is visible.
    assert listed == (persona in MEMBERS["acme"])
    if not visible:
        assert_no_leak(world, response.content, "/submissions/")


def _check_api_submissions(world: World, phase: str, persona: str, visible: bool) -> None:
    response = api_client(world, persona).get("/api/v1/submissions/")
    if persona == "anonymous":
        assert response.status_code == 401
        assert_no_leak(world, response.content, "/api/v1/submissions/")
        return
    assert response.status_code == 200
    ids = {row["id"] for row in response.json()}
    assert (world.submission_id in ids) == visible
    assert (world.zeta_submission_id in ids) == sees(phase, persona, "zeta")
    if not visible:
        assert_no_leak(world, response.content, "/api/v1/submissions/")


LIST_CHECKS = {"round_table": _check_round_table, "home": _check_home, "my_submissions": _check_my_submissions,
               "api_submissions": _check_api_submissions}
assert set(LIST_CHECKS) == set(LISTS)


# --- tokens --------------------------------------------------------------------------------------------

SIGNED_IN = [p for p in PERSONAS if p != "anonymous"]


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("persona", SIGNED_IN)
def test_a_read_token_sees_what_the_session_sees(phase: str, persona: str, world: World) -> None:
    set_phase(world.round, phase)
    session = APIClient()
    session.force_login(world.user(persona))
    token = api_client(world, persona, scope="read")
    for path in (f"/api/v1/submissions/{world.submission_id}/", "/api/v1/submissions/"):
        by_session, by_token = session.get(path), token.get(path)
        assert by_session.status_code == by_token.status_code, path
        if by_session.status_code == 200:
            assert _stable(by_session.json()) == _stable(by_token.json()), path


def _stable(data):
    """The API's answer without the fields that change between two calls (elapsed time)."""
    if isinstance(data, list):
        return [_stable(item) for item in data]
    return {key: value for key, value in data.items() if key != "elapsed_seconds"}


@pytest.mark.parametrize("how", ["revoked", "expired"])
@pytest.mark.parametrize("persona", ["owner", "staff"])
def test_a_dead_token_sees_nothing(persona: str, how: str, world: World) -> None:
    set_phase(world.round, Round.Phase.PUBLISHED)  # not even what everyone may see
    user = world.user(persona)
    secret = token_for(user, "read")
    token = ApiToken.objects.get(prefix=secret.split("_")[1])
    if how == "revoked":
        api_token_revoke(token=token, actor=user)
    else:
        ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    for path in (f"/api/v1/submissions/{world.submission_id}/", "/api/v1/submissions/"):
        response = client.get(path)
        assert response.status_code == 401, (path, response.status_code)
        assert "revoked or has expired" in response.content.decode()
        assert_no_leak(world, response.content, path)
