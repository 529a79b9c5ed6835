"""One attempt at a job, from the claim's answer to the completion the server acknowledges.

Start the allow-listed module in a fresh work dir, heartbeat while it runs (carrying its new lines,
obeying a cancel), stop it at its time limit, upload its log file with the file's sha256, complete
with the outcome. When the server says the attempt is no longer this runner's (409, 404, 401, 403)
the job is killed and nothing more is sent: another runner may be running it by now.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner_agent import leftovers, verdict
from runner_agent.client import LOST_STATUSES, Client, Clock, Reply, Stopping
from runner_agent.container import implementation_argv
from runner_agent.datasets import checksum_problem
from runner_agent.implementation import ENTRY, Code, ImplementationProblem, parse_code, unpack
from runner_agent.implementation import environment as implementation_environment
from runner_agent.output import OutputLines
from runner_agent.process import JobProcess
from runner_agent.settings import Settings

CONFIG_NAME = "config.json"
LOG_NAME = "result.txt"
IMPL_DIR = "impl"
MAX_TAIL_CHARS = 64 * 1024
NOTE_PREFIX = "[runner agent] "
# Signals that stop a whole service (systemd sends SIGTERM to the agent and its jobs at once): a job they
# ended may have ended because the agent is stopping, before the agent's own handler said so.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})

log = logging.getLogger("runner_agent")


class ProtocolError(ValueError):
    """The server's answer does not follow the agent API."""


class AttemptLost(Exception):
    """The server no longer takes reports on this attempt."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(f"{reply.status}: {reply.detail()}")
        self.status = reply.status


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    module: str
    config: dict[str, Any]
    time_limit_s: float
    code: Code | None = None  # a submission's implementation, run by its run_and_time.sh; None: the module


@dataclass(frozen=True)
class Attempt:
    id: int
    number: int
    secret: str
    lease_s: float
    heartbeat_s: float


@dataclass(frozen=True)
class Claim:
    attempt: Attempt
    job: Job | None  # None when the job part is unusable: the attempt is then completed as failed
    problem: str | None
    accelerator_indexes: tuple[int, ...]


def _number(document: dict[str, Any], key: str, *, whole: bool = False) -> Any:
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or value < 0:
        raise ProtocolError(f"{key} is {value!r}, not a {'whole ' if whole else ''}number ≥ 0")
    return value


def parse_claim(document: Any) -> Claim:
    """The answer to a claim; ProtocolError when even its attempt is unusable (nothing can be reported)."""
    if not isinstance(document, dict) or not isinstance(document.get("attempt"), dict):
        raise ProtocolError(f"a claim answer without an attempt: {str(document)[:200]}")
    raw = document["attempt"]
    if not isinstance(raw.get("secret"), str) or not raw["secret"]:
        raise ProtocolError("the attempt has no secret")
    attempt = Attempt(id=_number(raw, "id", whole=True), number=int(raw.get("number") or 0), secret=raw["secret"],
                      lease_s=float(_number(raw, "lease_seconds")),
                      heartbeat_s=float(_number(raw, "heartbeat_seconds")))
    try:
        job, indexes = _parse_job(document)
    except ProtocolError as exc:
        return Claim(attempt=attempt, job=None, problem=f"the server's job description is unusable: {exc}",
                     accelerator_indexes=())
    return Claim(attempt=attempt, job=job, problem=None, accelerator_indexes=indexes)


def _parse_job(document: dict[str, Any]) -> tuple[Job, tuple[int, ...]]:
    raw = document.get("job")
    if not isinstance(raw, dict):
        raise ProtocolError("no job")
    if not isinstance(raw.get("module"), str) or not isinstance(raw.get("config"), dict):
        raise ProtocolError("the job needs a module name and a config object")
    limit = float(_number(raw, "time_limit_seconds"))
    if limit <= 0:
        raise ProtocolError("time_limit_seconds must be more than 0")
    try:
        code = parse_code(raw)
    except ValueError as exc:
        raise ProtocolError(str(exc)) from None
    job = Job(id=_number(raw, "id", whole=True), kind=str(raw.get("kind") or ""), module=raw["module"],
              config=raw["config"], time_limit_s=limit, code=code)
    assignment = document.get("assignment") or {}
    indexes = assignment.get("accelerator_indexes") if isinstance(assignment, dict) else None
    if not isinstance(indexes, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
        raise ProtocolError("assignment.accelerator_indexes must be a list of whole numbers")
    return job, tuple(indexes)


def job_environment(work_dir: Path, indexes: tuple[int, ...]) -> dict[str, str]:
    """The job's whole environment: nothing of the agent's (its token least of all) beyond what is named here."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(work_dir),
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in indexes),  # empty: no GPU at all
        # CUDA numbers GPUs fastest first unless told otherwise; the indexes the server assigns are
        # nvidia-smi's, which follow the PCI bus.
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "PYTHONUNBUFFERED": "1",
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


