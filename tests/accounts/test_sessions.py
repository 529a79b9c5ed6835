"""Sessions that bring their user (accounts.sessions): one statement reads a signed-in request's session, its
user and the user's memberships and chaired rounds, and Django still decides who is signed in: the
password hash, an inactive account, a rotated secret, an unlisted backend, an expired session."""

from __future__ import annotations

import datetime
import re
from importlib import import_module

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import AnonymousUser, Permission, User
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Membership, Session
from accounts.services import membership_add
from accounts.sessions import BACKEND, SessionStore, sessions_sweep, signed_in_user
from accounts.viewer import viewer_of
from tests.factories import RoundFactory
from tests.people import PASSWORD, make_people

pytestmark = pytest.mark.django_db

MEMBERS_PAGE = "/accounts/organizations/acme/members/"


def _store(user: User, *, backend: str = BACKEND, auth_hash: str | None = None) -> SessionStore:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = backend
    session[HASH_SESSION_KEY] = auth_hash if auth_hash is not None else user.get_session_auth_hash()
    session.create()
    return session


def _request(session_key: str | None):
    """A request carrying the session cookie, with its session as SessionMiddleware gives it."""
    request = RequestFactory().get("/")
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    return request


def _session_reads(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "session" in q["sql"] and q["sql"].startswith("SELECT")]


def _user_reads(queries: CaptureQueriesContext) -> list[str]:
    """Statements that look a user, their memberships or their chaired rounds up by the user's id, outside
    the session's statement (what Django's auth and the viewer would ask)."""
    asks = re.compile(r'"(auth_user"\."id|accounts_membership"\."user_id|catalog_round_chairs"\."user_id)" = \d')
    return [q["sql"] for q in queries.captured_queries if "session" not in q["sql"] and asks.search(q["sql"])]


def test_a_signed_in_page_reads_session_user_memberships_and_chaired_rounds_in_one_statement() -> None:
    people = make_people()
    chaired = RoundFactory(slug="s-chaired")
    chaired.chairs.add(people.alice)
    client = Client()
    client.force_login(people.alice)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(MEMBERS_PAGE)  # an admin's page: the viewer decides it
    assert response.status_code == 200
    assert len(_session_reads(queries)) == 1
    assert _user_reads(queries) == []
    # The viewer from the session's statement is the one the memberships query gives.
    request = _request(client.session.session_key)
    user = signed_in_user(request)
    fresh = User.objects.get(pk=people.alice.pk)
    assert user == people.alice
    assert viewer_of(user).roles == viewer_of(fresh).roles == {
        people.acme.pk: {Membership.Role.SUBMITTER, Membership.Role.ADMIN}}
    assert viewer_of(user).chaired_round_ids == viewer_of(fresh).chaired_round_ids == {chaired.pk}


def test_a_user_with_no_membership_is_signed_in_with_no_role() -> None:
    loner = User.objects.create_user("loner", password=PASSWORD)
    user = signed_in_user(_request(_store(loner).session_key))
    assert user == loner
    assert viewer_of(user).is_authenticated and viewer_of(user).roles == {}


def test_a_membership_added_during_the_request_is_seen_by_the_next_viewer() -> None:
    people = make_people()
    user = signed_in_user(_request(_store(people.dave).session_key))
    assert set(viewer_of(user).roles) == {people.omega.pk}
    membership_add(user=user, organization=people.zeta, role=Membership.Role.REVIEWER)  # forgets the viewer
    assert set(viewer_of(user).roles) == {people.omega.pk, people.zeta.pk}


def test_the_sign_in_page_stores_the_users_id_beside_the_session_and_sign_out_removes_it() -> None:
    people = make_people()
    client = Client()
    response = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302
    key = client.session.session_key
    assert Session.objects.get(session_key=key).user_id == people.alice.pk
    assert client.get(MEMBERS_PAGE).status_code == 200
    client.post("/accounts/logout/")
    assert not Session.objects.filter(session_key=key).exists()
    assert not Session.objects.filter(user=people.alice).exists()


def test_a_changed_password_signs_the_session_out_and_flushes_it() -> None:
    people = make_people()
    key = _store(people.alice).session_key
    people.alice.set_password("another-password-entirely-7")
    people.alice.save()
    request = _request(key)
    assert isinstance(signed_in_user(request), AnonymousUser)
    assert not Session.objects.filter(session_key=key).exists()


def test_a_session_of_a_secret_key_now_a_fallback_signs_in_and_gets_a_new_key(settings) -> None:
    people = make_people()
    old_secret = settings.SECRET_KEY
    key = _store(people.alice).session_key  # its hash made with the old key
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-key-" + "x" * 40, [old_secret]
    request = _request(key)
    assert signed_in_user(request) == people.alice
    assert request.session.session_key != key  # Django cycles the key, as for its own sessions
    assert request.session[HASH_SESSION_KEY] == people.alice.get_session_auth_hash()


def test_a_column_that_disagrees_with_the_signed_data_is_not_believed() -> None:
    people = make_people()
    key = _store(people.alice).session_key
    Session.objects.filter(session_key=key).update(user=people.staff)
    with CaptureQueriesContext(connection) as queries:
        user = signed_in_user(_request(key))
    assert user == people.alice and not user.is_staff  # the data's user, looked up Django's way
    assert len(_user_reads(queries)) == 1


def _without_hash(user: User) -> str:
    return _store(user, auth_hash="").session_key


def _of_an_inactive_account(user: User) -> str:
    key = _store(user).session_key
    User.objects.filter(pk=user.pk).update(is_active=False)
    return key


def _naming_an_unlisted_backend(user: User) -> str:
    return _store(user, backend="django.contrib.auth.backends.RemoteUserBackend").session_key


