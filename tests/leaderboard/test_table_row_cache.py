"""The round table's row order (the grouped query over the whole round, the one part of a page whose cost
grows with the round) is read once per data version, viewer grant, view and page: a signed-in visitor's
next request reads only the page's own cells, a change of the data is seen at once, and two visitors who
may see different results never share an answer."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Membership
from accounts.services import membership_add
from catalog.models import Round
from core.cache import bump_generation
from tests.factories import BenchmarkFactory, OrganizationFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db

GROUPING = '"row_total"'  # the alias only the row-order query selects


def _member(organization_slug: str) -> Client:
    from accounts.models import Organization

    user = get_user_model().objects.create_user(f"member-of-{organization_slug}")
    membership_add(user=user, organization=Organization.objects.get(slug=organization_slug),
                   role=Membership.Role.SUBMITTER)
    client = Client()
    client.force_login(user)
    return client


def _get(client: Client, url: str) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode(), [q["sql"] for q in queries.captured_queries]


def _round(publication_date: datetime.datetime, deadline: datetime.datetime | None = None) -> Round:
    round_ = RoundFactory(slug="rows-v1.0", publication_date=publication_date, submission_deadline=deadline)
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50", position=0)
    for name in ("Acme", "Zeta"):
        organization = OrganizationFactory(name=name, slug=name.lower())
        system = SystemFactory(round=round_, organization=organization, slug=f"{name.lower()}-box",
                               name=f"{name} Box")
        ResultFactory(system=system, benchmark=resnet, score=10.0)
    return round_


def test_a_signed_in_visitor_orders_the_rows_once_until_the_data_changes(
        django_capture_on_commit_callbacks) -> None:
    round_ = _round(timezone.now() - datetime.timedelta(days=3))
    cache.clear()
    member = _member("acme")
    url = f"/rounds/{round_.slug}/"

    first, queries = _get(member, url)
    assert "Acme Box" in first and "Zeta Box" in first
    assert sum(GROUPING in q for q in queries) == 1
    again, queries = _get(member, url)
    assert sum(GROUPING in q for q in queries) == 0  # the page of row keys came from the cache
    assert again.count("Box</a>") == first.count("Box</a>")

    # New data: a third system. The next request orders the rows again and shows it.
    beta = OrganizationFactory(name="Beta", slug="beta")
    system = SystemFactory(round=round_, organization=beta, slug="beta-box", name="Beta Box")
    ResultFactory(system=system, benchmark=round_.benchmarks.get(key="resnet"), score=5.0)
    with django_capture_on_commit_callbacks(execute=True):
        bump_generation()  # what every service that stores a result does on commit (the factory is no service)
    after, queries = _get(member, url)
    assert "Beta Box" in after and sum(GROUPING in q for q in queries) == 1


def test_visitors_with_different_grants_never_share_a_row_order() -> None:
    # Embargoed, before its deadline: each member sees only its own organization's results.
    round_ = _round(timezone.now() + datetime.timedelta(days=30), timezone.now() + datetime.timedelta(days=3))
    cache.clear()
    acme, zeta = _member("acme"), _member("zeta")
    url = f"/rounds/{round_.slug}/"

    seen_by_acme, _ = _get(acme, url)
    seen_by_zeta, queries = _get(zeta, url)

    assert "Acme Box" in seen_by_acme and "Zeta Box" not in seen_by_acme
    assert "Zeta Box" in seen_by_zeta and "Acme Box" not in seen_by_zeta
    assert sum(GROUPING in q for q in queries) == 1  # zeta's own order, not acme's from the cache
    assert Client().get(url).status_code == 404


def test_each_page_and_sort_is_its_own_answer() -> None:
    round_ = _round(timezone.now() - datetime.timedelta(days=3))
    cache.clear()
    member = _member("acme")
    by_name, _ = _get(member, f"/rounds/{round_.slug}/?sort=system")
    reversed_, queries = _get(member, f"/rounds/{round_.slug}/?sort=system&order=desc")
    assert sum(GROUPING in q for q in queries) == 1
    assert by_name.index("Acme Box") < by_name.index("Zeta Box")
    assert reversed_.index("Zeta Box") < reversed_.index("Acme Box")
    # Columns shown do not change which rows a page holds: that view reuses the order.
    _, queries = _get(member, f"/rounds/{round_.slug}/?sort=system&order=desc&cols=resnet")
    assert sum(GROUPING in q for q in queries) == 0
