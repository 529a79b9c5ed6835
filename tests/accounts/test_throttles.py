"""Throttles on signing in and on password reset (accounts.throttles): per account and per client address,
with a message that says why, and no check of the password once an account is throttled."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client

from core import ratelimit
from tests.people import PASSWORD, make_people

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
RESET = "/accounts/password_reset/"


@pytest.fixture
def people():
    return make_people()


def from_address(address: str) -> Client:
    return Client(REMOTE_ADDR=address)


def sign_in(client: Client, username: str, password: str):
    return client.post(LOGIN, {"username": username, "password": password})


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_forty_wrong_passwords_for_one_account_are_throttled_with_a_message(people, settings) -> None:
    codes = []
    # A different address for each try: the account's own limit must hold however the guesses are spread.
    for attempt in range(40):
        response = sign_in(from_address(f"10.0.{attempt // 250}.{attempt % 250}"), "alice", f"guess-{attempt}")
        codes.append(response.status_code)
    limit = settings.PODIUM_LOGIN_FAILURES_PER_ACCOUNT
    assert codes[: limit - 1] == [200] * (limit - 1)  # the form again, "wrong password"
    assert codes[limit:] == [429] * (40 - limit)
    body = response.content.decode()
    assert "Too many failed sign-in attempts for this account" in body and "Try again in" in body


def test_a_throttled_account_refuses_even_the_right_password_until_the_window_ends(people, settings,
                                                                                  monkeypatch) -> None:
    for attempt in range(settings.PODIUM_LOGIN_FAILURES_PER_ACCOUNT):
        sign_in(Client(), "alice", f"guess-{attempt}")
    client = Client()
    response = sign_in(client, "alice", PASSWORD)
    assert response.status_code == 429 and not signed_in(client)
    assert "Too many failed sign-in attempts" in response.content.decode()
    # The next window: the count starts again.
    later = ratelimit.time.time() + settings.PODIUM_LOGIN_WINDOW
    monkeypatch.setattr(ratelimit.time, "time", lambda: later)
    assert sign_in(client, "alice", PASSWORD).status_code == 302 and signed_in(client)


def test_a_throttled_attempt_checks_no_password(people, settings, monkeypatch) -> None:
    from django.contrib.auth.backends import ModelBackend

    checked = []
    original = ModelBackend.authenticate

    def counting(self, request, username=None, password=None, **kwargs):
        checked.append(username)
        return original(self, request, username=username, password=password, **kwargs)

    monkeypatch.setattr(ModelBackend, "authenticate", counting)
    for attempt in range(40):
        sign_in(Client(), "alice", f"guess-{attempt}")
    assert len(checked) == settings.PODIUM_LOGIN_FAILURES_PER_ACCOUNT


def test_one_account_throttled_leaves_the_others_alone(people, settings) -> None:
    for attempt in range(settings.PODIUM_LOGIN_FAILURES_PER_ACCOUNT + 5):
        sign_in(Client(), "alice", f"guess-{attempt}")
    client = Client()
    assert sign_in(client, "bob", PASSWORD).status_code == 302 and signed_in(client)


def test_one_address_guessing_many_accounts_is_throttled(people, settings) -> None:
    settings.PODIUM_LOGIN_FAILURES_PER_ADDRESS = 12
    guesser = from_address("203.0.113.9")
    codes = [sign_in(guesser, f"user{n}", "guess").status_code for n in range(20)]
    assert codes[:11] == [200] * 11 and codes[12:] == [429] * 8
    response = sign_in(guesser, "alice", PASSWORD)
    assert response.status_code == 429 and "from your network" in response.content.decode()
    other = from_address("198.51.100.7")
    assert sign_in(other, "alice", PASSWORD).status_code == 302  # another address is not held back


def test_user_names_are_counted_whatever_their_case(people, settings) -> None:
    for attempt in range(settings.PODIUM_LOGIN_FAILURES_PER_ACCOUNT):
        sign_in(Client(), "ALICE" if attempt % 2 else " alice", f"guess-{attempt}")
    assert sign_in(Client(), "alice", PASSWORD).status_code == 429


def test_the_admin_sign_in_shares_the_throttle(people, settings) -> None:
    people.staff.set_password(PASSWORD)
    people.staff.save()
    for attempt in range(settings.PODIUM_LOGIN_FAILURES_PER_ACCOUNT):
        sign_in(Client(), "staff", f"guess-{attempt}")
    response = Client().post("/admin/login/", {"username": "staff", "password": PASSWORD})
    assert response.status_code == 200 and "Too many failed sign-in attempts" in response.content.decode()


def test_a_forwarded_address_counts_only_behind_a_trusted_proxy(people, settings) -> None:
    settings.PODIUM_LOGIN_FAILURES_PER_ADDRESS = 3
    # No proxy configured: X-Forwarded-For is whatever the client wrote, so it changes nothing.
    for n in range(4):
        sign_in(Client(REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR=f"10.9.9.{n}"), f"user{n}", "guess")
    assert sign_in(Client(REMOTE_ADDR="192.0.2.1"), "alice", PASSWORD).status_code == 429
    # Behind one proxy: the address it appended is the client's.
    settings.PODIUM_TRUSTED_PROXIES = 1
    proxy = "192.0.2.200"
    for n in range(4):
        sign_in(Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"spoofed, 10.8.8.{n}"), f"other{n}", "guess")
    assert sign_in(Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="10.8.8.99"), "bob", PASSWORD).status_code == 302


def test_twenty_reset_requests_send_few_emails(people, settings) -> None:
    responses = [Client().post(RESET, {"email": "alice@example.org"}) for _ in range(20)]
    assert len(mail.outbox) == settings.PODIUM_RESET_REQUESTS_PER_ACCOUNT
    assert [r.status_code for r in responses[: len(mail.outbox)]] == [302] * len(mail.outbox)
    refused = responses[-1]
    assert refused.status_code == 429
    assert "A reset link was sent to this address a short while ago" in refused.content.decode()


def test_reset_requests_from_one_address_for_many_accounts_are_throttled(people, settings) -> None:
    settings.PODIUM_RESET_REQUESTS_PER_ADDRESS = 5
    client = from_address("203.0.113.50")
    for name in ("alice", "bob", "carol", "dave", "chair", "staff", "alice"):
        client.post(RESET, {"email": f"{name}@example.org"})
    assert len(mail.outbox) == 5
    response = client.post(RESET, {"email": "bob@example.org"})
    assert response.status_code == 429 and "from your network" in response.content.decode()


def test_a_reset_for_an_unknown_address_is_counted_the_same(people, settings) -> None:
    """The refusal must not tell whether an account has that address: unknown ones are throttled alike."""
    codes = [Client().post(RESET, {"email": "nobody@example.org"}).status_code for _ in range(5)]
    limit = settings.PODIUM_RESET_REQUESTS_PER_ACCOUNT
    assert codes == [302] * limit + [429] * (5 - limit) and not mail.outbox
