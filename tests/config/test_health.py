from __future__ import annotations

import os

import pytest
from django.test import Client, override_settings

from tests.conftest import skip_or_fail


@pytest.mark.django_db
@override_settings(CELERY_BROKER_URL="")
def test_healthz_reports_database_and_embedded_broker(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"healthy": True, "database": "ok", "broker": "embedded", "cache": "embedded"}


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
def test_healthz_is_unhealthy_when_the_broker_is_unreachable(client: Client) -> None:
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"].startswith("error")
