"""Accounts: invitations, memberships, API tokens and their scopes, log in / out, password reset.

Personas from `tests.people`: alice is Acme's admin and submitter, bob a reviewer at Acme, carol
submits for Zeta, dave for Omega; none of them belongs to another's organization.
"""

from __future__ import annotations

import datetime
import hashlib
import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import services
from accounts.models import ApiToken, AuditEvent, Invitation, Membership, Organization
from tests.people import PASSWORD, make_people, open_round, token_for

pytestmark = pytest.mark.django_db

MEMBERS = "/accounts/organizations/acme/members/"
TOKENS = "/accounts/tokens/"
SUBMISSIONS_API = "/api/v1/submissions/"
ACCEPT_URL = "http://testserver/accounts/invitations/{token}/"
NEW_PASSWORD = "another-long-passphrase-42"


@pytest.fixture
def people():
    return make_people()


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def invite(people, email: str = "erin@example.org", role: str = Membership.Role.SUBMITTER) -> tuple[Invitation, str]:
    return services.invitation_create(organization=people.acme, email=email, role=role, actor=people.alice,
                                      accept_url=ACCEPT_URL)


def accept_path(token: str) -> str:
    return f"/accounts/invitations/{token}/"


def api_with(header: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    return client


def token_row(secret: str) -> ApiToken:
    return ApiToken.objects.get(prefix=secret.split("_")[1])


def actions(subject_type: str, subject_id: int) -> set[str]:
    return set(AuditEvent.objects.filter(subject_type=subject_type, subject_id=subject_id)
               .values_list("action", flat=True))


def user_exists(username: str) -> bool:
    return get_user_model().objects.filter(username=username).exists()


# Invitations ------------------------------------------------------------------------------------


def test_admin_invites_by_email_with_a_link_and_only_the_tokens_hash_is_stored(people) -> None:
    response = signed_in(people.alice).post(MEMBERS, {"email": "erin@example.org", "role": Membership.Role.REVIEWER})
    assert response.status_code == 302 and response["Location"] == MEMBERS
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["erin@example.org"] and "Larkspur Compute" in message.subject
    match = re.search(r"http://testserver/accounts/invitations/([\w-]+)/", message.body)
    assert match is not None, message.body
    token = match.group(1)
    invitation = Invitation.objects.get()
    assert (invitation.organization, invitation.email, invitation.role) == (people.acme, "erin@example.org",
                                                                            Membership.Role.REVIEWER)
    assert invitation.token_hash == hashlib.sha256(token.encode()).hexdigest()
    stored = [str(value) for value in Invitation.objects.values().get().values()]
    assert not any(token in value for value in stored)


def test_an_invitation_writes_an_audit_row(people) -> None:
    signed_in(people.alice).post(MEMBERS, {"email": "erin@example.org", "role": Membership.Role.SUBMITTER})
    invitation = Invitation.objects.get()
    event = AuditEvent.objects.get(action="invitation.create")
    assert (event.actor, event.subject_type, event.subject_id) == (people.alice, "invitation", invitation.pk)
    assert event.after == {"email": "erin@example.org", "role": "submitter", "organization": "acme"}


def test_a_member_who_is_not_an_admin_gets_403_on_the_invite_post(people) -> None:
    client = signed_in(people.bob)
    assert client.get(MEMBERS).status_code == 200  # a member may see who else is there
    response = client.post(MEMBERS, {"email": "erin@example.org", "role": Membership.Role.ADMIN})
    assert response.status_code == 403
    assert not Invitation.objects.exists() and mail.outbox == []


def test_an_outsider_gets_404_on_the_members_page(people) -> None:
    client = signed_in(people.dave)
    assert client.get(MEMBERS).status_code == 404
    assert client.post(MEMBERS, {"email": "erin@example.org", "role": Membership.Role.ADMIN}).status_code == 404
    assert not Invitation.objects.exists()


def test_accepting_creates_the_account_logs_in_and_adds_the_invited_role(people) -> None:
    invitation, token = invite(people, role=Membership.Role.REVIEWER)
    client = Client()
    assert client.get(accept_path(token)).status_code == 200
    response = client.post(accept_path(token), {"username": "erin", "password": PASSWORD})
    # A reviewer cannot upload, so the welcome is the home page rather than the submit page.
    assert response.status_code == 302 and response["Location"] == "/"
    erin = get_user_model().objects.get(username="erin")
    assert erin.email == "erin@example.org" and erin.check_password(PASSWORD)
    assert int(client.session["_auth_user_id"]) == erin.pk
    assert list(Membership.objects.filter(user=erin).values_list("organization__slug", "role")) == [
        ("acme", "reviewer")]
    invitation.refresh_from_db()
    assert invitation.accepted_by == erin and invitation.accepted_at is not None


def test_accepting_writes_audit_rows(people) -> None:
    invitation, token = invite(people)
    Client().post(accept_path(token), {"username": "erin", "password": PASSWORD})
    erin = get_user_model().objects.get(username="erin")
    membership = Membership.objects.get(user=erin)
    assert "user.create" in actions("user", erin.pk)
    assert "invitation.accept" in actions("invitation", invitation.pk)
    assert "membership.create" in actions("membership", membership.pk)
    assert set(AuditEvent.objects.filter(actor=erin).values_list("action", flat=True)) == {
        "user.create", "invitation.accept", "membership.create"}


def test_an_invitation_link_works_only_once(people) -> None:
    _, token = invite(people)
    Client().post(accept_path(token), {"username": "erin", "password": PASSWORD})
    again = Client()
    assert again.get(accept_path(token)).status_code == 404
    response = again.post(accept_path(token), {"username": "erin2", "password": PASSWORD})
    assert response.status_code == 404
    assert not user_exists("erin2")
    assert Membership.objects.filter(user__username="erin").count() == 1


def test_an_expired_invitation_shows_the_invalid_page_and_creates_nothing(people) -> None:
    invitation, token = invite(people)
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    client = Client()
    page = client.get(accept_path(token))
    assert page.status_code == 404
    assert "accounts/invitation_invalid.html" in [t.name for t in page.templates]
    assert client.post(accept_path(token), {"username": "erin", "password": PASSWORD}).status_code == 404
    assert not user_exists("erin")
    invitation.refresh_from_db()
    assert invitation.accepted_at is None


def test_an_unknown_invitation_shows_the_invalid_page_and_creates_nothing(people) -> None:
    users_before = get_user_model().objects.count()
    client = Client()
    page = client.get(accept_path("not-a-real-token"))
    assert page.status_code == 404
    assert "unknown, already used or expired" in page.content.decode()
    response = client.post(accept_path("not-a-real-token"), {"username": "erin", "password": PASSWORD})
    assert response.status_code == 404
    assert get_user_model().objects.count() == users_before


def test_a_signed_in_user_joins_with_the_button(people) -> None:
    _, token = invite(people, email="dave@example.org", role=Membership.Role.SUBMITTER)
    users_before = get_user_model().objects.count()
    client = signed_in(people.dave)
    page = client.get(accept_path(token))
    assert 'name="join"' in page.content.decode()
    response = client.post(accept_path(token), {"join": "1"})
    assert response.status_code == 302 and response["Location"] == "/submit/"
    assert Membership.objects.filter(user=people.dave, organization=people.acme, role="submitter").exists()
    assert get_user_model().objects.count() == users_before


def test_a_taken_username_is_a_form_error_and_creates_nothing(people) -> None:
    invitation, token = invite(people)
    memberships_before = Membership.objects.count()
    response = Client().post(accept_path(token), {"username": "bob", "password": PASSWORD})
    assert response.status_code == 200
    assert "is taken" in " ".join(response.context["form"].non_field_errors())
    assert Membership.objects.count() == memberships_before
    assert not Membership.objects.filter(user=people.bob, role=Membership.Role.SUBMITTER).exists()
    invitation.refresh_from_db()
    assert invitation.accepted_at is None  # still usable with another name


def test_a_weak_password_is_a_form_error_and_creates_nothing(people) -> None:
    invitation, token = invite(people)
    response = Client().post(accept_path(token), {"username": "erin", "password": "12345"})
    assert response.status_code == 200
    assert response.context["form"].errors["password"]
    assert not user_exists("erin")
    invitation.refresh_from_db()
    assert invitation.accepted_at is None


# API tokens: the page ---------------------------------------------------------------------------


def test_a_new_token_is_shown_once_and_only_its_prefix_and_hash_are_stored(people) -> None:
    client = signed_in(people.alice)
    response = client.post(TOKENS, {"name": "CI uploads", "scope": ApiToken.Scope.SUBMIT, "days": 30})
    assert response.status_code == 200
    full = response.context["issued"].secret
    assert full.startswith("pod_")
    assert response.content.decode().count(full) == 1
    _, prefix, secret = full.split("_", 2)
    row = ApiToken.objects.get()
    assert (row.user, row.name, row.scope, row.prefix) == (people.alice, "CI uploads", "submit", prefix)
    assert row.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    stored = [str(value) for value in ApiToken.objects.values().get().values()]
    assert not any(secret in value for value in stored)
    assert secret not in client.get(TOKENS).content.decode()  # never shown again


def test_revoking_a_token_on_the_page_writes_an_audit_row(people) -> None:
    token = token_row(token_for(people.alice))
    response = signed_in(people.alice).post(f"/accounts/tokens/{token.pk}/revoke/")
    assert response.status_code == 302 and response["Location"] == TOKENS
    token.refresh_from_db()
    assert token.revoked_at is not None
    event = AuditEvent.objects.get(action="api_token.revoke")
    assert (event.actor, event.subject_id) == (people.alice, token.pk)


def test_another_users_token_cannot_be_revoked(people) -> None:
    token = token_row(token_for(people.carol))
    response = signed_in(people.alice).post(f"/accounts/tokens/{token.pk}/revoke/")
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    assert not AuditEvent.objects.filter(action="api_token.revoke").exists()


# API tokens: the API ----------------------------------------------------------------------------


def test_a_read_token_can_list_submissions(people) -> None:
    response = api_with(f"Token {token_for(people.alice, 'read')}").get(SUBMISSIONS_API)
    assert response.status_code == 200
    assert response.json() == []


def test_a_read_token_gets_403_on_upload(people) -> None:
    open_round()
    response = api_with(f"Token {token_for(people.alice, 'read')}").post(SUBMISSIONS_API, {"round": "open-v4.0"},
                                                                         format="multipart")
    assert response.status_code == 403
    assert "read scope" in response.json()["detail"]


def test_a_submit_token_passes_the_permission_check_on_upload(people) -> None:
    open_round()
    # No bundle: refused by validation (400), which the request reaches only past authentication and scope.
    response = api_with(f"Token {token_for(people.alice, 'submit')}").post(SUBMISSIONS_API, {"round": "open-v4.0"},
                                                                           format="multipart")
    assert response.status_code == 400
    assert "Send a bundle" in response.content.decode()


def test_an_expired_token_gets_401(people) -> None:
    secret = token_for(people.alice)
    ApiToken.objects.filter(pk=token_row(secret).pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    response = api_with(f"Token {secret}").get(SUBMISSIONS_API)
    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


def test_a_revoked_token_gets_401(people) -> None:
    secret = token_for(people.alice)
    signed_in(people.alice).post(f"/accounts/tokens/{token_row(secret).pk}/revoke/")
    response = api_with(f"Token {secret}").get(SUBMISSIONS_API)
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_a_token_with_a_wrong_secret_gets_401(people) -> None:
    secret = token_for(people.alice)
    response = api_with(f"Token {secret[:-4]}AAAA").get(SUBMISSIONS_API)
    assert response.status_code == 401


@pytest.mark.parametrize(
    "header",
    [
        "Token",
        "Token a b",
        "Token pod_x",
        "Token pod__",
        "Token pod_é_secret",  # WSGI hands headers over as latin-1: this is what non-ASCII bytes become
        "Token nope",
    ],
    ids=["no_token", "two_words", "no_secret", "empty_parts", "non_ascii", "not_ours"],
)
def test_a_malformed_authorization_header_gets_401_not_a_server_error(header, people) -> None:
    response = api_with(header).get(SUBMISSIONS_API)  # the test client re-raises any server error
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_a_token_s_last_use_is_written_once_the_response_has_gone(people) -> None:
    from django.http import HttpRequest
    from rest_framework.request import Request

    from accounts.authentication import ApiTokenAuthentication
    from core import after_response

    secret = token_for(people.alice, "read")
    request = HttpRequest()
    request.META["HTTP_AUTHORIZATION"] = f"Token {secret}"
    after_response._started()  # a request being served (the signal's own handler, without Django's others)
    try:
        assert ApiTokenAuthentication().authenticate(Request(request)) is not None
        assert token_row(secret).last_used_at is None  # not on the way to the answer
    finally:
        after_response._finished()
    assert token_row(secret).last_used_at is not None


def test_using_a_token_sets_last_used_at(people) -> None:
    secret = token_for(people.alice, "read")
    other = token_for(people.alice, "read")
    assert token_row(secret).last_used_at is None
    before = timezone.now()
    assert api_with(f"Token {secret}").get(SUBMISSIONS_API).status_code == 200
    last_used = token_row(secret).last_used_at
    assert last_used is not None and last_used >= before
    assert token_row(other).last_used_at is None  # that token's row only
    assert api_with(f"Token {secret}").get(SUBMISSIONS_API).status_code == 200
    assert token_row(secret).last_used_at == last_used  # written at most once a minute


# Log in, log out, password reset ----------------------------------------------------------------


def test_login_with_the_right_password_signs_in(people) -> None:
    client = Client()
    response = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
    assert int(client.session["_auth_user_id"]) == people.alice.pk


def test_login_with_a_wrong_password_is_refused(people) -> None:
    client = Client()
    response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 200 and response.context["form"].errors
    assert "_auth_user_id" not in client.session


def test_logout_is_a_post_and_signs_out(people) -> None:
    client = signed_in(people.alice)
    assert client.get("/accounts/logout/").status_code == 405
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert "_auth_user_id" not in client.session
    assert client.get(TOKENS).status_code == 302


def test_password_reset_mails_a_link_that_sets_a_new_password(people) -> None:
    client = Client()
    response = client.post("/accounts/password_reset/", {"email": "alice@example.org"})
    assert response.status_code == 302 and response["Location"] == "/accounts/password_reset/done/"
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["alice@example.org"]
    match = re.search(r"http://testserver(/accounts/reset/[^/\s]+/[^/\s]+/)", mail.outbox[0].body)
    assert match is not None, mail.outbox[0].body
    form_page = client.get(match.group(1), follow=True)  # Django swaps the token for a session value
    assert form_page.context["validlink"]
    set_path = form_page.redirect_chain[-1][0]
    done = client.post(set_path, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/accounts/reset/done/"
    fresh = Client()
    assert fresh.post("/accounts/login/", {"username": "alice", "password": NEW_PASSWORD}).status_code == 302
    assert int(fresh.session["_auth_user_id"]) == people.alice.pk
    assert not Client().login(username="alice", password=PASSWORD)


def test_a_password_reset_link_works_only_once(people) -> None:
    client = Client()
    client.post("/accounts/password_reset/", {"email": "alice@example.org"})
    link = re.search(r"http://testserver(/accounts/reset/[^/\s]+/[^/\s]+/)", mail.outbox[0].body).group(1)
    set_path = client.get(link, follow=True).redirect_chain[-1][0]
    client.post(set_path, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    again = Client().get(link, follow=True)
    assert not again.context["validlink"]


# Pages that need a login ------------------------------------------------------------------------


@pytest.mark.parametrize("path", [TOKENS, MEMBERS])
def test_account_pages_redirect_anonymous_visitors_to_login(path, people) -> None:
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


def test_an_audit_batch_writes_its_rows_in_one_insert_in_order_at_its_end() -> None:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from accounts.services import audit_batch, audit_record

    org = Organization.objects.create(name="Batch", slug="batch")
    with CaptureQueriesContext(connection) as queries, transaction.atomic(), audit_batch():
        first = audit_record(actor="worker", action="one", subject=org)
        with audit_batch():  # an inner block adds to the outer one's
            audit_record(actor="worker", action="two", subject=org, after={"n": 2})
        assert first.pk is None and not AuditEvent.objects.filter(action="one").exists()  # not yet
        audit_record(actor="worker", action="three", subject=org)
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('INSERT INTO "accounts_auditevent"')]
    assert len(inserts) == 1
    rows = list(AuditEvent.objects.filter(subject_type="organization", subject_id=org.pk).order_by("id"))
    assert [(e.action, e.after) for e in rows] == [("one", {}), ("two", {"n": 2}), ("three", {})]
    assert rows[0].created_at <= rows[1].created_at <= rows[2].created_at


@pytest.mark.django_db(transaction=True)
def test_an_audit_batch_that_raises_writes_nothing_and_one_outside_a_transaction_is_refused() -> None:
    from django.db import transaction

    from accounts.services import audit_batch, audit_record

    org = Organization.objects.create(name="Batch", slug="batch")
    with pytest.raises(ValueError), transaction.atomic(), audit_batch():
        audit_record(actor="worker", action="lost", subject=org)
        raise ValueError("the change failed")
    assert not AuditEvent.objects.filter(action="lost").exists()
    audit_record(actor="worker", action="alone", subject=org)  # outside any batch: written at once
    assert AuditEvent.objects.filter(action="alone").exists()
    with pytest.raises(RuntimeError, match="inside the transaction"), audit_batch():
        pass
