"""The embargo, end to end: every persona against every page, API endpoint, export, chart, report and
count, in every phase.

One Acme result (alice uploads it) and one Zeta result (carol uploads it) are verified once for the
module; each test then moves the round into a phase and asks one endpoint as one persona. The rule
under test is `ingest.visibility`: published → everyone; before that the own organization; in review
also the round's other submitting organizations and its chairs; staff always. The fourth phase is
"published, held": the round is published but an undecided flag holds the Acme result back, so it
(with its submission, system, runs, findings and files, which exist only through it) stays hidden
from everyone but Acme's members, the round's chairs and staff.
"""

from __future__ import annotations

import datetime
import io
import re
import shutil
from collections.abc import Callable, Iterator
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
from ingest.models import Finding, Result, Submission
from leaderboard.templatetags.podium import minutes
from reviews.models import Flag
from tests.people import People, make_people, open_round, set_phase, tar_gz_of, token_for

pytestmark = pytest.mark.django_db

HELD = "published_held"  # published, with an undecided flag on the Acme result
PHASES = [Round.Phase.OPEN, Round.Phase.REVIEW, Round.Phase.PUBLISHED, HELD]
PERSONAS = ["owner", "co_member", "other_submitter", "non_submitter", "chair", "anonymous", "staff"]
# Persona → the username in tests.people (None: not signed in).
USERNAMES = {"owner": "alice", "co_member": "bob", "other_submitter": "carol", "non_submitter": "dave",
             "chair": "chair", "anonymous": None, "staff": "staff"}
MEMBERS = {"acme": {"owner", "co_member"}, "zeta": {"other_submitter"}}
SUBMITTING = MEMBERS["acme"] | MEMBERS["zeta"]


def sees(phase: str, persona: str, organization: str = "acme") -> bool:
    """The rule, written out independently of the application's query."""
    if phase == HELD:
        if organization == "acme":  # held back from the public record until a chair decides the flag
            return persona in MEMBERS["acme"] | {"chair", "staff"}
        phase = Round.Phase.PUBLISHED
    if phase == Round.Phase.PUBLISHED or persona == "staff" or persona in MEMBERS[organization]:
        return True
    return phase == Round.Phase.REVIEW and persona in SUBMITTING | {"chair"}


def round_page_opens(phase: str, persona: str) -> bool:
    """The round page itself (not its rows): published, or the visitor submits to or chairs it."""
    return phase in (Round.Phase.PUBLISHED, HELD) or persona in SUBMITTING | {"chair", "staff"}


def enter(world: World, phase: str) -> None:
    """Move the round into `phase`; for HELD, publish it and hold the Acme result with an undecided flag."""
    set_phase(world.round, Round.Phase.PUBLISHED if phase == HELD else phase)
    if phase == HELD:
        Flag.objects.create(round=world.round, result_id=world.result_id, raised_by=world.people.carol,
                            raised_by_organization=world.people.zeta, rule="rcp/held",
                            description="Converges too early.")


