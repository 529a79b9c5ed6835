"""The claim loop: ask for work while there is room, run each attempt on its own thread.

A GPU runner takes a job only while some of its GPUs are free, and lets attempts run side by side
only on the disjoint GPUs the server assigns them; a CPU runner takes `max_jobs` at once. Between
claims the loop also reads the verdicts of attempts the server is judging (runner_agent/verdict.py);
an attempt's GPUs are free again as soon as its completion was taken, not when it was judged.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from runner_agent.attempt import AttemptRun, Claim, ProtocolError, parse_claim
from runner_agent.client import AgentError, Client, Clock, Stopping
from runner_agent.hardware import Host, inventory, software
from runner_agent.settings import Settings
from runner_agent.verdict import Verdicts

log = logging.getLogger("runner_agent")


class Agent:
    def __init__(self, settings: Settings, host: Host, client: Client, *, clock: Clock,
                 stop: threading.Event) -> None:
        self.settings = settings
        self.timing = settings.timing
        self.host = host
        self.client = client
        self.clock = clock
        self.stop = stop
        self._running: dict[threading.Thread, AttemptRun] = {}  # touched by the loop's thread only
        self._verdicts = Verdicts(client, clock, settings.timing)
        self._freed = threading.Event()
        self._started = 0
        self._inventory = inventory()  # once: nvidia-smi -q takes seconds on a large host

    def run(self) -> int:
        """0 once stopped (or, with `once`, after one attempt or none); 2 when the server refuses the runner."""
        accelerators = self.host.accelerators
        log.info("runner %r: %s, %d CPUs, %s GB memory; up to %d job(s) at once; modules: %s; %s; asking %s",
                 self.settings.name,
                 f"{accelerators.count} × {accelerators.model}" if self.host.has_gpus else "no GPU",
                 self.host.cpus, self.host.memory_gb, self.settings.max_jobs,
                 ", ".join(sorted(self.settings.allowed_modules)),
                 f"runs submitted implementations with the datasets of {', '.join(sorted(self.settings.datasets))}"
                 if self.settings.run_implementations else "runs no submitted implementation", self.client.server)
        try:
            self._loop()
        except Stopping:
            pass
        except AgentError as exc:
            log.error("%s", exc)
            return 2
        finally:
            self._finish()
        return 0

    def claim_body(self) -> dict[str, Any]:
        accelerators = self.host.accelerators
        return {
            "name": self.settings.name,
            "accelerators": {"model": accelerators.model, "count": accelerators.count,
                             "memory_gb": accelerators.memory_gb, "indexes": list(accelerators.indexes)},
            "free_indexes": self.free_indexes(),
            "cpus": self.host.cpus,
            "memory_gb": self.host.memory_gb,
            "software": self._software(),
            "datasets": {key: dataset.sha256 for key, dataset in self.settings.datasets.items()},
            "runs_implementations": self.settings.run_implementations,
            "inventory": self._inventory,
        }

    def _software(self) -> dict[str, str]:
        container = self.settings.container
        return {**software(), **({"container": f"{container.kind} {container.image}"} if container else {})}

    def free_indexes(self) -> list[int]:
        busy = self._busy_indexes()
        return [i for i in self.host.accelerators.indexes if i not in busy]

    def _busy_indexes(self) -> set[int]:
        return {i for run in self._running.values() for i in run.accelerator_indexes}

    def _loop(self) -> None:
        idle = self.timing.idle_first_s
        while not self.stop.is_set():
            self._freed.clear()  # before looking, so that a job ending meanwhile still wakes the wait below
            self._collect_ended()
            self._verdicts.read_due()
            if self.settings.once and self._started:
                if self._running:
                    self._freed.wait(1.0)
                elif not self._verdicts or self.clock.sleep(self._verdicts.until_next(), self.stop):
                    return  # done: the job reported and its verdict read (or given up on), or stopping
                continue
            if len(self._running) >= self.settings.max_jobs or (self.host.has_gpus and not self.free_indexes()):
                self._freed.wait(1.0)
                continue

            reply = self.client.request("POST", "/claim", body=Client.json_body(self.claim_body()),
                                        headers=Client.json_headers(), what="claiming a job")
            if reply.status == 200:
                try:
                    claim = parse_claim(reply.json())
                except ProtocolError as exc:
                    raise AgentError(f"the server's answer to a claim does not follow the agent API: {exc}") from None
                self._start(claim)
                idle = self.timing.idle_first_s
                continue
            if reply.status == 204:
                if self.settings.once:
                    log.info("nothing to do")
                    return
            elif 300 <= reply.status < 400:
                raise AgentError(f"the server redirects ({reply.status}) to {reply.headers.get('Location')}: pass "
                                 "that address as --server")
            elif reply.status in (401, 403):
                raise AgentError(f"the server refuses this runner's token ({reply.status}): {reply.detail()}")
            elif reply.status in (400, 404, 405):
                raise AgentError(f"the server refused the claim ({reply.status}): {reply.detail()}; is "
                                 f"{self.client.server} a Podium server with the agent API v1?")
            else:
                log.warning("claiming a job: the server answered %d: %s", reply.status, reply.detail())
            if self.clock.sleep(idle, self.stop):
                return
            idle = min(idle * 2, self.timing.idle_max_s)

    def _collect_ended(self) -> None:
        running = {}
        for thread, run in self._running.items():
            if thread.is_alive():
                running[thread] = run
            elif run.verdict_pending:
                self._verdicts.add(run.attempt.id, run.attempt.secret)
        self._running = running

    def _start(self, claim: Claim) -> None:
        refusal = None
        if claim.job is not None and claim.problem is None:
            wanted = set(claim.accelerator_indexes)
            absent = wanted - set(self.host.accelerators.indexes)
            busy = wanted & self._busy_indexes()
            if absent or busy:
                refusal = (f"the server assigned accelerators {sorted(wanted)}, of which {sorted(absent | busy)} "
                           f"{'are absent from' if absent else 'are busy on'} this runner")
        run = AttemptRun(claim, settings=self.settings, client=self.client, clock=self.clock, stop=self.stop,
                         refusal=refusal)
        thread = threading.Thread(target=self._run_attempt, args=(run,), name=f"attempt-{claim.attempt.id}",
                                  daemon=True)
        self._running[thread] = run
        self._started += 1
        thread.start()

    def _run_attempt(self, run: AttemptRun) -> None:
        try:
            run.run()
        finally:
            self._freed.set()

    def _finish(self) -> None:
        """Stop what still runs (only when the agent stops or fails) and wait for it."""
        if not any(thread.is_alive() for thread in self._running):
            return
        self.stop.set()
        log.info("stopping %d running job(s)", len(self._running))
        for thread in self._running:
            thread.join(self.timing.kill_grace_s + self.timing.request_timeout_s + 5)
