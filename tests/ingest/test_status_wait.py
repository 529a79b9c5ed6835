"""GET /api/v1/submissions/<id>/?wait=S: the server waits for the state to move (ingest.waiting)."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from core import wake
from ingest import waiting
from ingest.models import Submission
from ingest.services import submissions
from tests.ingest.test_uploads import acme_bundle, api, upload  # noqa: F401  (acme_bundle: a fixture)
from tests.people import token_for

pytestmark = pytest.mark.django_db

THREADED = {"wsgi.multithread": True}


class FakeTime:
    """The waiting loop's clock and sleep: no real wait. `on_sleep` runs at each sleep (the worker)."""

    def __init__(self, on_sleep=lambda n: None) -> None:
        self.t = 100.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        self.on_sleep(len(self.sleeps))


@pytest.fixture
def fake_time(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(waiting, "_clock", fake.clock)
    monkeypatch.setattr(waiting, "_sleep", fake.sleep)
    # No bell (core.wake): a waiter listening to Redis would wait in real time between looks.
    monkeypatch.setattr(wake, "_url", lambda: "")
    return fake


def queued_upload(people, request) -> int:
    # Without running the on-commit callbacks the upload stays "received" until the test moves it.
    return upload(api(people.alice), request.getfixturevalue("acme_bundle")).json()["id"]


@pytest.fixture
def queued(people, round_open, request) -> int:
    return queued_upload(people, request)


def _status(user, pk: int, query: str = "", **extra):
    return api(user).get(f"/api/v1/submissions/{pk}/{query}", **extra)


def test_the_answer_leaves_as_soon_as_the_state_moves(people, queued, fake_time) -> None:
    def worker(sleeps: int) -> None:
        if sleeps == 3:  # the worker claims it while the request waits
            Submission.objects.filter(pk=queued).update(state=Submission.State.VERIFYING)
    fake_time.on_sleep = worker

    response = _status(people.alice, queued, "?wait=10", **THREADED)

    assert response.status_code == 200
    assert response.json()["state"] == "verifying"
    assert response[waiting.HEADER] == "true"
    # It looked again every CHECK_S and answered at the first look after the change.
    assert fake_time.sleeps == [waiting.CHECK_S] * 3


def test_a_wait_that_sees_no_change_answers_the_same_state_after_its_time(people, queued, fake_time) -> None:
    response = _status(people.alice, queued, "?wait=0.5", **THREADED)

    assert response.json()["state"] == "received"
    assert response[waiting.HEADER] == "true"
    assert sum(fake_time.sleeps) == pytest.approx(0.5)
    assert max(fake_time.sleeps) <= waiting.CHECK_S


def test_wait_is_capped_by_the_setting(people, queued, fake_time, settings) -> None:
    settings.PODIUM_STATUS_WAIT_MAX_S = 1
    _status(people.alice, queued, "?wait=100000", **THREADED)

    assert sum(fake_time.sleeps) == pytest.approx(1.0)


def test_a_final_submission_answers_at_once(people, queued, fake_time) -> None:
    Submission.objects.filter(pk=queued).update(state=Submission.State.VERIFIED)

    response = _status(people.alice, queued, "?wait=10", **THREADED)

    assert response.json()["state"] == "verified"
    assert waiting.HEADER not in response
    assert fake_time.sleeps == []


def test_no_wait_without_a_free_slot_or_in_a_single_threaded_server(people, queued, fake_time, settings) -> None:
    # A sync worker that waited would serve nobody else: it answers at once, as without ?wait.
    single = _status(people.alice, queued, "?wait=10", **{"wsgi.multithread": False})
    settings.PODIUM_STATUS_WAITERS = 0
    busy = _status(people.alice, queued, "?wait=10", **THREADED)

    for response in (single, busy):
        assert response.status_code == 200 and response.json()["state"] == "received"
        assert waiting.HEADER not in response
    assert fake_time.sleeps == []


def test_the_slots_are_per_process_and_given_back(settings) -> None:
    settings.PODIUM_STATUS_WAITERS = 1
    with waiting.slot(THREADED) as first, waiting.slot(THREADED) as second:
        assert (first, second) == (True, False)
    with waiting.slot(THREADED) as again:
        assert again is True
    with pytest.raises(RuntimeError), waiting.slot(THREADED):
        raise RuntimeError("the request failed while waiting")
    with waiting.slot(THREADED) as after_failure:
        assert after_failure is True


@pytest.mark.parametrize("value", ["soon", "nan", "inf", "-1", "1e400", "0x10", "10s"])
def test_a_wait_that_is_not_a_finite_number_of_seconds_is_refused(people, queued, fake_time, value) -> None:
    response = _status(people.alice, queued, f"?wait={value}", **THREADED)

    assert response.status_code == 400
    assert "wait must be" in response.json()["detail"]
    assert fake_time.sleeps == []


def test_others_cannot_wait_on_a_submission_they_may_not_see(people, queued, fake_time) -> None:
    response = _status(people.dave, queued, "?wait=10", **THREADED)

    assert response.status_code == 404
    assert fake_time.sleeps == []


def test_a_submission_that_leaves_the_callers_sight_ends_the_wait_with_a_404(people, queued, fake_time) -> None:
    fake_time.on_sleep = lambda sleeps: Submission.objects.filter(pk=queued).delete()

    response = _status(people.alice, queued, "?wait=10", **THREADED)

    assert response.status_code == 404
    assert len(fake_time.sleeps) == 1


@pytest.mark.django_db(transaction=True)
def test_a_waiting_request_sees_what_another_connection_commits(live_server, people, round_open, request) -> None:
    # The live server runs in a thread of this process, with its own database connection: the change is
    # committed here, while its request waits there (its slot taken), and must reach it.
    import threading
    import time
    import urllib.request

    pk = queued_upload(people, request)  # verified at once here (tasks run on commit): put it back in line
    Submission.objects.filter(pk=pk).update(state=Submission.State.RECEIVED)
    token = token_for(people.alice, "read")
    answer: dict = {}

    def ask() -> None:
        req = urllib.request.Request(f"{live_server.url}/api/v1/submissions/{pk}/?wait=20",
                                     headers={"Authorization": f"Token {token}", "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as response:
            answer.update(body=json.loads(response.read()), waited=response.headers.get(waiting.HEADER))

    asking = threading.Thread(target=ask)
    asking.start()
    deadline = time.monotonic() + 30
    while waiting._waiting == 0 and asking.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)  # until the request holds its slot (a condition, not a guess at a duration)
    Submission.objects.filter(pk=pk).update(state=Submission.State.VERIFYING)
    asking.join(60)

    assert answer["body"]["state"] == "verifying"
    assert answer["waited"] == "true"


# --- the status page follows the same way ---------------------------------------------------------------

def _page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _trigger(html: str) -> str | None:
    found = re.search(r'<div id="status"[^>]*hx-trigger="([^"]*)"', html)
    return found.group(1) if found else None


def test_the_status_page_asks_for_its_live_part_at_once_and_the_server_waits(people, queued, fake_time) -> None:
    page = _page_client(people.alice).get(f"/submissions/{queued}/").content.decode()
    assert f'hx-get="/submissions/{queued}/status/?wait=10"' in page
    assert _trigger(page) == "load, every 15s"

    fake_time.on_sleep = lambda sleeps: Submission.objects.filter(pk=queued).update(
        state=Submission.State.VERIFYING)
    part = _page_client(people.alice).get(f"/submissions/{queued}/status/?wait=10", **THREADED)
    html = part.content.decode()
    assert part.status_code == 200 and 'data-state="verifying"' in html
    assert _trigger(html) == "load, every 15s"  # the server waited: the next request may go at once
    assert len(fake_time.sleeps) == 1


def test_without_a_wait_the_status_page_asks_again_a_second_later(people, queued, fake_time) -> None:
    part = _page_client(people.alice).get(f"/submissions/{queued}/status/?wait=10", **{"wsgi.multithread": False})
    html = part.content.decode()
    assert 'data-state="received"' in html
    assert _trigger(html) == "load delay:1s, every 15s"
    assert fake_time.sleeps == []


def test_a_final_status_page_asks_for_nothing_and_a_bad_wait_is_refused(people, queued, fake_time) -> None:
    client = _page_client(people.alice)
    assert client.get(f"/submissions/{queued}/status/?wait=soon", **THREADED).status_code == 400
    Submission.objects.filter(pk=queued).update(state=Submission.State.VERIFIED)
    html = client.get(f"/submissions/{queued}/status/?wait=10", **THREADED).content.decode()
    assert "hx-get" not in html.split("<p", 1)[0] and _trigger(html) is None
    assert _page_client(people.dave).get(f"/submissions/{queued}/status/?wait=10", **THREADED).status_code == 404
    assert fake_time.sleeps == []


# --- the bell (core.wake): with a Redis broker the worker's commit wakes the waiter --------------------------

@pytest.fixture
def bell(settings):
    import os

    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        if os.environ.get("PODIUM_REQUIRE_SERVICES"):
            pytest.fail("PODIUM_REQUIRE_SERVICES is set but CELERY_BROKER_URL names no Redis")
        pytest.skip("no Redis broker: set CELERY_BROKER_URL=redis://127.0.0.1:6379/0")
    settings.CELERY_BROKER_URL = url
    wake._down_until = 0.0


@pytest.mark.services
def test_a_ring_wakes_a_listener_in_another_thread(bell) -> None:
    import threading

    heard: list[bool] = []
    with wake.listening("test:ring") as listener:
        assert listener.listening
        ringer = threading.Thread(target=wake.ring, args=("test:ring",))
        ringer.start()
        # A wait far longer than any ring takes: it returns because it rang, not because time ran out.
        heard.append(listener.wait(30))
        ringer.join()
    with wake.listening("test:ring") as listener:
        wake.ring("test:other")  # another name does not wake it
        heard.append(listener.wait(0.05))
    assert heard == [True, False]


@pytest.mark.services
def test_a_thread_keeps_its_bell_connection_between_waits(bell) -> None:
    """core.wake._kept: the next bell subscribes on the last one's connection, which no longer hears the last name;
    a ring the last bell did not read is dropped."""
    with wake.listening("test:keep:a") as first:
        socket = first._pubsub.connection._sock
        wake.ring("test:keep:a")  # heard by no wait: waiting on the connection when the next bell subscribes
    with wake.listening("test:keep:b") as second:
        assert second._pubsub.connection._sock is socket  # the same connection, not one made again
        wake.ring("test:keep:a")  # the last name: no longer heard
        assert second.wait(0.05) is False
        assert _hears_a_ring_from_another_thread(second, "test:keep:b")


@pytest.mark.services
def test_a_kept_bell_connection_that_redis_closed_is_replaced(bell) -> None:
    with wake.listening("test:killed:a") as first:
        host, port = first._pubsub.connection._sock.getsockname()[:2]
    client = wake._client()
    assert client is not None
    client.client_kill(f"{host}:{port}")  # as a Redis restart or its idle timeout would
    with wake.listening("test:killed:b") as second:
        assert second.listening
        assert _hears_a_ring_from_another_thread(second, "test:killed:b")


def _hears_a_ring_from_another_thread(listener: wake.Bell, name: str) -> bool:
    import threading

    ringer = threading.Thread(target=wake.ring, args=(name,))
    ringer.start()
    # A wait far longer than any ring takes: it returns because it rang, not because time ran out.
    heard = listener.wait(30)
    ringer.join()
    return heard


@pytest.mark.services
def test_connect_makes_the_connection_that_the_first_ring_uses(bell) -> None:
    """A worker connects when it starts (submissions.worker_warm): its first verdict's ring does not."""
    wake._clients.clear()
    wake.connect()
    client = wake._client()
    assert client is not None and len(client.connection_pool._available_connections) == 1
    wake.ring("test:connect")
    assert client.connection_pool._created_connections == 1


@pytest.mark.services
def test_the_commit_that_moves_a_submission_rings_after_it_and_never_before(bell, people, queued,
                                                                            django_capture_on_commit_callbacks,
                                                                            monkeypatch) -> None:
    rung: list[str] = []
    monkeypatch.setattr(wake, "ring", rung.append)
    with django_capture_on_commit_callbacks(execute=True):
        waiting.announce(queued)
        assert rung == []  # inside the transaction: nothing rung yet
    assert rung == [f"submission:{queued}"]


def test_the_claim_rings_no_bell_and_the_verdict_rings_one(people, queued, django_capture_on_commit_callbacks,
                                                          monkeypatch) -> None:
    """A client waiting since before the claim is not woken by it to ask again beside the checks: it is answered
    the verdict when that is stored (or `verifying` at its waiter's next look, for a long verification)."""
    rung: list[str] = []
    monkeypatch.setattr(wake, "ring", rung.append)
    with django_capture_on_commit_callbacks(execute=True):
        claimed = submissions._claim(queued)
    assert claimed is not None and Submission.objects.get(pk=queued).state == Submission.State.VERIFYING
    assert rung == []
    with django_capture_on_commit_callbacks(execute=True):
        submissions._store(claimed, submissions._Judged([], []))
    assert Submission.objects.get(pk=queued).is_final and rung == [f"submission:{queued}"]


def test_a_broken_bell_costs_no_answer(people, queued, settings, monkeypatch) -> None:
    """A Redis that cannot be reached: the ring is dropped, the waiter looks by itself as without a bell."""
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    wake._down_until = 0.0
    wake.ring("submission:1")  # no error reaches the caller
    fake = FakeTime(on_sleep=lambda n: Submission.objects.filter(pk=queued).update(
        state=Submission.State.VERIFYING) if n == 3 else None)
    monkeypatch.setattr(waiting, "_clock", fake.clock)
    monkeypatch.setattr(waiting, "_sleep", fake.sleep)
    wake._down_until = 0.0
    answer = _status(people.alice, queued, "?wait=5", **THREADED)
    assert answer.json()["state"] == "verifying" and fake.sleeps[:3] == [waiting.CHECK_S] * 3
    wake._down_until = 0.0


class _RingingBell:
    """A bell that rings at its first wait, after `worker` moved the submission (no Redis needed)."""

    listening = True

    def __init__(self, worker) -> None:
        self.worker = worker

    def wait(self, seconds: float) -> bool:
        self.worker()
        return True


def test_after_a_ring_the_moved_row_is_read_in_one_query(people, queued, fake_time, monkeypatch) -> None:
    import contextlib

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def move() -> None:
        Submission.objects.filter(pk=queued).update(state=Submission.State.VERIFYING)

    monkeypatch.setattr(wake, "listening", lambda name, sleep: contextlib.nullcontext(_RingingBell(move)))
    visible = Submission.objects.select_related("round", "organization")
    with CaptureQueriesContext(connection) as queries:
        answered, waited = waiting.follow(visible, visible.get(pk=queued), "10", THREADED)
    assert waited and answered.state == Submission.State.VERIFYING
    reads = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    # The submission itself, the first look (its state), and after the ring the whole row: nothing more.
    assert len(reads) == 3, reads
    assert answered.round.slug and answered.organization.slug  # read with the row, not one query each


def test_a_ring_for_a_submission_that_left_sight_ends_the_wait_with_not_found(people, queued, fake_time,
                                                                             monkeypatch) -> None:
    import contextlib

    from core.errors import NotFound

    # What the caller may see: here, anything not verifying; the move takes it out of sight.
    visible = Submission.objects.exclude(state=Submission.State.VERIFYING)
    submission = visible.get(pk=queued)
    monkeypatch.setattr(wake, "listening", lambda name, sleep: contextlib.nullcontext(
        _RingingBell(lambda: Submission.objects.filter(pk=queued).update(state=Submission.State.VERIFYING))))
    with pytest.raises(NotFound):
        waiting.follow(visible, submission, "10", THREADED)


def test_the_status_page_follows_the_submission_as_the_api_does(people, queued, fake_time, monkeypatch) -> None:
    """The live part's looks while it waits go through ingest.visibility.FollowedSubmission, as the API's do: for a
    member of the submission's organization, statements built once per process instead of the whole rule."""
    from ingest.visibility import FollowedSubmission

    looks: list[int] = []
    state = FollowedSubmission.state

    def counted(self: FollowedSubmission) -> str | None:
        looks.append(self.pk)
        return state(self)

    monkeypatch.setattr(FollowedSubmission, "state", counted)
    fake_time.on_sleep = lambda sleeps: Submission.objects.filter(pk=queued).update(
        state=Submission.State.VERIFYING)
    html = _page_client(people.alice).get(f"/submissions/{queued}/status/?wait=10", **THREADED).content.decode()
    assert 'data-state="verifying"' in html
    assert looks == [queued, queued]  # before the first sleep, and after it