# A unique text in the Acme findings (one about the result, one about the whole bundle).
FINDING_MARK = "acme-finding-K7Q"


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
    run_id: int
    finding_ids: tuple[int, int]  # about the result, about the bundle
    zeta_result_id: int
    division: str

    @property
    def leaks(self) -> tuple[str, ...]:
        """Strings that only a response showing the Acme result can contain."""
        return (*self.names, *self.scores, self.sha256, FINDING_MARK)

    @property
    def json_leaks(self) -> tuple[str, ...]:
        """The same for JSON (charts, the API), whose other numbers might match a formatted score."""
        return (*self.names, self.sha256, FINDING_MARK, f"/results/{self.result_id}/", f"/systems/{self.system_id}/")

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
            run = result.runs.order_by("position").first()
            assert run is not None
            about_result = Finding.objects.create(submission=submission, result=result, run=run, severity="warning",
                                                  checker="seed", message=f"{FINDING_MARK}: seeds repeat")
            about_bundle = Finding.objects.create(submission=submission, severity="info", checker="layout",
                                                  message=f"{FINDING_MARK}: a stray file")
            built = World(
                people=people, round=round_, submission_id=submission_id, result_id=result.pk,
                system_id=result.system_id, zeta_submission_id=zeta_submission_id,
                names=(result.system_slug, result.system.name),
                scores=(repr(result.score), f"{result.score:.2f}", minutes(result.score)),
                sha256=submission.sha256,
                zeta_system_name=Result.objects.get(submission_id=zeta_submission_id).system.name,
                log_bytes=log,
                run_id=run.pk,
                finding_ids=(about_result.pk, about_bundle.pk),
                zeta_result_id=Result.objects.get(submission_id=zeta_submission_id).pk,
                division=result.division or "closed",
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


def assert_no_leak(world: World, body: bytes, where: str, markers: tuple[str, ...] | None = None) -> None:
    text = body.decode(errors="replace")
    leaked = [marker for marker in (world.leaks if markers is None else markers) if marker and marker in text]
    assert not leaked, f"{where} leaks {leaked}"


# --- the matrix ----------------------------------------------------------------------------------------

# Endpoints that show exactly one Acme object: name → (path template, who may call it, what a visible
# answer must show). "page": any visitor; "api": signed-in callers only (401 to anonymous); "open_api":
# the public read API, anonymous callers included. Shows: "result" (system and score), "system" (its
# name), "finding" (FINDING_MARK), "any" (a 200 is enough).
DETAIL = {
    "submission": ("/submissions/{submission}/", "page", "result"),
    "submission_status": ("/submissions/{submission}/status/", "page", "result"),
    "submission_report": ("/submissions/{submission}/report.json", "page", "result"),
    "result": ("/results/{result}/", "page", "result"),
    "system": ("/systems/{system}/", "page", "result"),
    "run_log": ("/results/{result}/runs/0/log", "page", "log"),
    "convergence_chart": ("/results/{result}/convergence.json", "page", "any"),
    "run_times_chart": ("/results/{result}/runs.json", "page", "any"),
    "api_submission": ("/api/v1/submissions/{submission}/", "api", "result"),
    "api_result": ("/api/v1/results/{result}/", "open_api", "result"),
    "api_system": ("/api/v1/systems/{system}/", "open_api", "system"),
    "api_run": ("/api/v1/runs/{run}/", "open_api", "any"),
    "api_result_finding": ("/api/v1/findings/{finding}/", "open_api", "finding"),
    "api_bundle_finding": ("/api/v1/findings/{bundle_finding}/", "open_api", "finding"),
}
# Pages and endpoints that list or count: checked by _check_<name> below.
LISTS = ["round_table", "home", "my_submissions", "api_submissions", "api_results", "api_systems", "api_runs",
         "api_findings", "api_organizations", "api_organization", "api_rounds", "export_csv", "export_json",
         "charts_page", "chart_scale", "chart_scaling", "chart_spread", "chart_history", "compare"]

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
                if persona == "anonymous" and (endpoint in ("api_submissions", "my_submissions")
                                               or DETAIL.get(endpoint, ("", "", ""))[1] == "api"):
                    verdict = "401"
                cases.append(pytest.param(*key, marks=marks, id=f"{phase}-{persona}-{endpoint}-{verdict}"))
    return cases


def _path(world: World, template: str) -> str:
    return template.format(submission=world.submission_id, result=world.result_id, system=world.system_id,
                           run=world.run_id, finding=world.finding_ids[0], bundle_finding=world.finding_ids[1])


@pytest.mark.parametrize(("phase", "persona", "endpoint"), _cases())
def test_embargo(phase: str, persona: str, endpoint: str, world: World) -> None:
    enter(world, phase)
    visible = sees(phase, persona)
    if endpoint in DETAIL:
        _check_detail(world, phase, persona, endpoint, visible)
    else:
        LIST_CHECKS[endpoint](world, phase, persona, visible)


def _check_detail(world: World, phase: str, persona: str, endpoint: str, visible: bool) -> None:
    template, kind, shows = DETAIL[endpoint]
    path = _path(world, template)
    client = web_client(world, persona) if kind == "page" else api_client(world, persona)
    response = client.get(path)
    if kind == "api" and persona == "anonymous":  # the submissions API has no anonymous readers
        assert response.status_code == 401, (path, response.status_code)
        assert_no_leak(world, response.content, path)
        return
    if visible:
        assert response.status_code == 200, (path, response.status_code)
        body = response.content.decode()
        if shows == "log":
            assert response.content == world.log_bytes
        if shows in ("result", "system"):
            assert any(name in body for name in world.names), f"{path} does not show the system"
        if shows == "result":
            assert any(score in body for score in world.scores), f"{path} does not show the score"
        if shows == "finding":
            assert FINDING_MARK in body, f"{path} does not show the finding"
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


def _api_list(world: World, persona: str, path: str, visible: bool) -> list[dict]:
    response = api_client(world, persona).get(path)
    assert response.status_code == 200, (path, response.status_code)
    if not visible:
        assert_no_leak(world, response.content, path, markers=world.json_leaks)
    return response.json()["results"]


def _check_api_results(world: World, phase: str, persona: str, visible: bool) -> None:
    ids = {row["id"] for row in _api_list(world, persona, "/api/v1/results/?all_versions=1", visible)}
    assert (world.result_id in ids) == visible
    assert (world.zeta_result_id in ids) == sees(phase, persona, "zeta")


def _check_api_systems(world: World, phase: str, persona: str, visible: bool) -> None:
    ids = {row["id"] for row in _api_list(world, persona, "/api/v1/systems/", visible)}
    assert (world.system_id in ids) == visible


def _check_api_runs(world: World, phase: str, persona: str, visible: bool) -> None:
    rows = _api_list(world, persona, "/api/v1/runs/", visible)
    assert (world.run_id in {row["id"] for row in rows}) == visible
    assert (world.result_id in {row["result"] for row in rows}) == visible


def _check_api_findings(world: World, phase: str, persona: str, visible: bool) -> None:
    ids = {row["id"] for row in _api_list(world, persona, "/api/v1/findings/", visible)}
    assert (world.finding_ids[0] in ids) == visible
    assert (world.finding_ids[1] in ids) == visible  # the bundle's: its submission exists only through the result


def _check_api_organizations(world: World, phase: str, persona: str, visible: bool) -> None:
    rows = {row["slug"]: row for row in _api_list(world, persona, "/api/v1/organizations/", visible)}
    acme, zeta = world.people.acme.slug, world.people.zeta.slug
    # Counts are of the results the caller may see: Acme has no other, so it is not listed at all.
    assert (acme in rows) == visible
    if visible:
        assert rows[acme]["result_count"] == 1 and rows[acme]["rounds"] == [{"round": world.round.slug, "results": 1}]
    assert (zeta in rows) == sees(phase, persona, "zeta")


def _check_api_organization(world: World, phase: str, persona: str, visible: bool) -> None:
    path = f"/api/v1/organizations/{world.people.acme.slug}/"
    response = api_client(world, persona).get(path)
    if visible:
        assert response.status_code == 200 and response.json()["result_count"] == 1
    else:
        assert response.status_code == 404, response.status_code
        assert_no_leak(world, response.content, path, markers=world.json_leaks)


def _check_api_rounds(world: World, phase: str, persona: str, visible: bool) -> None:
    for path in ("/api/v1/rounds/", f"/api/v1/benchmarks/?round={world.round.slug}"):
        response = api_client(world, persona).get(path)
        assert response.status_code == 200
        assert_no_leak(world, response.content, path, markers=world.json_leaks)  # no result in them, ever


def _check_export(world: World, phase: str, persona: str, visible: bool, fmt: str) -> None:
    path = f"/rounds/{world.round.slug}/export.{fmt}"
    response = web_client(world, persona).get(path)
    assert response.status_code == (200 if round_page_opens(phase, persona) else 404), response.status_code
    content = b"".join(response.streaming_content) if response.streaming else response.content  # exports stream
    body = content.decode()
    if response.status_code == 200:
        assert (world.names[0] in body) == visible
        assert (world.zeta_system_name in body) == sees(phase, persona, "zeta")
    if not visible:
        assert_no_leak(world, content, path, markers=world.json_leaks)


def _check_chart(world: World, phase: str, persona: str, visible: bool, path: str, *, drawn: bool) -> None:
    """A chart's JSON: 404 where the round does not open; the Acme point drawn (if `drawn`) only where visible."""
    response = web_client(world, persona).get(path)
    opens = round_page_opens(phase, persona) or path.startswith("/benchmarks/")
    assert response.status_code == (200 if opens else 404), (path, response.status_code)
    if drawn and response.status_code == 200:
        assert (f"/results/{world.result_id}/" in response.content.decode()) == visible, path
    if not visible:
        assert_no_leak(world, response.content, path, markers=world.json_leaks)


def _chart_query(world: World) -> str:
    return f"benchmark=resnet&division={world.division}"


def _check_charts_page(world: World, phase: str, persona: str, visible: bool) -> None:
    path = f"/rounds/{world.round.slug}/charts/?{_chart_query(world)}"
    response = web_client(world, persona).get(path)
    assert response.status_code == (200 if round_page_opens(phase, persona) else 404), response.status_code
    if not visible:
        assert_no_leak(world, response.content, path)


def _check_compare(world: World, phase: str, persona: str, visible: bool) -> None:
    path = f"/compare/?ids={world.result_id}&ids={world.zeta_result_id}"
    response = web_client(world, persona).get(path)
    both = visible and sees(phase, persona, "zeta")
    assert response.status_code == (200 if both else 404), response.status_code
    if both:
        assert world.names[1] in response.content.decode()
    if not visible:
        assert_no_leak(world, response.content, path)


def _charts(name: str, drawn: bool) -> Callable[[World, str, str, bool], None]:
    def check(world: World, phase: str, persona: str, visible: bool) -> None:
        _check_chart(world, phase, persona, visible, f"/rounds/{world.round.slug}/charts/{name}.json?"
                     f"{_chart_query(world)}", drawn=drawn)
    return check


def _check_chart_history(world: World, phase: str, persona: str, visible: bool) -> None:
    _check_chart(world, phase, persona, visible, f"/benchmarks/resnet/history.json?division={world.division}&scale=1",
                 drawn=False)


LIST_CHECKS: dict[str, Callable[[World, str, str, bool], None]] = {
    "round_table": _check_round_table, "home": _check_home, "my_submissions": _check_my_submissions,
    "api_submissions": _check_api_submissions, "api_results": _check_api_results, "api_systems": _check_api_systems,
    "api_runs": _check_api_runs, "api_findings": _check_api_findings, "api_organizations": _check_api_organizations,
    "api_organization": _check_api_organization, "api_rounds": _check_api_rounds,
    "export_csv": lambda *a: _check_export(*a, fmt="csv"), "export_json": lambda *a: _check_export(*a, fmt="json"),
    "charts_page": _check_charts_page, "chart_scale": _charts("scale", drawn=True),
    "chart_scaling": _charts("scaling", drawn=False), "chart_spread": _charts("spread", drawn=False),
    "chart_history": _check_chart_history, "compare": _check_compare,
}
assert set(LIST_CHECKS) == set(LISTS)


# --- tokens --------------------------------------------------------------------------------------------

SIGNED_IN = [p for p in PERSONAS if p != "anonymous"]


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("persona", SIGNED_IN)
def test_a_read_token_sees_what_the_session_sees(phase: str, persona: str, world: World) -> None:
    enter(world, phase)
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
