"""Handing work to the Celery workers without letting a failing broker hold the caller.

Why: a task is published from the request that stored its work (an upload, a runner's completed attempt),
after the commit. The work is already safe in the database and a sweeper hands out whatever waits too long,
so a publish that fails may be dropped, but not waited for: with a stuck broker (Redis accepting
connections and answering nothing) each publish waits out its socket timeouts and retry
(CELERY_BROKER_TRANSPORT_OPTIONS, ~4-6 s), and a burst of uploads would hold every thread of the web
server. So a call skips the broker while another publish of this process has waited on it for over
SLOW_S, and for RETRY_S after a failure, after which one call at a time asks again: a stuck broker holds a
request or two per process every few seconds, the others are answered at once, and their work is handed
out by the sweeper once the broker answers. The log names each piece of work not handed over and says when
the broker answers again.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import current_app

log = logging.getLogger("podium.broker")

RETRY_S = 5.0  # after a failed publish, how long this process does not ask the same broker again
# A publish still waiting after this long (a working Redis answers in a millisecond) marks the broker as
# failing for the calls after it, before its own timeouts end it: otherwise every call arriving in those
# seconds would wait beside it.
SLOW_S = 1.0


def _clock() -> float:
    return time.monotonic()  # a function of this module's, so that tests can move it alone


class _Health:
    """Process-wide, per broker address (a test, or an operator's shell, may point the app at another)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.down_until: dict[str, float] = {}  # broker URL → _clock() before which no publish asks it
        self.down_since: dict[str, float] = {}  # broker URL → when its failure started, for the log
        self.asking: dict[str, list[float]] = {}  # broker URL → when each publish now waiting on it began

    def begin(self, broker: str, now: float) -> str | None:
        """None when this call may ask the broker (it is then counted as asking until end()), else why not."""
        with self.lock:
            until = self.down_until.get(broker, 0.0)
            if now < until:
                return f"the broker failed and is not asked again for {until - now:.1f} s"
            asking = self.asking.setdefault(broker, [])
            if asking and now - min(asking) > SLOW_S:
                return f"the broker has kept a publish waiting for {now - min(asking):.1f} s"
            if broker in self.down_since:
                # This call asks a broker that failed; the calls meanwhile skip it instead of waiting beside it.
                self.down_until[broker] = now + RETRY_S
            asking.append(now)
            return None

    def end(self, broker: str, began: float) -> None:
        with self.lock:
            self.asking[broker].remove(began)

    def failed(self, broker: str) -> None:
        with self.lock:
            self.down_until[broker] = _clock() + RETRY_S
            self.down_since.setdefault(broker, _clock())

    def answered(self, broker: str) -> float | None:
        """When the failure that this answer ends began; None if the broker was not failing."""
        if broker not in self.down_since:
            return None
        with self.lock:
            self.down_until.pop(broker, None)
            return self.down_since.pop(broker, None)


_health = _Health()


def hand_off(task_name: str, *args: object, what: str, lost: str = "the sweeper will retry") -> bool:
    """Publish the task `task_name` (by name, through Celery's registry: the tasks modules build on the
    services that call this, not the reverse). False when it was not published: the broker failed, now or
    within RETRY_S, or keeps another publish waiting; the caller's work stays where the sweeper finds it
    (`lost`: what the log says happens then). Never raises."""
    app = current_app
    task = app.tasks.get(task_name)
    if task is None:  # a mistake of Podium's, not the broker's: it must not make others skip the broker
        log.error("could not enqueue %s: no task %s is registered; %s", what, task_name, lost)
        return False
    # In-process tasks (no broker, or tests) run here: nothing to wait for, nothing to skip.
    broker = "" if app.conf.task_always_eager else str(app.conf.broker_url or "")
    began = _clock()
    refusal = _health.begin(broker, began) if broker else None
    if refusal is not None:
        log.warning("could not enqueue %s: %s; %s", what, refusal, lost)
        return False
    try:
        task.delay(*args)
    except Exception:  # kombu/redis errors vary by transport; none of them may fail the caller
        if broker:
            _health.failed(broker)
        log.exception("could not enqueue %s; %s", what, lost)
        return False
    finally:
        if broker:
            _health.end(broker, began)
    since = _health.answered(broker) if broker else None
    if since is not None:
        log.warning("The broker answers again after %.0f s", _clock() - since)
    return True
