"""Reading the verdicts of completed attempts, which the server judges after it took the completion.

A completion is answered at once with `"judgement": "awaiting"`: the server checks the log on a worker
of its own. The agent then looks at the attempt (`GET /attempts/<id>`) now and then, backing off,
until the verdict is there, and logs it. Nothing depends on it: the attempt is over for the agent once
the completion was taken, so a verdict that never comes only goes unlogged (the job's page has it).
Looking is one try at a time from the claim loop, never a retry loop that could hold up a claim.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from runner_agent.client import AgentError, Client, Clock
from runner_agent.settings import Timing

# The judgements still on their way; anything else (judged, or a server that judged in the request and
# says no judgement at all) is the final word.
PENDING = frozenset({"awaiting", "judging"})

log = logging.getLogger("runner_agent")


def pending(answer: dict[str, Any]) -> bool:
    return answer.get("judgement") in PENDING


def describe(answer: dict[str, Any]) -> str:
    reason = answer.get("reason")
    return f"job {answer.get('job_state')}, verdict {answer.get('verdict')}" + (f" ({reason})" if reason else "")


@dataclass
class _Awaited:
    attempt_id: int
    secret: str
    due: float
    delay: float
    give_up_at: float


class Verdicts:
    """The attempts whose verdict the agent still waits for; touched by the claim loop's thread only."""

    def __init__(self, client: Client, clock: Clock, timing: Timing) -> None:
        self.client = client
        self.clock = clock
        self.timing = timing
        self._awaited: list[_Awaited] = []

    def __bool__(self) -> bool:
        return bool(self._awaited)

    def add(self, attempt_id: int, secret: str) -> None:
        now = self.clock.now()
        self._awaited.append(_Awaited(attempt_id, secret, due=now, delay=self.timing.verdict_poll_first_s,
                                      give_up_at=now + self.timing.verdict_wait_s))

    def until_next(self) -> float:
        """Seconds until the next look is due (0 when one is due now)."""
        now = self.clock.now()
        return max(0.0, min((a.due for a in self._awaited), default=now) - now)

    def read_due(self) -> None:
        """One look at each attempt whose turn it is."""
        now = self.clock.now()
        waiting = []
        for awaited in self._awaited:
            if awaited.due > now:
                waiting.append(awaited)
                continue
            if self._settled(awaited):
                continue
            if now >= awaited.give_up_at:
                log.warning("attempt %d: no verdict after %g s; the job's page will show it", awaited.attempt_id,
                            self.timing.verdict_wait_s)
                continue
            awaited.due = now + awaited.delay
            awaited.delay = min(awaited.delay * 2, self.timing.verdict_poll_max_s)
            waiting.append(awaited)
        self._awaited = waiting

    def _settled(self, awaited: _Awaited) -> bool:
        """True once there is nothing more to wait for: the verdict, or an answer that will not change."""
        try:
            reply, problem = self.client.once("GET", f"/attempts/{awaited.attempt_id}",
                                              headers={"X-Attempt-Secret": awaited.secret})
        except AgentError as exc:
            log.warning("attempt %d: cannot read its verdict: %s", awaited.attempt_id, exc)
            return True
        if problem is not None or reply is None:
            log.info("attempt %d: reading its verdict: %s; trying again later", awaited.attempt_id, problem)
            return False
        if reply.status != 200:
            log.warning("attempt %d: the server does not say its verdict (%d: %s)", awaited.attempt_id,
                        reply.status, reply.detail())
            return True
        answer = reply.document()
        if pending(answer):
            return False
        log.info("attempt %d judged: %s", awaited.attempt_id, describe(answer))
        return True
