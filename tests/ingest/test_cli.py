"""The command-line client: `check` on generated demo bundles, `submit` against a scripted fake server.

`check` runs the verification engine in-process, and `submit` talks HTTP to a ThreadingHTTPServer on
localhost whose answers each test scripts. Sleeping is replaced by a clock that only records how long the
client would have waited. The last tests run `submit` against the real server (pytest-django's live_server)
for what only the server decides: which organization an upload is for, and identical bytes.
"""

from __future__ import annotations

import email.parser
import email.policy
import gzip
import io
import json
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ingest.bundles import Limits, LooseFile, extract_bundle, pack_loose_files
from ingest.cli import archives, submit
from ingest.cli.main import main
from ingest.demo import ABORTED, DemoManifest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token"


# --- helpers ----------------------------------------------------------------------------------------

@dataclass
class Ran:
    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> Ran:
    code = main(list(args))
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err)


@pytest.fixture(autouse=True)
def no_ambient_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODIUM_TOKEN", raising=False)


def org_folder(demo_tree: tuple[Path, DemoManifest], round_slug: str, org: str) -> Path:
    root, manifest = demo_tree
    return root / manifest.round(round_slug).folder / org


@pytest.fixture
def clean_org(demo_tree: tuple[Path, DemoManifest]) -> Path:
    """One clean item (Brindle_Labs in demo round 4.1: bx9_workstation/ssd, 5 of 5 runs compliant)."""
    return org_folder(demo_tree, "demo-2024b", "Brindle_Labs")


@pytest.fixture
def broken_org(demo_tree: tuple[Path, DemoManifest]) -> Path:
    """One item whose system description has a status MLPerf does not allow."""
    return org_folder(demo_tree, "demo-2024b", "Kestrel_Ridge")


