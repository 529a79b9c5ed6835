"""The viewer of a signed-in user, read in one query: every organization with the roles held there, and
every round chaired, kept apart although they arrive in one result set."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Membership
from accounts.viewer import viewer_of
from tests.factories import RoundFactory
from tests.people import make_people

pytestmark = pytest.mark.django_db


def test_roles_and_chaired_rounds_arrive_in_one_query_and_stay_apart() -> None:
    people = make_people()
    chaired, other = RoundFactory(slug="v-chaired"), RoundFactory(slug="v-other")
    chaired.chairs.add(people.alice)
    # A round id equal to an organization id must not turn into a role there, nor the reverse.
    with CaptureQueriesContext(connection) as queries:
        viewer = viewer_of(people.alice)
    assert len(queries) == 1
    assert viewer.roles[people.acme.pk] == {Membership.Role.SUBMITTER, Membership.Role.ADMIN}
    assert set(viewer.roles) == {people.acme.pk}
    assert viewer.chaired_round_ids == {chaired.pk}
    assert viewer.chairs(chaired.pk) and not viewer.chairs(other.pk)


def test_a_user_with_no_role_and_no_round_is_a_plain_signed_in_viewer() -> None:
    loner = get_user_model().objects.create_user("loner", password="x")
    viewer = viewer_of(loner)
    assert viewer.is_authenticated and viewer.roles == {} and viewer.chaired_round_ids == frozenset()
