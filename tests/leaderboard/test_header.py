"""The header of a signed-in page (members links, review links, the unread count) is read in one statement per
request (leaderboard.header), and shows what the separate reads showed: organizations by name, chaired rounds
newest deadline first (at most five), staff the rounds in review, the unread count of this visitor alone."""

from __future__ import annotations

import datetime
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Membership, Organization
from accounts.services import membership_add
from catalog.services import round_create
from reviews.models import Notification
from tests.people import make_people, open_round, set_phase

pytestmark = pytest.mark.django_db


def _client(user: object) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _links(html: str) -> list[str]:
    nav = html.split('aria-label="Your account"', 1)[1].split("</nav>", 1)[0]
    return re.findall(r">([^<>]+)</a>", nav)


def _header_reads(client: Client, path: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return [q["sql"] for q in captured.captured_queries
            if "reviews_notification" in q["sql"] or "accounts_organization" in q["sql"]]


def test_the_header_is_one_statement_and_shows_what_the_visitor_has() -> None:
    people = make_people()
    second = Organization.objects.create(name="Aardvark Labs", slug="aardvark")
    membership_add(user=people.alice, organization=second, role=Membership.Role.SUBMITTER)
    Notification.objects.create(user=people.alice, text="one")
    Notification.objects.create(user=people.alice, text="two")
    Notification.objects.create(user=people.alice, text="read", read_at=timezone.now())
    Notification.objects.create(user=people.bob, text="bob's")
    client = _client(people.alice)
    reads = _header_reads(client, "/")
    assert len(reads) == 1 and "UNION ALL" in reads[0]
    html = client.get("/").content.decode()
    links = _links(html)
    assert links.index("Aardvark Labs members") < links.index("Larkspur Compute members")  # by name
    assert 'id="unread-count" title="2 unread">2<' in html
    # Renamed: the next request shows the new name (nothing is kept between requests).
    Organization.objects.filter(pk=second.pk).update(name="Zebra Labs")
    assert "Zebra Labs members" in _links(client.get("/").content.decode())


def test_review_links_are_the_chaired_rounds_newest_deadline_first_at_most_five() -> None:
    people = make_people()
    now = timezone.now()
    for n in range(7):
        chaired = round_create(slug=f"chaired-v{n}.0", name=f"Chaired {n}", ruleset="4.0.0",
                               submission_deadline=now + datetime.timedelta(days=n), publication_date=None)
        chaired.chairs.add(people.chair)
    links = [link for link in _links(_client(people.chair).get("/").content.decode()) if link.startswith("Review ")]
    assert links == [f"Review Chaired {n}" for n in (6, 5, 4, 3, 2)]
    assert not [link for link in _links(_client(people.alice).get("/").content.decode()) if link.startswith("Review")]
    # A member who chairs too: all three parts in the one statement.
    chaired.chairs.add(people.alice)
    Notification.objects.create(user=people.alice, text="one")
    html = _client(people.alice).get("/").content.decode()
    assert "Review Chaired 6" in _links(html) and "Larkspur Compute members" in _links(html)
    assert 'title="1 unread">1<' in html


def test_staff_see_the_rounds_in_review() -> None:
    people = make_people()
    reviewing = open_round("review-v5.0")
    set_phase(reviewing, "review")
    open_round("open-v5.0")
    links = _links(_client(people.staff).get("/").content.decode())
    assert "Review Open round review-v5.0" in links and "Review Open round open-v5.0" not in links