def _expired(user: User) -> str:
    key = _store(user).session_key
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - datetime.timedelta(seconds=1))
    return key


@pytest.mark.parametrize("session_of", [_without_hash, _of_an_inactive_account, _naming_an_unlisted_backend,
                                        _expired], ids=lambda f: f.__name__.strip("_"))
def test_a_session_django_would_refuse_signs_nobody_in(session_of) -> None:
    people = make_people()
    assert isinstance(signed_in_user(_request(session_of(people.alice))), AnonymousUser)


def test_a_deleted_user_takes_their_sessions_along() -> None:
    people = make_people()
    key = _store(people.bob).session_key
    people.bob.delete()
    assert not Session.objects.filter(session_key=key).exists()
    assert isinstance(signed_in_user(_request(key)), AnonymousUser)


def test_an_anonymous_session_keeps_its_data_and_has_no_user() -> None:
    session = SessionStore()
    session["theme"] = "dark"
    session.create()
    assert Session.objects.get(session_key=session.session_key).user_id is None
    request = _request(session.session_key)
    assert isinstance(signed_in_user(request), AnonymousUser)
    assert request.session["theme"] == "dark"


@pytest.mark.parametrize("cookie", [
    "\x00" * 32, "a" * 41, "a" * 5000, "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "abc'; DROP TABLE x; --abcdefghij",
    "é" * 32, "abcdefgh\x00ijklmnop",
], ids=["nul", "41-chars", "5000-chars", "upper-case", "quote", "non-ascii", "inner-nul"])
def test_a_cookie_that_cannot_name_a_session_is_anonymous_without_a_lookup(cookie: str) -> None:
    with CaptureQueriesContext(connection) as queries:
        request = _request(cookie)
        assert isinstance(signed_in_user(request), AnonymousUser)
    assert _session_reads(queries) == []
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = cookie
    assert client.get("/api/v1/results/").status_code == 200


def test_the_sweep_removes_expired_sessions_only() -> None:
    people = make_people()
    live, stale = _store(people.alice).session_key, _store(people.bob).session_key
    Session.objects.filter(session_key=stale).update(expire_date=timezone.now() - datetime.timedelta(days=1))
    assert sessions_sweep() == 1
    assert list(Session.objects.values_list("session_key", flat=True)) == [live]
    assert sessions_sweep() == 0


def test_the_sweep_runs_from_celery_beat() -> None:
    from accounts import tasks

    assert settings.CELERY_BEAT_SCHEDULE["sweep-sessions"]["task"] == tasks.sweep_sessions.name
    people = make_people()
    stale = _store(people.alice).session_key
    Session.objects.filter(session_key=stale).update(expire_date=timezone.now() - datetime.timedelta(days=1))
    assert tasks.sweep_sessions.delay().get() == 1


def test_a_session_saved_for_a_user_deleted_meanwhile_is_stored_and_signs_nobody_in() -> None:
    # A sign-in racing the account's removal: the INSERT must not fail (Django's store would take that for
    # a taken key and retry with new keys, forever).
    session = SessionStore()
    session.update({SESSION_KEY: "987654321", BACKEND_SESSION_KEY: BACKEND, HASH_SESSION_KEY: "x"})
    session.create()
    assert Session.objects.get(session_key=session.session_key).user_id == 987654321
    assert isinstance(signed_in_user(_request(session.session_key)), AnonymousUser)


def test_a_stored_session_decodes_through_the_model_as_through_the_store() -> None:
    people = make_people()
    key = _store(people.carol).session_key
    assert Session.objects.get(session_key=key).get_decoded()[SESSION_KEY] == str(people.carol.pk)


def test_changing_ones_password_keeps_this_session_signed_in_and_signs_the_others_out() -> None:
    people = make_people()
    here, elsewhere = Client(), Client()
    for client in (here, elsewhere):
        assert client.login(username="alice", password=PASSWORD)
    new_password = "a-wholly-new-password-42"
    response = here.post("/accounts/password_change/", {
        "old_password": PASSWORD, "new_password1": new_password, "new_password2": new_password})
    assert response.status_code == 302
    assert here.get(MEMBERS_PAGE).status_code == 200
    assert Session.objects.get(session_key=here.session.session_key).user_id == people.alice.pk
    assert elsewhere.get(MEMBERS_PAGE).status_code == 302  # to the sign-in page


def test_the_admin_page_deleting_a_user_never_shows_their_session_keys() -> None:
    # The page lists what the deletion takes along, sessions too, by their text, to anyone who may delete users.
    root = User.objects.create_superuser("root", "root@example.org", PASSWORD)
    helper = User.objects.create_user("helper", "helper@example.org", PASSWORD, is_staff=True)
    helper.user_permissions.add(*Permission.objects.filter(codename__in=["view_user", "delete_user"]))
    victim, staff = Client(), Client()
    victim.force_login(root)
    staff.force_login(helper)
    page = staff.get(f"/admin/auth/user/{root.pk}/delete/")
    assert page.status_code == 200
    assert f"session of user {root.pk}" in page.content.decode()  # listed, as what the deletion removes
    assert victim.session.session_key not in page.content.decode()


def test_a_session_saved_through_the_async_api_keeps_its_users_id_too() -> None:
    from asgiref.sync import async_to_sync

    people = make_people()
    session = SessionStore()
    session.update({SESSION_KEY: str(people.bob.pk), BACKEND_SESSION_KEY: BACKEND,
                    HASH_SESSION_KEY: people.bob.get_session_auth_hash()})
    async_to_sync(session.acreate)()
    assert Session.objects.get(session_key=session.session_key).user_id == people.bob.pk
