"""The runner agent against a scripted fake Podium server, running a tiny fake job module for real.

No Django, no database: the agent talks HTTP to a ThreadingHTTPServer on localhost that records every
request and answers as each test scripts. Jobs are real child processes of a module written into
tmp_path; the agent's backoff sleeps go through a clock that records them and hardly sleeps, and
heartbeats, time limits and the SIGTERM grace are cut to fractions of a second.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runner_agent import hardware, leftovers
from runner_agent.cli import main
from runner_agent.client import Clock
from runner_agent.output import OutputLines
from runner_agent.settings import Timing

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "prn_abc.s3cret-runner-token"
SECRET = "attempt-s3cret"
FAKE_MODULE = "podium_fake_job"
FAST = Timing(kill_grace_s=0.5, min_heartbeat_s=0.05, heartbeat_timeout_s=5.0, request_timeout_s=5.0, poll_s=0.02)
H100 = "NVIDIA H100 80GB HBM3"

FAKE_JOB = '''\
"""A stand-in for a training job: prints MLLOG lines, writes its log, then does what its config says."""
import argparse, json, os, signal, subprocess, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
parser.add_argument("--log", required=True)
args = parser.parse_args()
with open(args.config) as f:
    config = json.load(f)
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
print("ENV=" + ",".join(sorted(os.environ)))
print("HOME=" + os.environ.get("HOME", ""))
for i in range(config.get("epochs", 3)):
    print(":::MLLOG " + json.dumps({"key": "epoch_stop", "value": None, "metadata": {"epoch_num": i}}))
with open(args.log, "w") as f:
    f.write(config.get("log_text", "a log\\n"))
time.sleep(config.get("sleep", 0))
if config.get("mode") == "crash":
    print("Traceback (most recent call last):", file=sys.stderr)
    print("RuntimeError: CUDA out of memory", file=sys.stderr)
    sys.exit(3)
if config.get("mode") == "hang":
    if config.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the child below
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print("PIDS=%d,%d" % (os.getpid(), child.pid), flush=True)
    while True:
        time.sleep(1)
'''


def mllog(epoch: int) -> str:
    return ":::MLLOG " + json.dumps({"key": "epoch_stop", "value": None, "metadata": {"epoch_num": epoch}})


# --- the fake server --------------------------------------------------------------------------------

@dataclass
class Request:
    method: str
    path: str
    headers: Message
    body: bytes
    answered: int | None = None  # None: the connection was dropped

    @property
    def kind(self) -> str:
        if self.method == "GET":
            return "attempt"  # reading an attempt's verdict
        return self.path.rstrip("/").rsplit("/", 1)[-1]  # claim, heartbeat, log or complete

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


DROP = Answer(status=0)  # close the connection without answering
OK_BEAT = Answer(200, {"lease_seconds": 60, "cancel": False})
AWAITING = {"attempt": 11, "outcome": "finished", "judgement": "awaiting", "job_state": "judging", "verdict": None}
JUDGED = {"attempt": 11, "outcome": "finished", "judgement": "judged", "job_state": "reproduced",
          "verdict": "reproduced", "reason": ""}
Responder = Callable[[Request], Answer]


class FakePodium:
    """The agent API: `script[kind]` answers first, in order, then `responders[kind]`."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[Request] = []
        self.script: dict[str, list[Answer]] = {"claim": [], "heartbeat": [], "log": [], "complete": [],
                                                "attempt": []}
        self.responders: dict[str, Responder] = {
            "claim": lambda r: Answer(204),
            "heartbeat": lambda r: OK_BEAT,
            "log": lambda r: Answer(200, {"sha256": hashlib.sha256(r.body).hexdigest(), "bytes": len(r.body)}),
            "complete": lambda r: Answer(200, {"job_state": "succeeded", "verdict": None}),
            "attempt": lambda r: Answer(200, JUDGED),
        }
        lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(self.command, self.path, self.headers, self.rfile.read(length))
                with lock:
                    fake.requests.append(request)
                    queued = fake.script[request.kind]
                    answer = queued.pop(0) if queued else fake.responders[request.kind](request)
                if answer is DROP:
                    self.close_connection = True
                    return
                request.answered = answer.status
                payload = b"" if answer.body is None else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = do_PUT = do_GET = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> FakePodium:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def of(self, kind: str) -> list[Request]:
        return [r for r in self.requests if r.kind == kind]

    def beat_lines(self, attempt_id: int | None = None) -> list[str]:
        """The lines heartbeats carried that the server took (answered 200)."""
        return [line for r in self.of("heartbeat") if r.answered == 200
                and (attempt_id is None or f"/attempts/{attempt_id}/" in r.path) for line in r.json()["log_lines"]]


