"""An upload while the broker (Redis) is stuck: the request answers, the submission is stored, and the sweeper
hands it to the workers once the broker answers again. Without socket timeouts the request waited forever on
the publish, holding a thread of the web server (config/settings.py, CELERY_BROKER_TRANSPORT_OPTIONS)."""

from __future__ import annotations

import base64
import datetime
import json
import signal
from collections.abc import Iterator

import kombu.pools
import pytest
from django.utils import timezone

import core.broker
from config.celery import app
from ingest.models import Submission
from ingest.services import submissions
from tests.hang_guard import returns_within
from tests.ingest.test_uploads import acme_bundle, api, full_bundle, upload  # noqa: F401  (fixtures)
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.django_db, pytest.mark.services]

QUEUE = "podium-broker-outage"


@pytest.fixture
def broker(own_redis: RedisServer, settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    """Celery publishing to `own_redis`, with a producer pool of this test's own."""
    previous = (app.conf.broker_url, app.conf.task_default_queue, app.conf.task_always_eager)
    settings.CELERY_BROKER_URL = own_redis.url
    monkeypatch.setenv("CELERY_BROKER_URL", own_redis.url)  # Celery reads it before its configuration
    app.conf.broker_url, app.conf.task_default_queue, app.conf.task_always_eager = own_redis.url, QUEUE, False
    forget_pools()  # a pool is made for the broker of its first use
    try:
        yield own_redis
    finally:
        own_redis.process.send_signal(signal.SIGCONT)  # resumed, if a failed test left it stopped
        forget_pools()
        app.conf.broker_url, app.conf.task_default_queue, app.conf.task_always_eager = previous


def forget_pools() -> None:
    """Close every pool kombu keeps (process-wide, by broker address and options) and the app's references
    to them: the next publish, here or in a later test, opens its own on the broker configured then."""
    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


def queued_ids(server: RedisServer) -> list[int]:
    """The submission ids of the verification messages waiting in the queue."""
    ids = []
    for raw in server.client.lrange(QUEUE, 0, -1):
        args, _kwargs, _embed = json.loads(base64.b64decode(json.loads(raw)["body"]))
        ids.append(args[0])
    return ids


def test_an_upload_while_the_broker_is_stuck_is_stored_and_handed_out_once_it_answers(
        people, round_open, acme_bundle, full_bundle, broker: RedisServer,  # noqa: F811  (fixtures imported above)
        django_capture_on_commit_callbacks, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        ) -> None:
    clock = [1000.0]
    monkeypatch.setattr(core.broker, "_clock", lambda: clock[0])
    monkeypatch.setattr(core.broker, "_health", core.broker._Health())
    broker.stop()
    with (returns_within(60, "an upload while the broker answers nothing"),
          django_capture_on_commit_callbacks(execute=True)):
        response = upload(api(people.alice), acme_bundle)
    assert response.status_code == 201, response.content
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.state == Submission.State.RECEIVED
    assert f"could not enqueue submission {submission.pk}; the sweeper will retry" in caplog.text  # it was asked
    # The next upload soon after is not asked of the stuck broker (which would hold its request seconds too).
    with django_capture_on_commit_callbacks(execute=True):
        second = upload(api(people.alice), full_bundle)
    assert second.status_code == 201, second.content
    second_id = second.json()["id"]
    assert f"could not enqueue submission {second_id}: the broker failed and is not asked again" in caplog.text
    broker.resume()
    clock[0] += core.broker.RETRY_S  # the sweeper's next pass is seconds later
    # The stuck publish may still land (Redis runs what was sent before it stopped): a claim makes a
    # second delivery harmless. It has landed by now if at all: resume() waited for a reply, which Redis
    # writes only after the pass of its event loop that ran what the stopped connections had sent. Whatever
    # landed, the sweeper hands the submission out again.
    before = queued_ids(broker).count(submission.pk)
    waiting = sorted([submission.pk, second_id])
    Submission.objects.filter(pk__in=waiting).update(queued_at=timezone.now() - datetime.timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert sorted(submissions.submissions_sweep()) == waiting
    assert queued_ids(broker).count(submission.pk) == before + 1
    assert queued_ids(broker).count(second_id) == 1
    assert "The broker answers again" in caplog.text
