"""An address carrying a NUL character is refused (400) before any view runs (core.middleware.RefuseNul):
PostgreSQL cannot compare text with a NUL, and such a filter value or slug reaching a query answered 500
there (the round table's filters, the charts' benchmark, the search, a round's or organization's slug),
where SQLite matched nothing. The answer takes the shape of the address's answers."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from core.middleware import MESSAGE
from tests.factories import ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db

ROUND = "nul-v1.0"


@pytest.fixture
def visitors() -> list[Client]:
    published = RoundFactory(slug=ROUND, publication_date=timezone.now() - datetime.timedelta(days=1))
    ResultFactory(system=SystemFactory(round=published))
    signed_in = Client(raise_request_exception=False)
    signed_in.force_login(get_user_model().objects.create_user("reader", password="x"))
    return [Client(raise_request_exception=False), signed_in]


FILTERS = ("submitter", "framework", "accelerator_model", "benchmark")
PAGES = [f"/rounds/{ROUND}/?{name}={value}" for name in FILTERS for value in ("%00", "a%00b")] + [
    "/search/?q=a%00b", "/rounds/a%00b/", "/benchmarks/a%00b/", f"/rounds/{ROUND}/?a%00=1"]
CHARTS = [f"/rounds/{ROUND}/charts/{chart}.json?benchmark=a%00b&division=closed"
          for chart in ("scale", "scaling", "spread")]
API = ["/api/v1/organizations/a%00b/", "/api/v1/results/?submitter=a%00b", "/api/v1/rounds/?x=%00"]


@pytest.mark.parametrize("path", PAGES)
def test_a_page_refuses_it_with_the_refusal_page(visitors: list[Client], path: str) -> None:
    for visitor in visitors:
        response = visitor.get(path)
        assert response.status_code == 400, path
        assert MESSAGE in response.content.decode()


@pytest.mark.parametrize("path", CHARTS)
def test_a_chart_refuses_it_in_its_own_shape(visitors: list[Client], path: str) -> None:
    for visitor in visitors:
        response = visitor.get(path)
        assert response.status_code == 400
        assert response.json() == {"error": MESSAGE}


@pytest.mark.parametrize("path", API)
def test_the_api_refuses_it_in_its_shape(visitors: list[Client], path: str) -> None:
    for visitor in visitors:
        response = visitor.get(path)
        assert response.status_code == 400
        assert response.json() == {"detail": MESSAGE, "code": "invalid"}


def test_the_text_percent_zero_zero_is_no_nul(visitors: list[Client]) -> None:
    """"%2500" is the characters "%00": a filter that matches nothing, not a refusal."""
    for visitor in visitors:
        assert visitor.get(f"/rounds/{ROUND}/?framework=%2500").status_code == 200
        assert visitor.get("/api/v1/results/?submitter=%2500").json()["count"] == 0