def claim_answer(job_id: int = 1, attempt_id: int = 11, *, config: dict[str, Any] | None = None,
                 module: str = FAKE_MODULE, time_limit: int = 30, heartbeat: float = 0.1,
                 indexes: tuple[int, ...] = ()) -> Answer:
    return Answer(200, {
        "job": {"id": job_id, "kind": "convergence", "module": module, "config": config or {},
                "time_limit_seconds": time_limit},
        "attempt": {"id": attempt_id, "number": 1, "secret": SECRET, "lease_seconds": 60,
                    "heartbeat_seconds": heartbeat},
        "assignment": {"accelerator_indexes": list(indexes)},
    })


def once_the_job_printed_its_pids(answer: Answer) -> Responder:
    """Heartbeats are fine until one carries the hanging job's PIDS line; that one gets `answer`."""
    def respond(request: Request) -> Answer:
        carried = any(line.startswith("PIDS=") for line in request.json()["log_lines"])
        return answer if carried else OK_BEAT
    return respond


@pytest.fixture
def podium() -> Iterator[FakePodium]:
    fake = FakePodium().start()
    yield fake
    fake.close()


class RecordingClock(Clock):
    def __init__(self, on_sleep: Callable[[int], None] | None = None) -> None:
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        self.sleeps.append(seconds)
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))
        return stop.wait(0.01)


@pytest.fixture
def clock() -> RecordingClock:
    return RecordingClock()


@pytest.fixture(autouse=True)
def job_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake job importable by the job's Python, and a PATH holding only a folder of our own (no nvidia-smi)."""
    jobs, bin_dir = tmp_path / "jobs", tmp_path / "bin"
    jobs.mkdir()
    bin_dir.mkdir()
    (jobs / f"{FAKE_MODULE}.py").write_text(FAKE_JOB)
    monkeypatch.setenv("PYTHONPATH", str(jobs))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("PODIUM_RUNNER_TOKEN", raising=False)
    return bin_dir


def agent_args(url: str, tmp_path: Path, *extra: str, token: bool = True, once: bool = True,
               allow: bool = True) -> list[str]:
    return ["--server", url, "--name", "test-runner", "--work-dir", str(tmp_path / "work"),
            *(["--token", TOKEN] if token else []), *(["--allow-module", FAKE_MODULE] if allow else []),
            *(["--once"] if once else []), *extra]


def run_agent(url: str, tmp_path: Path, clock: Clock, *extra: str, **flags: bool) -> int:
    return main(agent_args(url, tmp_path, *extra, **flags), clock=clock, timing=FAST)


def completion(podium: FakePodium) -> dict[str, Any]:
    [complete] = podium.of("complete")
    return complete.json()


def pids_in(text: str) -> list[int]:
    [line] = [line for line in text.splitlines() if line.startswith("PIDS=")]
    return [int(pid) for pid in line.removeprefix("PIDS=").split(",")]


def gone(pid: int, within_s: float = 2.0) -> bool:
    """The process ended (a zombie counts: it ran its course, only its parent's wait is missing)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        except OSError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        else:
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                return True
        time.sleep(0.05)
    return False


def write_fake_nvidia_smi(bin_dir: Path, output: str, status: int = 0, inventory: str = "") -> None:
    """`nvidia-smi`: `output` for the query, `inventory` for `-q`; each call's arguments on a line of its own."""
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {bin_dir / 'nvidia-smi.args'}\n"
                      f"if [ \"$1\" = -q ]; then printf '{inventory}'; exit {status}; fi\n"
                      f"printf '{output}'\nexit {status}\n")
    script.chmod(0o755)


