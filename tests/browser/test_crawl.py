"""Every internal link reachable from the home page answers < 400, with no console error, for each persona:
an anonymous visitor, a submitting member, a reviewer, a chair and an operator (a bounded breadth-first
crawl: same host, GET only)."""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urldefrag, urlparse

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Membership, Organization
from accounts.services import membership_add
from catalog.models import Round
from tests.browser.site_world import build_site
from tests.people import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MAX_PAGES = 150
# Not pages: signing out, file downloads and exports, raw logs, JSON, the admin (its own app), the OpenAPI
# schema (a download; Swagger UI at /api/docs/ links it only once its script has rendered, so whether the
# crawl met it depended on the machine's speed).
SKIP = re.compile(r"/logout|/export\.|/raw$|/log$|\.json|/report\.json|/admin/|/vendor/|/static/|/api/schema/")


def _crawl(page, base: str) -> tuple[list[str], list[str], list[str]]:
    """(visited, failures, console errors) of a crawl from the home page; it must reach every link."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(f"{page.url}: {message.text}") if message.type == "error"
            else None)
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    host = urlparse(base).netloc
    queue: deque[str] = deque([f"{base}/"])
    seen = set(queue)
    visited, failures = [], []
    while queue and len(visited) < MAX_PAGES:
        url = queue.popleft()
        response = page.goto(url)
        visited.append(url)
        if response is None or response.status >= 400:
            failures.append(f"{url}: {response.status if response else 'no response'}")
            continue
        page.wait_for_load_state("load")
        hrefs = page.eval_on_selector_all("a[href]:not([download])", "links => links.map(a => a.href)")
        for href in hrefs:
            href = urldefrag(href)[0]
            parsed = urlparse(href)
            if parsed.scheme not in ("http", "https") or parsed.netloc != host or SKIP.search(parsed.path):
                continue
            if href not in seen:
                seen.add(href)
                queue.append(href)
    assert not queue, f"more than {MAX_PAGES} pages: {len(queue)} left unvisited"
    print(f"crawled {len(visited)} pages")
    return visited, failures, errors


def test_every_link_from_home_answers_for_a_visitor(live_server, page) -> None:
    site = build_site()
    visited, failures, errors = _crawl(page, live_server.url)
    assert not failures, failures
    assert not errors, errors
    paths = {urlparse(u).path for u in visited}
    assert {"/benchmarks/resnet/", "/organizations/acme-tour/", site.result.get_absolute_url()} <= paths
    assert f"/results/{site.result.pk}/runs/1/" in paths  # a log page
    assert "/organizations/hidden-tour/" not in paths


def test_every_link_from_home_answers_for_a_member(live_server, page) -> None:
    site = build_site()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", site.member_name)
    page.fill("input[name=password]", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    visited, failures, errors = _crawl(page, live_server.url)
    assert not failures, failures
    assert not errors, errors
    paths = {urlparse(u).path for u in visited}
    assert "/submit/" in paths and "/accounts/organizations/hidden-tour/members/" in paths


def _sign_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}/")


@pytest.mark.parametrize("persona", ["reviewer", "chair", "operator"])
def test_every_link_from_home_answers_for_the_other_personas(live_server, page, persona) -> None:
    build_site()
    user = get_user_model().objects.create_user(persona, password=PASSWORD, is_staff=persona == "operator")
    if persona == "reviewer":
        membership_add(user=user, organization=Organization.objects.get(slug="kite-tour"),
                       role=Membership.Role.REVIEWER)
    if persona == "chair":
        Round.objects.get(slug="tour-v3").chairs.add(user)
    _sign_in(page, live_server.url, persona)
    visited, failures, errors = _crawl(page, live_server.url)
    assert not failures, failures
    assert not errors, errors
    paths = {urlparse(u).path for u in visited}
    expected = {"reviewer": "/organizations/kite-tour/", "chair": "/rounds/tour-v3/",
                "operator": "/operators/runners/"}[persona]
    assert expected in paths, sorted(paths)
