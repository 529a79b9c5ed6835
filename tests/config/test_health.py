from __future__ import annotations

import os
import socket

import pytest
from django.db import OperationalError, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import Client, override_settings

from tests.conftest import skip_or_fail
from tests.hang_guard import returns_within
from tests.redis_server import RedisServer


@pytest.mark.django_db
@override_settings(CELERY_BROKER_URL="")
def test_healthz_reports_database_and_embedded_broker(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"healthy": True, "database": "ok", "broker": "embedded", "cache": "embedded",
                               "degraded": []}


@pytest.mark.services
@pytest.mark.django_db
def test_healthz_reaches_the_real_redis_broker(client: Client) -> None:
    url = os.environ.get("CELERY_BROKER_URL")
    if not url:
        skip_or_fail("no CELERY_BROKER_URL: the real Redis broker is not configured")
    with override_settings(CELERY_BROKER_URL=url):
        response = client.get("/healthz")
    assert response.json()["broker"] == "ok", response.json()


@pytest.mark.django_db
def test_a_failing_broker_is_reported_and_the_process_stays_healthy(client: Client) -> None:
    """Every web process shares the broker, and serves pages and takes uploads without it (the sweeper
    queues them later): a load balancer must not take them all out for its sake. `?strict` is for alerts."""
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):  # nothing listens on port 1
        response = client.get("/healthz")
        strict = client.get("/healthz?strict")
        not_strict = client.get("/healthz?strict=0")
    assert response.status_code == 200
    answer = response.json()
    assert answer["healthy"] is True and answer["database"] == "ok"
    assert answer["broker"].startswith("error") and answer["degraded"] == ["broker"]
    assert strict.status_code == 503 and strict.json() == answer
    assert not_strict.status_code == 200


@pytest.mark.django_db
def test_a_failing_database_is_unhealthy(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: object) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(BaseDatabaseWrapper, "cursor", refused)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["healthy"] is False
    assert response.json()["database"] == "error: OperationalError" and response.json()["degraded"] == ["database"]


@pytest.mark.services
@pytest.mark.django_db
def test_healthz_answers_while_the_broker_answers_nothing(client: Client, own_redis: RedisServer) -> None:
    """A Redis that keeps the connection and answers nothing held the check (and a thread of the web
    server) forever: a load balancer asking every few seconds took every thread in minutes."""
    with override_settings(CELERY_BROKER_URL=own_redis.url):
        assert client.get("/healthz").json()["broker"] == "ok"
        own_redis.stop()
        with returns_within(60, "/healthz while the broker answers nothing"):
            response = client.get("/healthz")
        own_redis.resume()
        assert client.get("/healthz").json()["broker"] == "ok"
    assert response.status_code == 200
    assert response.json()["broker"].startswith("error") and response.json()["degraded"] == ["broker"]


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="libpq's connect timeout: PostgreSQL only")
def test_a_database_server_that_answers_nothing_fails_the_connection_instead_of_holding_it() -> None:
    """A listening socket that never answers (the kernel completes the handshake; nobody reads): without
    a connect timeout libpq waited forever, and with it the request or /healthz that asked."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        default = connections["default"]
        wrapper = type(default)({**default.settings_dict, "HOST": "127.0.0.1", "PORT": port}, "default")
        with returns_within(60, "a connection to a database that answers nothing"), \
                pytest.raises(OperationalError, match="timeout"):
            wrapper.ensure_connection()