def start_agent_process(url: str, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    """`python -m runner_agent` (real Timing) in a process of its own, as systemd would run it."""
    return subprocess.Popen([sys.executable, "-m", "runner_agent", *agent_args(url, tmp_path, *extra)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def running_job_pids(podium: FakePodium, within_s: float = 10.0) -> list[int]:
    """PIDS of the hanging job, once a heartbeat brought them."""
    deadline = time.monotonic() + within_s
    while not any(line.startswith("PIDS=") for line in podium.beat_lines()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids_in("\n".join(podium.beat_lines()))


def running(pid: int) -> bool:
    """Still running a moment from now: not ended, nor a zombie."""
    return not gone(pid, within_s=0.3)


def kill_quietly(*pids: int) -> None:
    """After a failed test: no process of the test's own outlives it."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


# --- one job, start to end ---------------------------------------------------------------------------

def test_a_job_streams_its_lines_uploads_its_log_and_completes_finished(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [claim_answer(config={"epochs": 3, "log_text": "the MLLOG record\n"})]

    assert run_agent(podium.url, tmp_path, clock) == 0

    kinds = [r.kind for r in podium.requests]
    assert kinds[0] == "claim" and kinds[-2:] == ["log", "complete"]
    assert set(kinds[1:-2]) == {"heartbeat"}
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in podium.requests)
    assert all(r.headers["Accept"] == "application/json" for r in podium.requests)
    assert all(r.path.startswith("/api/agent/v1/attempts/11/") for r in podium.requests[1:])
    assert all(r.headers["X-Attempt-Secret"] == SECRET for r in podium.requests[1:])

    claim = podium.requests[0]
    assert (claim.method, claim.path, claim.headers["Content-Type"]) == ("POST", "/api/agent/v1/claim",
                                                                         "application/json")
    body = claim.json()
    assert body["name"] == "test-runner"
    assert body["accelerators"] == {"model": "cpu", "count": 0, "memory_gb": None, "indexes": []}
    assert body["free_indexes"] == []
    assert body["cpus"] >= 1 and body["memory_gb"] > 0
    assert set(body["software"]) == {"python", "platform"}

    lines = podium.beat_lines()
    assert [line for line in lines if ":::MLLOG" in line] == [mllog(0), mllog(1), mllog(2)]  # each once, in order
    assert "CUDA_VISIBLE_DEVICES=" in lines  # a CPU runner hides every GPU
    first_beat = podium.of("heartbeat")[0].json()
    assert first_beat["progress"] is None and first_beat["elapsed_seconds"] >= 0

    [upload] = podium.of("log")
    digest = hashlib.sha256(b"the MLLOG record\n").hexdigest()
    assert (upload.method, upload.body) == ("PUT", b"the MLLOG record\n")
    assert upload.headers["X-Content-SHA256"] == digest
    assert upload.headers["Content-Type"] == "text/plain"

    done = completion(podium)
    assert (done["outcome"], done["exit_code"], done["log_sha256"]) == ("finished", 0, digest)
    assert done["elapsed_seconds"] > 0
    assert mllog(2) in done["output_tail"].splitlines()
    assert not (tmp_path / "work" / "job-1-attempt-11").exists()  # reported: the server holds what matters


def test_the_job_gets_a_minimal_environment_without_the_runner_token(podium, clock, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PODIUM_RUNNER_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not for jobs")
    podium.script["claim"] = [claim_answer()]

    assert run_agent(podium.url, tmp_path, clock, token=False) == 0

    assert podium.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"
    lines = podium.beat_lines()
    [env_line] = [line for line in lines if line.startswith("ENV=")]
    # LC_CTYPE: Python itself sets it in a C locale (PEP 538).
    assert set(env_line.removeprefix("ENV=").split(",")) - {"LC_CTYPE"} == {
        "PATH", "HOME", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTHONPATH", "PYTHONUNBUFFERED"}
    assert f"HOME={tmp_path / 'work' / 'job-1-attempt-11'}" in lines


def test_the_verdict_judged_after_the_completion_is_read_from_the_attempt(podium, clock, tmp_path,
                                                                          caplog) -> None:
    caplog.set_level(logging.INFO, logger="runner_agent")
    podium.script["claim"] = [claim_answer()]
    podium.script["complete"] = [Answer(200, AWAITING)]
    podium.script["attempt"] = [Answer(503), Answer(200, {**AWAITING, "judgement": "judging"}), Answer(200, JUDGED)]
    timing = replace(FAST, verdict_poll_first_s=0.01, verdict_poll_max_s=0.02)

    assert main(agent_args(podium.url, tmp_path), clock=clock, timing=timing) == 0

    assert [r.kind for r in podium.requests if r.kind != "heartbeat"] == [
        "claim", "log", "complete", "attempt", "attempt", "attempt"]
    reads = podium.of("attempt")
    assert all(r.path == "/api/agent/v1/attempts/11" and r.headers["X-Attempt-Secret"] == SECRET for r in reads)
    assert "attempt 11 reported finished; the server is judging it" in caplog.text
    assert "attempt 11 judged: job reproduced, verdict reproduced" in caplog.text
    assert not (tmp_path / "work" / "job-1-attempt-11").exists()


@pytest.mark.parametrize("answer", [Answer(200, AWAITING), Answer(404, {"detail": "No such attempt."})])
def test_a_verdict_that_does_not_come_costs_the_agent_nothing(podium, clock, tmp_path, caplog, answer) -> None:
    podium.script["claim"] = [claim_answer()]
    podium.script["complete"] = [Answer(200, AWAITING)]
    podium.responders["attempt"] = lambda r: answer
    timing = replace(FAST, verdict_poll_first_s=0.01, verdict_poll_max_s=0.02, verdict_wait_s=0.2)

    assert main(agent_args(podium.url, tmp_path), clock=clock, timing=timing) == 0

    assert completion(podium)["outcome"] == "finished" and podium.of("attempt")
    said = "no verdict after 0.2 s; the job's page will show it" if answer.status == 200 else "(404: No such attempt.)"
    assert said in caplog.text
    assert not (tmp_path / "work" / "job-1-attempt-11").exists()


def test_a_crashing_job_completes_failed_with_its_output_tail(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [claim_answer(config={"mode": "crash", "log_text": "half a log\n"})]

    assert run_agent(podium.url, tmp_path, clock) == 0

    done = completion(podium)
    assert (done["outcome"], done["exit_code"]) == ("failed", 3)
    tail = done["output_tail"].splitlines()
    assert tail[-3:] == ["Traceback (most recent call last):", "RuntimeError: CUDA out of memory",
                         "[runner agent] the job exited with status 3"]
    assert mllog(0) in tail
    [upload] = podium.of("log")  # what it logged before crashing is kept
    assert done["log_sha256"] == hashlib.sha256(upload.body).hexdigest()


def test_a_job_past_its_time_limit_is_stopped_whole_and_completes_timeout(podium, clock, tmp_path) -> None:
    # It ignores SIGTERM, and so does its child: only the SIGKILL after the grace ends them.
    podium.script["claim"] = [claim_answer(config={"mode": "hang", "ignore_term": True}, time_limit=1)]

    assert run_agent(podium.url, tmp_path, clock) == 0

    done = completion(podium)
    assert done["outcome"] == "timeout"
    assert done["output_tail"].endswith("[runner agent] the job ran past its time limit of 1 s and was stopped")
    assert 1.0 <= done["elapsed_seconds"] < 5.0
    job_pid, child_pid = pids_in(done["output_tail"])
    assert gone(job_pid) and gone(child_pid)
    assert podium.of("log") == []


def test_a_cancel_in_a_heartbeat_answer_stops_the_job_and_completes_cancelled(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [claim_answer(config={"mode": "hang"})]
    podium.responders["heartbeat"] = once_the_job_printed_its_pids(Answer(200, {"lease_seconds": 60, "cancel": True}))

    assert run_agent(podium.url, tmp_path, clock) == 0

    done = completion(podium)
    assert done["outcome"] == "cancelled"
    assert done["output_tail"].endswith("[runner agent] the job was cancelled on the server and stopped")
    assert all(gone(pid) for pid in pids_in(done["output_tail"]))
    assert podium.of("log") == []


def test_a_409_on_a_heartbeat_kills_the_job_and_nothing_more_is_sent(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [claim_answer(config={"mode": "hang"})]
    podium.responders["heartbeat"] = once_the_job_printed_its_pids(Answer(409, {"detail": "lease expired"}))

    assert run_agent(podium.url, tmp_path, clock) == 0

    last = podium.requests[-1]
    assert (last.kind, last.answered) == ("heartbeat", 409)
    assert [r.answered for r in podium.of("heartbeat")].count(409) == 1
    assert podium.of("log") == [] and podium.of("complete") == []
    assert all(gone(pid) for pid in pids_in("\n".join(last.json()["log_lines"])))


def test_lines_of_a_heartbeat_that_failed_go_with_the_next(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [claim_answer(config={"sleep": 0.5})]
    failed: list[Request] = []

    def respond(request: Request) -> Answer:
        if not failed and any(":::MLLOG" in line for line in request.json()["log_lines"]):
            failed.append(request)
            return Answer(503)
        return OK_BEAT

    podium.responders["heartbeat"] = respond

    assert run_agent(podium.url, tmp_path, clock) == 0

    assert mllog(0) in failed[0].json()["log_lines"]
    assert [line for line in podium.beat_lines() if ":::MLLOG" in line] == [mllog(0), mllog(1), mllog(2)]
    assert completion(podium)["outcome"] == "finished"


def test_a_log_refused_for_its_checksum_is_sent_once_more(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [claim_answer()]
    podium.script["log"] = [Answer(400, {"detail": "X-Content-SHA256 does not match the body"})]

    assert run_agent(podium.url, tmp_path, clock) == 0

    first, second = podium.of("log")
    assert first.body == second.body
    assert completion(podium)["outcome"] == "finished"


def test_sigterm_stops_the_agent_and_its_job_without_reporting(podium, tmp_path) -> None:
    podium.script["claim"] = [claim_answer(config={"mode": "hang"})]
    agent = subprocess.Popen([sys.executable, "-m", "runner_agent", *agent_args(podium.url, tmp_path)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not any(line.startswith("PIDS=") for line in podium.beat_lines()) and time.monotonic() < deadline:
            time.sleep(0.05)
        agent.terminate()
        _, err = agent.communicate(timeout=10)
    finally:
        agent.kill()

    assert agent.returncode == 0, err
    assert "SIGTERM: stopping" in err
    assert all(gone(pid) for pid in pids_in("\n".join(podium.beat_lines())))
    assert podium.of("complete") == []  # the server re-queues it when the lease runs out


def test_a_killed_agent_takes_its_job_along_and_the_next_agent_cleans_up_the_rest(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [claim_answer(config={"mode": "hang"})]
    agent = start_agent_process(podium.url, tmp_path)
    pids: list[int] = []
    work = tmp_path / "work"
    try:
        pids = job_pid, child_pid = running_job_pids(podium)
        assert json.loads((work / ".job-1-attempt-11.json").read_text())["pgid"] == job_pid
        agent.kill()  # SIGKILL: no handler, nothing stopped
        agent.communicate(timeout=10)

        assert gone(job_pid)  # the kernel killed it with the agent (PR_SET_PDEATHSIG)
        assert running(child_pid)  # what the job started lives on, in the job's process group
        assert (work / "job-1-attempt-11").is_dir()

        assert run_agent(podium.url, tmp_path, clock) == 0  # nothing more to claim: it only cleans up

        assert gone(child_pid)
        assert sorted(path.name for path in work.iterdir()) == [leftovers.LOCK_NAME]
        assert podium.of("complete") == []
    finally:
        agent.kill()
        agent.communicate()
        kill_quietly(*pids)


def orphaned_group(home: Path) -> tuple[int, int, int]:
    """A process group whose leader ended, as the kernel leaves a job killed with its agent: (its id, its
    leader's start time, its one member), the member with `home` as HOME."""
    leader = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; print(subprocess.Popen([sys.executable, "
                               "'-c', 'import time; time.sleep(60)'], stdout=subprocess.DEVNULL).pid, flush=True)"],
                              env={"HOME": str(home), "PATH": os.defpath}, stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    info = leftovers.process_info(leader.pid)  # a zombie until waited for, which it is right after
    leader.communicate(timeout=10)
    assert info is not None and leftovers.process_info(leader.pid) is None
    return leader.pid, info.start, member


def test_an_earlier_agent_s_process_group_is_killed_only_while_it_is_still_the_job_s(podium, clock,
                                                                                         tmp_path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    others_home, jobs_group = 0, 0
    try:
        # 1: a pid recorded for a job, now another program's: the start time differs.
        started = leftovers.process_info(other.pid)
        assert started is not None
        leftovers.write_record(work / "job-1-attempt-11", pgid=other.pid, start=started.start - 1,
                               home=str(work / "job-1-attempt-11"))
        # 2: a group without its leader whose member is not the job's: another HOME.
        group, start, others_home = orphaned_group(tmp_path)
        leftovers.write_record(work / "job-2-attempt-22", pgid=group, start=start, home=str(work / "job-2-attempt-22"))
        # 3: the same as the job left it: its member has the attempt's work dir as HOME.
        (work / "job-3-attempt-33").mkdir()
        group, start, jobs_group = orphaned_group(work / "job-3-attempt-33")
        leftovers.write_record(work / "job-3-attempt-33", pgid=group, start=start, home=str(work / "job-3-attempt-33"))

        assert run_agent(podium.url, tmp_path, clock) == 0

        assert gone(jobs_group)
        assert running(other.pid) and running(others_home)
        assert sorted(path.name for path in work.iterdir()) == [leftovers.LOCK_NAME]
    finally:
        other.kill()
        other.wait()
        kill_quietly(*filter(None, [others_home, jobs_group]))


def test_a_second_agent_on_the_same_work_dir_exits_2(podium, clock, tmp_path, caplog) -> None:
    (tmp_path / "work").mkdir()
    held = leftovers.lock(tmp_path / "work")
    try:
        assert run_agent(podium.url, tmp_path, clock) == 2
    finally:
        os.close(held)

    assert f"another runner agent is running with the work dir {tmp_path / 'work'}" in caplog.text
    assert podium.requests == []


class StopWatched(threading.Event):
    """The agent's stop event, telling when an attempt's thread first waits on it: its job runs by then."""

    def __init__(self) -> None:
        super().__init__()
        self.attempt_waits = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        if threading.current_thread().name.startswith("attempt-"):
            self.attempt_waits.set()
        return super().wait(timeout)


@pytest.mark.parametrize("poll_s", [30.0, FAST.poll_s], ids=["stop-set-before-the-exit-is-seen",
                                                              "stop-set-after-the-exit-is-seen"])
def test_a_job_ended_by_the_signal_that_stops_the_agent_is_not_reported(podium, clock, tmp_path, poll_s) -> None:
    # systemd's SIGTERM reaches the agent and its job together; the job dies at once, the agent's
    # handler sets the stop a moment later. With poll_s 30 the agent looks again only once the stop is
    # set; with 0.02 it sees the job end first and the stop comes 0.2 s later.
    podium.script["claim"] = [claim_answer(config={"mode": "hang"})]
    stop, codes = StopWatched(), []
    agent = threading.Thread(target=lambda: codes.append(
        main(agent_args(podium.url, tmp_path), clock=clock, timing=replace(FAST, poll_s=poll_s), stop=stop)))
    agent.start()
    try:
        assert stop.attempt_waits.wait(10)
        job = json.loads((tmp_path / "work" / ".job-1-attempt-11.json").read_text())["pgid"]
        os.killpg(job, signal.SIGTERM)
        assert gone(job)
        time.sleep(10 * poll_s if poll_s < 1 else 0)
        stop.set()
        agent.join(10)
    finally:
        stop.set()
        agent.join(10)

    assert codes == [0]
    assert podium.of("log") == [] and podium.of("complete") == []  # re-queued once its lease runs out


# --- the server away ---------------------------------------------------------------------------------

def test_the_agent_waits_out_a_server_restart_with_backoff(tmp_path) -> None:
    holder = socket.socket()  # bound but not listening: connections are refused, as by a server that is down
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    servers: list[FakePodium] = []

    def server_comes_back(sleeps: int) -> None:
        if sleeps == 1:
            holder.close()
            fake = FakePodium(port)
            fake.script["claim"] = [Answer(503), claim_answer()]
            fake.script["complete"] = [Answer(429, {"detail": "slow down"}, {"Retry-After": "3"})]
            servers.append(fake.start())

    clock = RecordingClock(on_sleep=server_comes_back)
    try:
        assert run_agent(f"http://127.0.0.1:{port}", tmp_path, clock) == 0
        [podium] = servers
        assert clock.sleeps == [1.0, 2.0, 3.0]  # refused, 503 (doubled), then the complete's Retry-After
        assert [(r.kind, r.answered) for r in podium.requests if r.kind != "heartbeat"] == [
            ("claim", 503), ("claim", 200), ("log", 200), ("complete", 429), ("complete", 200)]
        assert podium.of("complete")[-1].json()["outcome"] == "finished"
    finally:
        holder.close()
        for server in servers:
            server.close()


def test_the_completion_is_sent_again_with_the_same_body_after_a_dropped_connection(podium, clock,
                                                                                      tmp_path) -> None:
    podium.script["claim"] = [claim_answer()]
    podium.script["complete"] = [DROP]

    assert run_agent(podium.url, tmp_path, clock) == 0

    first, second = podium.of("complete")
    assert (first.answered, second.answered) == (None, 200)
    assert first.body == second.body
    assert json.loads(second.body)["outcome"] == "finished"
    assert clock.sleeps == [1.0]


def test_a_refused_token_stops_the_agent_with_status_2(podium, clock, tmp_path, caplog) -> None:
    podium.script["claim"] = [Answer(401, {"detail": "Unknown runner token."})]

    assert run_agent(podium.url, tmp_path, clock) == 2

    assert len(podium.requests) == 1
    assert "refuses this runner's token (401): Unknown runner token." in caplog.text


def test_without_a_token_the_agent_exits_2_before_asking(podium, clock, tmp_path, caplog) -> None:
    assert run_agent(podium.url, tmp_path, clock, token=False) == 2

    assert podium.requests == []
    assert "PODIUM_RUNNER_TOKEN" in caplog.text


# --- what may run ------------------------------------------------------------------------------------

def test_a_module_off_the_allow_list_is_refused_without_running(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [claim_answer(module=FAKE_MODULE)]

    assert run_agent(podium.url, tmp_path, clock, allow=False) == 0  # only podium_reference.digits allowed

    assert [r.kind for r in podium.requests] == ["claim", "complete"]
    done = completion(podium)
    assert (done["outcome"], done["exit_code"], done["log_sha256"]) == ("failed", None, None)
    assert "module not allowed on this runner" in done["output_tail"]
    assert not (tmp_path / "work" / "job-1-attempt-11").exists()


def test_nothing_to_do_with_once_exits_0_after_one_claim(podium, clock, tmp_path) -> None:
    assert run_agent(podium.url, tmp_path, clock) == 0

    assert [(r.kind, r.answered) for r in podium.requests] == [("claim", 204)]


# --- accelerators ------------------------------------------------------------------------------------

def test_without_nvidia_smi_the_runner_offers_its_cpus() -> None:
    host = hardware.detect()

    assert host.accelerators == hardware.CPU_ONLY
    assert host.cpus >= 1
    assert host.memory_gb is not None and host.memory_gb > 0


def test_an_nvidia_smi_that_fails_means_cpus(job_host) -> None:
    write_fake_nvidia_smi(job_host, "NVIDIA-SMI has failed because it could not communicate with the driver\\n", 9)

    assert hardware.detect_accelerators() == hardware.CPU_ONLY


def test_two_gpus_are_detected_and_the_job_sees_only_its_own(podium, clock, tmp_path, job_host) -> None:
    write_fake_nvidia_smi(job_host, f"0, {H100}, 81559\\n1, {H100}, 81559\\n",
                          inventory=f"Attached GPUs : 2\\nGPU 0\\n    Product Name : {H100}\\nGPU 1\\n"
                                    f"    Product Name : {H100}\\n")
    podium.script["claim"] = [claim_answer(indexes=(1,))]

    assert run_agent(podium.url, tmp_path, clock) == 0

    assert sorted((job_host / "nvidia-smi.args").read_text().splitlines()) == [
        "--query-gpu=index,name,memory.total --format=csv,noheader,nounits", "-q"]
    body = podium.requests[0].json()
    # The inventory goes with each claim, as nvidia-smi -q printed it: Podium checks it against the labels.
    assert body["inventory"].splitlines()[0] == "Attached GPUs : 2" and body["inventory"].count(H100) == 2
    assert body["accelerators"] == {"model": H100, "count": 2, "memory_gb": 79.6, "indexes": [0, 1]}
    assert body["free_indexes"] == [0, 1]
    assert "CUDA_VISIBLE_DEVICES=1" in podium.beat_lines()
    assert completion(podium)["outcome"] == "finished"


def test_jobs_run_side_by_side_on_disjoint_gpus_and_idle_polling_backs_off(podium, tmp_path, job_host) -> None:
    write_fake_nvidia_smi(job_host, f"0, {H100}, 81559\\n1, {H100}, 81559\\n")
    podium.script["claim"] = [claim_answer(1, 11, indexes=(0,), config={"sleep": 1.0}),
                              claim_answer(2, 12, indexes=(1,), config={"sleep": 0.2})]
    clock, stop, codes = RecordingClock(), threading.Event(), []
    agent = threading.Thread(target=lambda: codes.append(
        main(agent_args(podium.url, tmp_path, once=False), clock=clock, timing=FAST, stop=stop)))
    agent.start()
    try:
        deadline = time.monotonic() + 15
        while (len(podium.of("complete")) < 2 or len(clock.sleeps) < 6) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        agent.join(10)

    assert codes == [0]
    claims = podium.of("claim")
    assert [c.json()["free_indexes"] for c in claims[:3]] == [[0, 1], [1], [1]]
    # With both GPUs busy it asked for nothing until the short job ended.
    assert podium.requests.index(claims[2]) > podium.requests.index(podium.of("complete")[0])
    assert [r.path.split("/")[-2] for r in podium.of("complete")] == ["12", "11"]
    assert "CUDA_VISIBLE_DEVICES=0" in podium.beat_lines(11)
    assert "CUDA_VISIBLE_DEVICES=1" in podium.beat_lines(12)
    assert clock.sleeps[:6] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


# --- pieces ------------------------------------------------------------------------------------------

def test_a_beat_carries_the_newest_200_lines_keeping_mllog_lines_first() -> None:
    lines = OutputLines()
    texts = [f":::MLLOG {i}" if i % 50 == 0 else f"line {i}" for i in range(300)]
    for text in texts:
        lines.add(text)

    batch, upto = lines.unsent()

    others = [t for t in texts if ":::MLLOG" not in t]
    expected = {t for t in texts if ":::MLLOG" in t} | set(others[-(200 - 6):])
    assert batch == [t for t in texts if t in expected]
    lines.sent(upto)
    assert lines.unsent() == ([], 300)
    lines.add("one more")
    assert lines.unsent()[0] == ["one more"]


def test_the_agent_needs_nothing_beyond_the_standard_library_and_core_http() -> None:
    # -S: no site-packages at all, as on a GPU host that has only a Python.
    ran = subprocess.run([sys.executable, "-S", "-c", "import sys, runner_agent.cli; "
                          "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names))); "
                          "print(sorted(m for m in sys.modules if m.split('.')[0] == 'core'))"],
                         cwd=ROOT, capture_output=True, text=True, check=True)

    assert ran.stdout.splitlines() == ["['__main__', 'core', 'runner_agent']", "['core', 'core.http']"]


def test_usage() -> None:
    ran = subprocess.run([sys.executable, "-m", "runner_agent", "--help"], cwd=ROOT, capture_output=True, text=True,
                         check=False)

    assert ran.returncode == 0
    assert ran.stdout.startswith("usage: python -m runner_agent [-h] --server URL [--token TOKEN]")
    assert "--allow-module MODULE" in ran.stdout
    text = " ".join(ran.stdout.split())
    # The server knows a runner by its token; the name only labels it.
    assert "shown in the agent's log and sent with each claim for the server's records" in text
    assert "name on the server" not in text