ENGINE_VARIABLES = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "DOCKER_CERT_PATH",
                    "DOCKER_TLS_VERIFY", "CONTAINER_HOST", "XDG_RUNTIME_DIR")


def engine_environment() -> dict[str, str]:
    """The container engine client's environment: how to reach the engine, nothing else of the agent's.
    The job inside the container gets only what `Container.argv` sets."""
    return {name: os.environ[name] for name in ENGINE_VARIABLES if os.environ.get(name)}


def _exit_note(code: int) -> str:
    if code < 0:
        try:
            return f"the job was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the job was killed by signal {-code}"
    return f"the job exited with status {code}"


@dataclass(frozen=True)
class Ending:
    outcome: str  # "exited", "timeout" or "cancelled"
    exit_code: int
    note: str | None


class AttemptRun:
    """Runs on its own thread (`run`); reports on the server, never raises."""

    def __init__(self, claim: Claim, *, settings: Settings, client: Client, clock: Clock, stop: threading.Event,
                 refusal: str | None = None) -> None:
        self.claim = claim
        self.attempt = claim.attempt
        self.settings = settings
        self.timing = settings.timing
        self.client = client
        self.clock = clock
        self.stop = stop
        self.refusal = refusal
        self.path = f"/attempts/{claim.attempt.id}"
        self.verdict_pending = False  # set once the server took the completion and judges it after
        self.cancelled = False  # a cancel heard before the job started
        self.work_dir = settings.work_dir / f"job-{claim.job.id if claim.job else 'x'}-attempt-{claim.attempt.id}"

    @property
    def accelerator_indexes(self) -> tuple[int, ...]:
        return () if self.refusal or self.claim.job is None else self.claim.accelerator_indexes

    def run(self) -> None:
        done = False
        try:
            done = self._run()
        except AttemptLost as exc:
            done = True
            log.warning("attempt %d is no longer this runner's (%s): job stopped, nothing more reported",
                        self.attempt.id, exc)
        except Stopping:
            log.warning("attempt %d abandoned as the agent stops: the server re-queues its job once the "
                        "lease runs out", self.attempt.id)
        except Exception:
            log.exception("attempt %d failed inside the agent; the server re-queues its job once the lease "
                          "runs out", self.attempt.id)
        if done:
            # The server holds the log and the output tail now; a long-lived runner must not fill its disk.
            if self.work_dir.exists():
                shutil.rmtree(self.work_dir, ignore_errors=True)
            leftovers.forget(self.work_dir)

    def _run(self) -> bool:
        """True once the server took the completion."""
        job = self.claim.job
        refusal = self.refusal or self.claim.problem
        if job is not None and refusal is None:
            refusal = self._code_refusal(job.code) if job.code is not None else self._module_refusal(job.module)
        if job is None or refusal is not None:
            log.warning("attempt %d refused: %s", self.attempt.id, refusal)
            return self._complete(outcome="cancelled" if self.cancelled else "failed", exit_code=None, tail=[],
                                  note=refusal, sha256=None, elapsed=0.0)

        log.info("attempt %d (#%d) of job %d (%s): running %s on accelerators %s for at most %g s", self.attempt.id,
                 self.attempt.number, job.id, job.kind,
                 f"{job.code.path} with {job.code.system_config}" if job.code else job.module,
                 list(self.claim.accelerator_indexes) or "none", job.time_limit_s)
        start = self.clock.now()
        log_path = self.work_dir / LOG_NAME
        try:
            config_path = self._prepare(job)
            # An implementation's log is the :::MLLOG lines it prints, collected as MLCommons does.
            sink = log_path.open("w", encoding="utf-8") if job.code is not None else None
            lines = OutputLines(mllog=sink)
            process = self._start(job, config_path, log_path, lines)
        except ImplementationProblem as exc:
            return self._complete(outcome="failed", exit_code=None, tail=[], note=str(exc), sha256=None,
                                  elapsed=self.clock.now() - start)
        except OSError as exc:
            return self._complete(outcome="failed", exit_code=None, tail=[], note=f"could not start the job: {exc}",
                                  sha256=None, elapsed=self.clock.now() - start)

        try:
            ending = self._supervise(process, lines, start, job.time_limit_s)
        finally:
            leftovers.forget(self.work_dir)  # reaped (on every path): nothing of the job is left to clean up
            if sink is not None:
                sink.close()
        elapsed = self.clock.now() - start
        if lines.has_unsent():
            self._heartbeat(lines, elapsed)  # the last lines, for whoever follows the run live

        note, sha256, outcome = ending.note, None, ending.outcome
        if ending.outcome == "exited":
            outcome = "finished" if ending.exit_code == 0 else "failed"
            note = None if ending.exit_code == 0 else _exit_note(ending.exit_code)
            if log_path.is_file():
                sha256, problem = self._upload(log_path)
                if problem is not None:
                    outcome, note = "failed", "; ".join(filter(None, [note, problem]))
            elif ending.exit_code == 0:
                outcome, note = "failed", f"the job exited 0 but wrote no log file at {log_path}"
        log.info("attempt %d: %s%s", self.attempt.id, outcome, f" ({note})" if note else "")
        return self._complete(outcome=outcome, exit_code=ending.exit_code, tail=lines.tail(), note=note,
                              sha256=sha256, elapsed=elapsed)

    def _module_refusal(self, module: str) -> str | None:
        if module in self.settings.allowed_modules:
            return None
        return f"module not allowed on this runner: {module!r} (allowed: " \
               f"{', '.join(sorted(self.settings.allowed_modules))})"

    def _code_refusal(self, code: Code) -> str | None:
        """Why this runner will not run the implementation: not allowed here, no dataset, a changed dataset."""
        if not self.settings.run_implementations:
            return "this runner does not run submitted implementations (its agent runs without --run-implementations)"
        dataset = self.settings.datasets.get(code.benchmark)
        if dataset is None:
            return f"this runner holds no dataset for {code.benchmark}"
        return self._beating_while(lambda: checksum_problem(dataset, code.dataset_sha256),
                                   f"checking the checksum of the {code.benchmark} dataset at {dataset.path}")

    def _beating_while(self, work: Callable[[], str | None], what: str) -> str | None:
        """`work`'s answer, computed on its own thread while this one keeps the lease: hashing a real dataset
        (hundreds of GB) takes far longer than a lease, and an attempt silent that long is given to another
        runner. A cancel heard meanwhile is the answer instead (`self.cancelled` set)."""
        answer: list[str | None] = []

        def target() -> None:
            try:
                answer.append(work())
            except OSError as exc:
                answer.append(f"{what} failed: {exc}")

        thread = threading.Thread(target=target, name=f"check-{self.attempt.id}", daemon=True)
        start = self.clock.now()
        every = max(self.attempt.heartbeat_s, self.timing.min_heartbeat_s)
        next_beat = start + every  # a quick check sends nothing; the first beat comes when a lease would miss it
        lines = OutputLines()
        lines.add(NOTE_PREFIX + what)
        thread.start()
        while thread.is_alive():
            if self.stop.is_set():
                raise Stopping  # the thread reads files only: left to end with the process
            now = self.clock.now()
            if now >= next_beat:
                cancel, wait = self._heartbeat(lines, now - start)
                if cancel:
                    self.cancelled = True
                    return f"the job was cancelled on the server while {what}"
                next_beat = self.clock.now() + max(every, wait or 0.0)
            thread.join(self.timing.poll_s)
        return answer[0] if answer else f"{what} failed"

    def _fetch_code(self, code: Code) -> Path:
        reply = self.client.request("GET", f"{self.path}/implementation",
                                    headers={"X-Attempt-Secret": self.attempt.secret},
                                    what=f"fetching the implementation of attempt {self.attempt.id}")
        if reply.status in LOST_STATUSES:
            raise AttemptLost(reply)
        if reply.status != 200:
            raise ImplementationProblem(f"the server did not give the implementation ({reply.status}): "
                                        f"{reply.detail()}")
        impl_dir = self.work_dir / IMPL_DIR
        unpack(reply.body, code, impl_dir)
        (self.work_dir / "logs").mkdir()
        return impl_dir

    def _start(self, job: Job, config_path: Path, log_path: Path, lines: OutputLines) -> JobProcess:
        if job.code is not None:
            return self._start_code(job, job.code, config_path, lines)
        indexes = self.claim.accelerator_indexes
        container = self.settings.container
        if container is None:
            argv = [sys.executable, "-m", job.module, "--config", str(config_path), "--log", str(log_path)]
            env = job_environment(self.work_dir, indexes)
            process = JobProcess(argv, cwd=self.work_dir, env=env, lines=lines, poll_s=self.timing.poll_s)
            self._record(process, home=env["HOME"])
            return process
        name = f"podium-job-{job.id}-attempt-{self.attempt.id}"
        argv = container.argv(name=name, module=job.module, work_dir=self.work_dir, config=config_path,
                              log_file=log_path, indexes=indexes)
        # Recorded before it starts: a container outlives an agent killed while its engine client starts it.
        leftovers.write_record(self.work_dir, engine=container.engine, container=name)
        process = JobProcess(argv, cwd=self.work_dir, env=engine_environment(), lines=lines,
                             poll_s=self.timing.poll_s, cleanup=lambda: container.remove(name))
        self._record(process, home=None)
        return process

    def _start_code(self, job: Job, code: Code, config_path: Path, lines: OutputLines) -> JobProcess:
        impl_dir = self._fetch_code(code)
        dataset = self.settings.datasets[code.benchmark].path.resolve()
        indexes = self.claim.accelerator_indexes
        env = implementation_environment(job_environment(self.work_dir, indexes), code=code, data_dir=str(dataset),
                                         log_dir=str(self.work_dir / "logs"), config=str(config_path),
                                         seed=job.config.get("seed"), python=sys.executable)
        container = self.settings.container
        if container is None:
            process = JobProcess(["bash", "-c", ENTRY], cwd=impl_dir, env=env, lines=lines,
                                 poll_s=self.timing.poll_s)
            self._record(process, home=env["HOME"])
            return process
        name = f"podium-job-{job.id}-attempt-{self.attempt.id}"
        argv = implementation_argv(container, name=name, work_dir=self.work_dir, impl_dir=impl_dir, dataset=dataset,
                                   env=env, indexes=indexes, entry=ENTRY)
        leftovers.write_record(self.work_dir, engine=container.engine, container=name)
        process = JobProcess(argv, cwd=self.work_dir, env=engine_environment(), lines=lines,
                             poll_s=self.timing.poll_s, cleanup=lambda: container.remove(name))
        self._record(process, home=None)
        return process

    def _record(self, process: JobProcess, home: str | None) -> None:
        """What a later agent must clean up if this one is killed while the job runs (see `leftovers`)."""
        info = leftovers.process_info(process.pid)
        if info is None:
            return  # no /proc (not Linux), or the job ended already: nothing to find later
        try:
            leftovers.write_record(self.work_dir, pgid=process.pid, start=info.start, home=home)
        except OSError as exc:
            log.warning("attempt %d: could not record its job for a later agent to clean up: %s", self.attempt.id,
                        exc)

    def _prepare(self, job: Job) -> Path:
        if self.work_dir.exists():  # a fresh dir per attempt: nothing of an earlier try may leak into this one
            shutil.rmtree(self.work_dir)
        leftovers.forget(self.work_dir)
        self.work_dir.mkdir(mode=0o700, parents=True)
        config_path = self.work_dir / CONFIG_NAME
        config_path.write_text(json.dumps(job.config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return config_path

    def _supervise(self, process: JobProcess, lines: OutputLines, start: float, limit_s: float) -> Ending:
        deadline = start + limit_s
        every = max(self.attempt.heartbeat_s, self.timing.min_heartbeat_s)
        next_beat = start  # the first right after the start: the server learns the job runs
        try:
            while True:
                # The stop first: a job that ended as the agent began to stop (both signalled at once, by
                # systemd say) is not reported; the server re-queues it once its lease runs out.
                if self.stop.is_set():
                    process.stop(self.timing.kill_grace_s)
                    raise Stopping
                if process.exited():
                    code = process.reap()
                    if -code in STOP_SIGNALS and self.stop.wait(self.timing.stop_settle_s):
                        raise Stopping  # the signal was for the agent too, whose handler had not run yet
                    return Ending("exited", code, None)
                now = self.clock.now()
                if now >= deadline:
                    code = process.stop(self.timing.kill_grace_s)
                    return Ending("timeout", code, f"the job ran past its time limit of {limit_s:g} s and was stopped")
                if now >= next_beat:
                    cancel, wait = self._heartbeat(lines, now - start)
                    if cancel:
                        log.info("attempt %d: the server asks to cancel it", self.attempt.id)
                        code = process.stop(self.timing.kill_grace_s)
                        return Ending("cancelled", code, "the job was cancelled on the server and stopped")
                    next_beat = self.clock.now() + max(every, wait or 0.0)
                self.stop.wait(self.timing.poll_s)
        except BaseException:
            process.reap()  # SIGKILL: an attempt that is not ours any more must not hold the GPUs a moment longer
            raise

    def _heartbeat(self, lines: OutputLines, elapsed: float) -> tuple[bool, float | None]:
        """One beat: (whether the server asks to cancel, how long it asked us to wait before the next)."""
        batch, upto = lines.unsent()
        body = Client.json_body({"progress": None, "log_lines": batch, "elapsed_seconds": round(elapsed, 3)})
        reply, problem = self.client.once("POST", f"{self.path}/heartbeat", body=body,
                                          headers=Client.json_headers(self.attempt.secret),
                                          timeout_s=self.timing.heartbeat_timeout_s)
        if problem is not None:
            # Its lines stay unsent for the next beat; a server down past the lease answers 409 when back.
            log.warning("heartbeat of attempt %d: %s; trying again at the next beat", self.attempt.id, problem)
            return False, reply.retry_after() if reply is not None else None
        assert reply is not None
        if reply.status in LOST_STATUSES:
            raise AttemptLost(reply)
        lines.sent(upto)
        if reply.status != 200:
            # Sending the same lines again would be refused again: they are dropped, the job goes on.
            log.warning("heartbeat of attempt %d refused (%d): %s", self.attempt.id, reply.status, reply.detail())
            return False, None
        return reply.document().get("cancel") is True, None

    def _upload(self, log_path: Path) -> tuple[str | None, str | None]:
        """(the sha256 the server holds, None), or (None, why it does not hold the log)."""
        for tries in (1, 2):
            try:
                data = log_path.read_bytes()
            except OSError as exc:
                return None, f"could not read the log file: {exc}"
            digest = hashlib.sha256(data).hexdigest()
            headers = {"X-Attempt-Secret": self.attempt.secret, "X-Content-SHA256": digest,
                       "Content-Type": "text/plain"}
            reply = self.client.request("PUT", f"{self.path}/log", body=data, headers=headers,
                                        what=f"uploading the log of attempt {self.attempt.id}")
            if reply.status in LOST_STATUSES:
                raise AttemptLost(reply)
            if reply.status == 200:
                return digest, None
            if reply.status == 400 and tries == 1:  # bytes changed on the way: once more
                log.warning("the server refused the log of attempt %d (%s); sending it once more", self.attempt.id,
                            reply.detail())
                continue
            return None, f"the server refused the log file ({reply.status}): {reply.detail()}"
        raise AssertionError("unreachable")

    def _complete(self, *, outcome: str, exit_code: int | None, tail: list[str], note: str | None,
                  sha256: str | None, elapsed: float) -> bool:
        text = "\n".join([*tail, *([NOTE_PREFIX + note] if note else [])])[-MAX_TAIL_CHARS:]
        # One body for every try: the server answers a repeat as it answered the first.
        body = Client.json_body({"outcome": outcome, "exit_code": exit_code, "output_tail": text,
                                 "log_sha256": sha256, "elapsed_seconds": round(elapsed, 3)})
        reply = self.client.request("POST", f"{self.path}/complete", body=body,
                                    headers=Client.json_headers(self.attempt.secret),
                                    what=f"completing attempt {self.attempt.id}")
        if reply.status in LOST_STATUSES:
            raise AttemptLost(reply)
        if reply.status != 200:
            log.error("the server refused the completion of attempt %d (%d): %s", self.attempt.id, reply.status,
                      reply.detail())
            return False
        answer = reply.document()
        if verdict.pending(answer):
            self.verdict_pending = True  # the claim loop reads it from the attempt (runner_agent/verdict.py)
            log.info("attempt %d reported %s; the server is judging it", self.attempt.id, outcome)
        else:  # judged already, or a server that judges within the completion
            log.info("attempt %d reported %s: %s", self.attempt.id, outcome, verdict.describe(answer))
        return True
