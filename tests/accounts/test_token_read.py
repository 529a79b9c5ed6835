"""An API token's request reads the token, its user and the user's memberships and chaired rounds in one
statement (accounts.with_user), and the viewer made of them once per request; what a token may do is
unchanged (tests/accounts/test_accounts.py: scopes, expiry, revocation, a wrong secret)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.authentication import _token_with_user
from accounts.models import ApiToken, Membership
from accounts.viewer import viewer_of
from tests.factories import RoundFactory
from tests.people import PASSWORD, make_people, token_for

pytestmark = pytest.mark.django_db

RESULTS_API = "/api/v1/results/"


def _client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def _token_reads(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "accounts_apitoken" in q["sql"]
            and q["sql"].startswith("SELECT")]


def _user_reads(queries: CaptureQueriesContext) -> list[str]:
    """Statements that look a user, their memberships or their chaired rounds up by the user's id apart
    from the token's statement (what the ORM's token read and the viewer asked)."""
    asks = re.compile(r'"(auth_user"\."id|accounts_membership"\."user_id|catalog_round_chairs"\."user_id)" = \d')
    return [q["sql"] for q in queries.captured_queries if "accounts_apitoken" not in q["sql"]
            and asks.search(q["sql"])]


def test_a_token_request_reads_token_user_memberships_and_chaired_rounds_in_one_statement() -> None:
    people = make_people()
    RoundFactory(slug="t-chaired").chairs.add(people.alice)
    client = _client(token_for(people.alice, "read"))
    with CaptureQueriesContext(connection) as queries:
        response = client.get(RESULTS_API)  # the results list asks for the viewer's grant
    assert response.status_code == 200
    assert len(_token_reads(queries)) == 1
    # Before: the memberships were asked once more for every viewer the request made (two on this page).
    assert _user_reads(queries) == []


def test_the_tokens_viewer_is_the_one_the_memberships_query_gives() -> None:
    people = make_people()
    chaired = RoundFactory(slug="t-chaired")
    chaired.chairs.add(people.alice)
    secret = token_for(people.alice, "submit")
    token = _token_with_user(secret.split("_")[1])
    assert token is not None and token == ApiToken.objects.get(prefix=secret.split("_")[1])
    assert token.user == people.alice and token.scope == ApiToken.Scope.SUBMIT and token.is_active()
    fresh = User.objects.get(pk=people.alice.pk)
    assert viewer_of(token.user).roles == viewer_of(fresh).roles == {
        people.acme.pk: {Membership.Role.SUBMITTER, Membership.Role.ADMIN}}
    assert viewer_of(token.user).chaired_round_ids == viewer_of(fresh).chaired_round_ids == {chaired.pk}
    assert viewer_of(token.user) is viewer_of(token.user)  # kept on the user: one viewer per request


def test_a_token_of_a_user_with_no_membership_reads_no_role() -> None:
    loner = User.objects.create_user("loner", password=PASSWORD)
    token = _token_with_user(token_for(loner, "read").split("_")[1])
    assert token is not None and token.user == loner
    assert viewer_of(token.user).is_authenticated and viewer_of(token.user).roles == {}
    assert _client(token_for(loner, "read")).get(RESULTS_API).status_code == 200


def test_a_disabled_accounts_token_is_refused() -> None:
    people = make_people()
    secret = token_for(people.carol, "read")
    User.objects.filter(pk=people.carol.pk).update(is_active=False)
    response = _client(secret).get(RESULTS_API)
    assert response.status_code == 401
    assert "disabled" in response.json()["detail"]


@pytest.mark.parametrize(
    "prefix",
    ["ab\x00cd", "a" * 17, "ab%cd", "ab'cd", "ab+cd", "ab-cd", "ABCDEF12"],
    ids=["nul", "too_long", "percent", "quote", "plus", "dash", "another_case"],
)
def test_a_token_whose_prefix_no_token_has_gets_401_not_a_server_error(prefix: str) -> None:
    people = make_people()
    secret = token_for(people.alice, "read")
    real = secret.split("_")[1]
    if prefix == "ABCDEF12":
        prefix = real.upper() if real.upper() != real else real.swapcase() + "X"  # the same letters, other case
    header = f"Token pod_{prefix}_{secret.split('_', 2)[2]}"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(RESULTS_API)  # the test client re-raises any server error
    assert response.status_code == 401
    assert response.json()["detail"] == "Unknown token."


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_on_postgresql_the_token_statement_is_prepared_once_per_connection() -> None:
    people = make_people()
    client = _client(token_for(people.alice, "read"))
    for _ in range(3):
        assert client.get(RESULTS_API).status_code == 200
    with connection.cursor() as cursor:  # the read (the token's last use, written once, is an UPDATE of its own)
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                       ['SELECT %"accounts_apitoken"%'])
        assert cursor.fetchone()[0] == 1