def tar_gz(folder: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return target


# --- check ------------------------------------------------------------------------------------------

def test_check_clean_submitter_folder_exits_0_and_lists_every_item(capsys, demo_tree) -> None:
    ran = run_cli(capsys, "check", str(org_folder(demo_tree, "demo-2024a", "Larkspur_Compute")))

    assert ran.code == 0, ran.err
    assert "7 item(s): 7 verified, 0 noncompliant (ruleset 4.0.0" in ran.out
    assert re.search(r"^Larkspur_Compute/atlas_lx4_n1/resnet: verified, \d+\.\d\d min, 5/5 runs compliant$",
                     ran.out, re.M)


def test_check_shows_a_run_finding_as_file_line_with_its_excerpt(capsys, demo_tree) -> None:
    _, manifest = demo_tree
    item = next(i for i in manifest.items if i.round_slug == "demo-2024a" and i.org == "Larkspur_Compute"
                and any(why == ABORTED for _, why in i.broken_runs))
    aborted = next(name for name, why in item.broken_runs if why == ABORTED)

    ran = run_cli(capsys, "check", str(org_folder(demo_tree, "demo-2024a", "Larkspur_Compute")))

    # One aborted run of five is dropped by olympic scoring: the item stays verified, the run is reported.
    pattern = rf"^  {re.escape(item.rel_dir)}/{aborted}:\d+: \[error\] compliance/eval_accuracy: .+\n      :::MLLOG "
    assert re.search(pattern, ran.out, re.M), ran.out


def test_check_broken_item_exits_1_with_the_finding(capsys, broken_org) -> None:
    ran = run_cli(capsys, "check", str(broken_org))

    assert ran.code == 1
    assert "Kestrel_Ridge/kr1_cluster4/ssd: noncompliant" in ran.out
    assert "  Kestrel_Ridge/systems/kr1_cluster4.json: [error] system_desc/status: status 'Available soon'" in ran.out
    assert "1 item(s): 0 verified, 1 noncompliant" in ran.out


def test_check_json_is_one_document_with_full_precision(capsys, broken_org) -> None:
    ran = run_cli(capsys, "check", "--json", str(broken_org))

    document = json.loads(ran.out)
    assert ran.code == 1
    assert document["verdict"] == "noncompliant"
    assert document["ruleset"] == "4.1.0"
    [result] = document["results"]
    assert (result["org"], result["system"], result["benchmark"]) == ("Kestrel_Ridge", "kr1_cluster4", "ssd")
    assert result["runs"] == result["runs_compliant"] == 5
    assert result["score"] != round(result["score"], 2)  # not rounded for display
    assert {"severity": "error", "checker": "system_desc", "rule": "status"}.items() <= result["findings"][0].items()


def test_check_tar_gz_of_a_submitter_folder_takes_the_ruleset_from_where_it_lies(capsys, clean_org,
                                                                                  tmp_path) -> None:
    bundle = tar_gz(clean_org, tmp_path / "training_results_v4.1" / "brindle.tar.gz")

    ran = run_cli(capsys, "check", str(bundle))

    assert ran.code == 0, ran.err
    assert "Brindle_Labs/bx9_workstation/ssd: verified" in ran.out
    assert "(ruleset 4.1.0" in ran.out


def test_check_zip_with_explicit_ruleset(capsys, broken_org, tmp_path) -> None:
    bundle = tmp_path / "kestrel.zip"
    with zipfile.ZipFile(bundle, "w") as archive:
        for path in sorted(broken_org.rglob("*")):
            archive.write(path, f"{broken_org.name}/{path.relative_to(broken_org).as_posix()}")

    ran = run_cli(capsys, "check", "--ruleset", "4.1.0", str(bundle))

    assert ran.code == 1
    assert "Kestrel_Ridge/kr1_cluster4/ssd: noncompliant" in ran.out


def test_check_round_folder_takes_the_ruleset_from_its_name(capsys, make_tree) -> None:
    round_dir = make_tree(("Larkspur_Compute", "atlas_lx4_n1", "resnet"))

    ran = run_cli(capsys, "check", str(round_dir))

    assert ran.code == 0, ran.err
    assert "1 item(s): 1 verified, 0 noncompliant (ruleset 4.0.0" in ran.out


def test_check_missing_path_exits_2_with_a_message(capsys, tmp_path) -> None:
    ran = run_cli(capsys, "check", str(tmp_path / "nope"))

    assert ran.code == 2
    assert ran.out == ""
    assert "nope does not exist" in ran.err


def test_check_unknown_ruleset_exits_2_listing_the_known_ones(capsys, clean_org) -> None:
    ran = run_cli(capsys, "check", "--ruleset", "9.9.9", str(clean_org))

    assert ran.code == 2
    assert "--ruleset 9.9.9 is not a training ruleset" in ran.err
    assert "4.1.0" in ran.err


def test_check_without_a_ruleset_anywhere_exits_2(capsys, clean_org, tmp_path) -> None:
    bundle = tar_gz(clean_org, tmp_path / "brindle.tgz")

    ran = run_cli(capsys, "check", str(bundle))

    assert ran.code == 2
    assert "cannot tell the ruleset" in ran.err


def test_check_refuses_an_archive_member_climbing_out(capsys, tmp_path) -> None:
    bundle = tmp_path / "evil.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))

    ran = run_cli(capsys, "check", "--ruleset", "4.1.0", str(bundle))

    assert ran.code == 2
    assert ran.err.startswith("podium: ")
    assert "points outside the bundle" in ran.err
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_check_names_a_flat_archive_after_its_file(capsys, broken_org, tmp_path) -> None:
    bundle = tmp_path / "training_results_v4.1" / "Kestrel_Ridge.tar.gz"
    bundle.parent.mkdir()
    with tarfile.open(bundle, "w:gz") as tar:
        for child in sorted(broken_org.iterdir()):
            tar.add(child, arcname=child.name)

    ran = run_cli(capsys, "check", str(bundle))

    assert ran.code == 1
    assert "  Kestrel_Ridge/systems/kr1_cluster4.json: [error] system_desc/status" in ran.out


def test_module_entry_point_runs_without_django_and_without_a_traceback(broken_org, tmp_path) -> None:
    script = (
        "import sys\n"
        "from ingest.cli.main import main\n"
        "import ingest.cli.submit\n"
        f"code = main(['check', {str(broken_org)!r}])\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'django'], 'django was imported'\n"
        "sys.exit(code)\n"
    )
    checked = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    missing = subprocess.run([sys.executable, "-m", "ingest.cli", "check", str(tmp_path / "nope")], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)

    assert checked.returncode == 1, checked.stderr
    assert (missing.returncode, missing.stdout) == (2, "")
    assert "Traceback" not in missing.stderr
    assert "does not exist" in missing.stderr


# --- submit: a scripted server ----------------------------------------------------------------------

@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class FakePodium:
    """Answers each request with the next scripted `Answer` (then `otherwise`) and records it."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.script: list[Answer] = []
        self.otherwise = Answer(500, {"detail": "script exhausted"})
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fake.requests.append(Request(self.command, self.path, dict(self.headers), self.rfile.read(length)))
                answer = fake.script.pop(0) if fake.script else fake.otherwise
                payload = b"" if answer.body is None else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def accepted(self, state: str = "received", status: int = 201) -> Answer:
        return Answer(status, {"id": 7, "state": state, "url": f"{self.url}/submissions/7/",
                               "status_url": f"{self.url}/api/v1/submissions/7/"})

    def posts(self) -> list[Request]:
        return [r for r in self.requests if r.method == "POST"]


def status(state: str, queue_position: int | None = None, **extra: Any) -> Answer:
    return Answer(200, {"id": 7, "state": state, "queue_position": queue_position, "elapsed_seconds": 1.5,
                        "results": [], "findings": [], "error": None, **extra})


VERIFIED_RESULT = {"system": "kr1_cluster4", "benchmark": "ssd", "verdict": "verified", "score": 12.94895,
                   "raw_score": 12.94895, "scaling_factor": 1.0, "runs": 5, "runs_compliant": 5,
                   "url": "/results/1/"}
WARNING = {"severity": "warning", "check": "status", "rule": "run_stop", "file": "K/results/s/ssd/result_2.txt",
           "line": 41, "message": "only a successful run's time counts", "excerpt": ":::MLLOG {...}"}


@pytest.fixture
def podium() -> Iterator[FakePodium]:
    fake = FakePodium()
    thread = threading.Thread(target=fake.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


class FakeClock(submit.Clock):
    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(submit, "CLOCK", fake)
    return fake


def form_parts(request: Request) -> dict[str, Any]:
    """The multipart body as a standard parser reads it: {name: (filename, content type, bytes)}."""
    raw = f"Content-Type: {request.headers['Content-Type']}\r\n\r\n".encode() + request.body
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
    return {
        part.get_param("name", header="content-disposition"): (part.get_filename(), part.get_content_type(),
                                                               part.get_payload(decode=True))
        for part in message.iter_parts()
    }


def submit_args(podium: FakePodium, path: Path, *extra: str) -> list[str]:
    return ["submit", "--server", podium.url, "--round", "demo-2024b", *extra, str(path)]


# --- submit -----------------------------------------------------------------------------------------

def test_submit_uploads_a_packed_folder_and_waits_for_the_verdict(capsys, podium, clock, broken_org) -> None:
    podium.script = [podium.accepted(), status("received", 2), status("verifying"),
                     status("verified", results=[VERIFIED_RESULT], findings=[WARNING])]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN))

    assert ran.code == 0, ran.err
    post, *polls = podium.requests
    # The upload asks the server to wait for the verdict; this one answers at once, without it (no `status`).
    assert (post.method, post.path) == ("POST", "/api/v1/submissions/?wait=10")
    assert post.headers["Authorization"] == f"Token {TOKEN}"
    assert post.headers["Accept"] == "application/json"
    parts = form_parts(post)
    assert parts["round"][2] == b"demo-2024b"
    filename, kind, bundle = parts["bundle"]
    assert (filename, kind, bundle[:2]) == ("bundle.tar.gz", "application/gzip", b"\x1f\x8b")
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        assert "Kestrel_Ridge/systems/kr1_cluster4.json" in tar.getnames()
    # Each status request asks the server to wait for a change; this one answers at once (no header).
    assert [(r.method, r.path) for r in polls] == [("GET", "/api/v1/submissions/7/?wait=10")] * 3
    assert all(r.headers["Authorization"] == f"Token {TOKEN}" for r in polls)
    assert clock.sleeps == [0.5, 1.0]
    assert "submission 7: received, position 2 in the queue" in ran.err
    assert "submission 7: verifying" in ran.err
    assert "kr1_cluster4/ssd: verified, 12.95 min, 5/5 runs compliant" in ran.out
    assert "  K/results/s/ssd/result_2.txt:41: [warning] status/run_stop: only a successful" in ran.out
    assert "      :::MLLOG {...}" in ran.out


def test_submit_reads_the_token_from_the_environment(capsys, podium, clock, broken_org, monkeypatch) -> None:
    monkeypatch.setenv("PODIUM_TOKEN", "from-env")
    podium.script = [podium.accepted()]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--no-wait"))

    assert ran.code == 0, ran.err
    assert podium.requests[0].headers["Authorization"] == "Token from-env"
    assert "submission 7: received" in ran.out


def test_submit_without_a_token_exits_2_before_uploading(capsys, podium, clock, broken_org) -> None:
    ran = run_cli(capsys, *submit_args(podium, broken_org))

    assert ran.code == 2
    assert "PODIUM_TOKEN" in ran.err
    assert podium.requests == []


def test_submit_sends_an_archive_as_it_is(capsys, podium, clock, clean_org, tmp_path) -> None:
    archive = tar_gz(clean_org, tmp_path / "brindle.tgz")
    podium.script = [podium.accepted()]

    ran = run_cli(capsys, *submit_args(podium, archive, "--token", TOKEN, "--no-wait"))

    assert ran.code == 0, ran.err
    assert form_parts(podium.requests[0])["bundle"] == ("brindle.tgz", "application/gzip", archive.read_bytes())


def test_submit_honours_retry_after_on_429(capsys, podium, clock, broken_org) -> None:
    podium.script = [Answer(429, {"detail": "slow down"}, {"Retry-After": "7"}), podium.accepted()]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--no-wait"))

    assert ran.code == 0, ran.err
    assert clock.sleeps == [7.0]
    first, second = podium.posts()
    assert first.body == second.body
    assert "rate limiting (429); retrying in 7.0 s" in ran.err


def test_submit_retries_5xx_with_exponential_backoff(capsys, podium, clock, broken_org) -> None:
    podium.script = [Answer(503), Answer(502), Answer(500), podium.accepted()]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--no-wait"))

    assert ran.code == 0, ran.err
    assert clock.sleeps == [1.0, 2.0, 4.0]
    assert len(podium.posts()) == 4


def test_submit_keeps_polling_through_a_5xx(capsys, podium, clock, broken_org) -> None:
    podium.script = [podium.accepted(), status("verifying"), Answer(503), status("verified")]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN))

    assert ran.code == 0, ran.err
    assert clock.sleeps == [0.5, 1.0]


def test_submit_gives_up_on_an_unreachable_server_at_the_timeout(capsys, clock, broken_org) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    ran = run_cli(capsys, "submit", "--server", f"http://127.0.0.1:{port}", "--round", "r", "--token", TOKEN,
                  "--timeout", "10", str(broken_org))

    assert ran.code == 2
    assert clock.sleeps == [1.0, 2.0, 4.0]  # the next wait, 8 s, would pass the 10 s timeout
    assert "cannot reach" in ran.err
    assert "giving up" in ran.err


@pytest.mark.parametrize(("answer", "message"), [
    (Answer(400, {"detail": "the archive holds two submitter folders"}),
     "the server refused the bundle: the archive holds two submitter folders"),
    (Answer(400, {"errors": {"round": ["no open round demo-2024b"]}}),
     "the server refused the bundle: round: no open round demo-2024b"),
    (Answer(400, {"round": ["No round 'demo-2024b'."]}),
     "the server refused the bundle: round: No round 'demo-2024b'."),
    (Answer(401, {"detail": "Invalid token."}), "does not accept this token (401): Invalid token."),
    (Answer(403, {"detail": "not a submitter of this round"}), "may not submit here (403)"),
])
def test_submit_never_retries_a_refusal(capsys, podium, clock, broken_org, answer, message) -> None:
    podium.script = [answer]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN))

    assert ran.code == 2
    assert message in ran.err
    assert len(podium.requests) == 1
    assert clock.sleeps == []


def test_submit_reports_a_redirect_instead_of_following_it(capsys, podium, clock, broken_org) -> None:
    podium.script = [Answer(301, headers={"Location": "https://elsewhere.example/api/v1/submissions/"})]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN))

    assert ran.code == 2
    assert "pass that address as --server" in ran.err
    assert len(podium.requests) == 1


def test_submit_does_not_send_the_token_to_another_host(capsys, podium, clock, broken_org) -> None:
    podium.script = [Answer(201, {"id": 7, "state": "received", "url": "",
                                  "status_url": "https://elsewhere.example/api/v1/submissions/7/"})]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN))

    assert ran.code == 2
    assert "not sending the token there" in ran.err
    assert len(podium.requests) == 1


def test_submit_polls_the_status_url_the_way_it_reached_the_server(capsys, podium, clock, broken_org) -> None:
    # Behind a TLS-terminating proxy, Django may answer with the other scheme for the same host.
    other_scheme = podium.url.replace("http://", "https://") + "/api/v1/submissions/7/"
    podium.script = [Answer(201, {"id": 7, "state": "received", "url": "", "status_url": other_scheme}),
                     status("verified")]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN))

    assert ran.code == 0, ran.err
    assert podium.requests[1].path == "/api/v1/submissions/7/?wait=10"


@pytest.mark.parametrize(("state", "code"), [("verified", 0), ("noncompliant", 1), ("error", 3)])
def test_submit_exit_status_follows_the_final_state(capsys, podium, clock, broken_org, state, code) -> None:
    podium.script = [podium.accepted(), status(state, findings=[WARNING], error="worker lost" if state == "error"
                                               else None)]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN))

    assert ran.code == code
    assert f"submission 7: {state}" in ran.out
    if state == "error":
        assert "worker lost" in ran.err


def test_submit_already_uploaded_bytes_follow_the_existing_submission(capsys, podium, clock, broken_org) -> None:
    podium.script = [podium.accepted(state="verified", status=200), status("verified")]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN))

    assert ran.code == 0
    assert "submission 7: already uploaded, verified" in ran.err


def test_submit_lets_a_server_that_waits_do_the_waiting(capsys, podium, clock, broken_org) -> None:
    waited = {"Podium-Waited": "true"}
    podium.script = [podium.accepted(), Answer(200, status("received", 1).body, waited),
                     Answer(200, status("verifying").body, waited), Answer(200, status("verified").body, waited)]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--timeout", "6.5"))

    assert ran.code == 0, ran.err
    assert clock.sleeps == []  # the server answered each time the state moved: nothing to sleep on
    # It asks for at most what is left of its timeout, less a second for the answer to arrive.
    assert [r.path for r in podium.requests[1:]] == ["/api/v1/submissions/7/?wait=5"] * 3
    assert "submission 7: verifying" in ran.err


def test_submit_gets_the_verdict_in_the_uploads_own_answer_where_the_server_waits_there(
        capsys, podium, clock, broken_org) -> None:
    verdict = status("verified", results=[VERIFIED_RESULT], findings=[WARNING]).body
    podium.script = [Answer(201, {**podium.accepted().body, "status": verdict}, {"Podium-Waited": "true"})]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--timeout", "6.5"))

    assert ran.code == 0, ran.err
    # One request: the upload, asking for what is left of the timeout less a second; no status request after it.
    assert [(r.method, r.path) for r in podium.requests] == [("POST", "/api/v1/submissions/?wait=5")]
    assert clock.sleeps == []
    assert "submission 7: received" in ran.err  # the upload's own state, then the verdict's
    assert "submission 7: verified" in ran.err
    assert "kr1_cluster4/ssd: verified, 12.95 min, 5/5 runs compliant" in ran.out
    assert "  K/results/s/ssd/result_2.txt:41: [warning] status/run_stop: only a successful" in ran.out


def test_submit_follows_the_status_where_the_uploads_wait_ran_out_before_the_verdict(
        capsys, podium, clock, broken_org) -> None:
    waited = {"Podium-Waited": "true"}
    podium.script = [Answer(201, {**podium.accepted().body, "status": status("verifying").body}, waited),
                     Answer(200, status("noncompliant", results=[VERIFIED_RESULT]).body, waited)]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--json"))

    assert ran.code == submit.FINAL_STATES["noncompliant"], ran.err
    assert [(r.method, r.path) for r in podium.requests] == [
        ("POST", "/api/v1/submissions/?wait=10"), ("GET", "/api/v1/submissions/7/?wait=10")]
    assert clock.sleeps == []  # the server waited each time
    assert "submission 7: verifying" in ran.err
    document = json.loads(ran.out)
    # The final status over the upload's answer, without the status the upload's answer carried inside it.
    assert document["state"] == "noncompliant" and document["status_url"].endswith("/api/v1/submissions/7/")
    assert "status" not in document and document["timed_out"] is False


def test_submit_without_waiting_asks_the_upload_for_no_wait(capsys, podium, clock, broken_org) -> None:
    podium.script = [podium.accepted()]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--no-wait"))

    assert ran.code == 0, ran.err
    assert [(r.method, r.path) for r in podium.requests] == [("POST", "/api/v1/submissions/")]


def test_submit_stops_at_its_timeout_though_the_server_waits(capsys, podium, clock, broken_org) -> None:
    podium.script = [podium.accepted()]
    podium.otherwise = Answer(200, status("verifying").body, {"Podium-Waited": "true"})
    clock_requests = []

    def advance(self, *args, **kwargs):  # each waited answer takes what the client asked for
        url = args[1]
        clock_requests.append(url)
        clock.t += float(url.rsplit("wait=", 1)[1]) if "wait=" in url else 0.0
        return real(self, *args, **kwargs)

    real = submit.Client.request
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(submit.Client, "request", advance)
        ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--timeout", "25"))

    assert ran.code == 2
    asked = [url.rsplit("?", 1)[1] if "?" in url else "" for url in clock_requests]
    # The upload asked for a wait too (this server answered it at once, without a status, yet took its time).
    # Under a second left, it asks for no wait and polls as it would a server that does not wait.
    assert asked == ["wait=10", "wait=10", "wait=4", "", ""]
    assert clock.sleeps == [0.5]
    assert "gave up waiting after 25 s: submission 7 is still verifying" in ran.err


def test_submit_times_out_polling_with_the_poll_interval_capped(capsys, podium, clock, broken_org) -> None:
    podium.script = [podium.accepted()]
    podium.otherwise = status("verifying", 1)

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--timeout", "20"))

    assert ran.code == 2
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert "gave up waiting after 20 s: submission 7 is still verifying" in ran.err


def test_submit_json_prints_the_final_status(capsys, podium, clock, broken_org) -> None:
    podium.script = [podium.accepted(), status("verified", results=[VERIFIED_RESULT])]

    ran = run_cli(capsys, *submit_args(podium, broken_org, "--token", TOKEN, "--json"))

    document = json.loads(ran.out)
    assert ran.code == 0
    assert (document["id"], document["state"], document["timed_out"]) == (7, "verified", False)
    assert document["results"][0]["score"] == 12.94895
    assert document["url"].endswith("/submissions/7/")


def test_packing_a_folder_twice_gives_the_same_bytes(broken_org, tmp_path) -> None:
    folder = shutil.copytree(broken_org, tmp_path / broken_org.name)
    first = archives.pack_folder(folder)
    for path in folder.rglob("*"):
        path.touch()  # new mtimes must not change the bundle
    (folder / "systems" / ".DS_Store").write_bytes(b"Finder")  # nor junk the server drops

    assert archives.pack_folder(folder) == first
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first))) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert names[0] == "Kestrel_Ridge/results/kr1_cluster4/ssd/result_0.txt"
    assert {(m.mtime, m.isfile()) for m in members} == {(0, True)}


def test_a_packed_folder_is_what_the_server_extracts(clean_org, tmp_path) -> None:
    bundle = tmp_path / "bundle.tar.gz"
    bundle.write_bytes(archives.pack_folder(clean_org))

    folder = extract_bundle(bundle, tmp_path / "out", limits=Limits())

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert folder.name == clean_org.name
    assert files(folder) == files(clean_org)


def test_a_packed_folder_has_the_bytes_of_the_same_files_uploaded_one_by_one(clean_org) -> None:
    [system_json] = (clean_org / "systems").glob("*.json")
    [bench_dir] = (clean_org / "results" / system_json.stem).iterdir()
    logs = sorted(bench_dir.glob("result_*.txt"))
    assert {p.name for p in bench_dir.iterdir()} == {p.name for p in logs}  # nothing else to pack

    loose = pack_loose_files(
        organization=clean_org.name,
        system_json=LooseFile(system_json.name, system_json.read_bytes()),
        result_files=[LooseFile(p.name, p.read_bytes()) for p in logs],
        benchmark=bench_dir.name,
        limits=Limits(),
    )

    # So the server recognizes the same results however they were uploaded.
    assert archives.pack_folder(clean_org) == loose


# --- submit --organization: the scripted server sees the choice ---------------------------------------

def test_submit_sends_the_chosen_organization(capsys, podium, clock, clean_org) -> None:
    podium.script = [podium.accepted()]

    ran = run_cli(capsys, *submit_args(podium, clean_org, "--token", TOKEN, "--organization", "zeta", "--no-wait"))

    assert ran.code == 0
    assert form_parts(podium.posts()[0])["organization"][2] == b"zeta"


def test_submit_without_organization_sends_no_such_field(capsys, podium, clock, clean_org) -> None:
    podium.script = [podium.accepted()]

    run_cli(capsys, *submit_args(podium, clean_org, "--token", TOKEN, "--no-wait"))

    assert "organization" not in form_parts(podium.posts()[0])


@pytest.mark.parametrize("slug", ["zeta\r\nX-Evil: 1", "../acme", "zeta beta", "zéta"])
def test_submit_refuses_a_hostile_organization_before_uploading(capsys, podium, clock, clean_org, slug) -> None:
    ran = run_cli(capsys, *submit_args(podium, clean_org, "--token", TOKEN, "--organization", slug))

    assert ran.code == 2 and "is not an organization slug" in ran.err
    assert podium.requests == []


# --- submit against the real server: a member of two organizations ----------------------------------

@pytest.fixture
def two_org_member(transactional_db, demo_tree):  # -> (token, people)
    from accounts.models import Membership
    from accounts.services import membership_add
    from tests.people import make_people, open_round, token_for

    people = make_people()
    open_round("open-v4.1", ruleset="4.1.0")
    # alice submits for acme already; a second organization makes --organization necessary.
    membership_add(user=people.alice, organization=people.zeta, role=Membership.Role.SUBMITTER)
    return token_for(people.alice), people


def live_args(live_server, path: Path, token: str, *extra: str) -> list[str]:
    return ["submit", "--server", live_server.url, "--round", "open-v4.1", "--token", token, "--no-wait",
            *extra, str(path)]


def test_a_member_of_two_organizations_uploads_for_the_one_named(capsys, live_server, two_org_member,
                                                                  clean_org) -> None:
    from ingest.models import Submission

    token, people = two_org_member

    ran = run_cli(capsys, *live_args(live_server, clean_org, token, "--organization", "zeta"))

    assert ran.code == 0, ran.err
    submission = Submission.objects.get()
    assert submission.organization == people.zeta and submission.uploaded_by == people.alice


def test_the_verdict_comes_in_the_uploads_own_answer_from_the_real_server(capsys, live_server, two_org_member,
                                                                           clean_org, monkeypatch) -> None:
    from ingest.models import Submission

    token, _ = two_org_member
    asked: list[tuple[str, str]] = []
    real = submit.Client.request

    def recorded(self, method, url, *args, **kwargs):
        asked.append((method, url.removeprefix(live_server.url)))
        return real(self, method, url, *args, **kwargs)
    monkeypatch.setattr(submit.Client, "request", recorded)
    waiting_args = [arg for arg in live_args(live_server, clean_org, token, "--organization", "zeta")
                    if arg != "--no-wait"]

    ran = run_cli(capsys, *waiting_args)

    submission = Submission.objects.get()
    assert submission.is_final  # verified in the upload's request here: tasks run in-process
    assert ran.code == submit.FINAL_STATES[submission.state], ran.err  # (a round that wants more runs of it)
    # One request: its answer carried the verdict.
    assert asked == [("POST", "/api/v1/submissions/?wait=10")]
    assert f"submission {submission.pk}: {submission.state}" in ran.out


def test_a_member_of_two_organizations_must_name_one(capsys, live_server, two_org_member, clean_org) -> None:
    from ingest.models import Submission

    token, _ = two_org_member

    ran = run_cli(capsys, *live_args(live_server, clean_org, token))

    assert ran.code == 2 and "organization" in ran.err.lower()
    assert not Submission.objects.exists()


def test_an_organization_the_user_is_not_in_is_refused(capsys, live_server, two_org_member, clean_org) -> None:
    from ingest.models import Submission

    token, _ = two_org_member

    ran = run_cli(capsys, *live_args(live_server, clean_org, token, "--organization", "omega"))

    assert ran.code == 2 and "You may not submit for this organization" in ran.err
    assert not Submission.objects.exists()


def test_identical_bytes_are_answered_as_the_web_page_does(capsys, live_server, two_org_member, clean_org) -> None:
    from ingest.models import Submission

    token, _ = two_org_member
    first = run_cli(capsys, *live_args(live_server, clean_org, token, "--organization", "zeta"))
    assert first.code == 0, first.err
    submission = Submission.objects.get()

    again = run_cli(capsys, *live_args(live_server, clean_org, token, "--organization", "zeta"))

    assert again.code == 0
    assert f"These bytes are submission #{submission.pk}" in again.err
    assert f"submission {submission.pk}: already uploaded" in again.out
    assert Submission.objects.count() == 1
