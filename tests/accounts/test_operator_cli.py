"""The operators' commands: each does what it says once, changes nothing the second time, and refuses bad
input with a clear message and exit code 2 (issue 14; docs/operating.md)."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from accounts.models import ApiToken, AuditEvent, Membership, Organization
from catalog.models import Round
from ingest.models import Submission
from tests.people import make_people, open_round

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def refused(*args: str) -> str:
    with pytest.raises(CommandError) as error:
        run(*args)
    assert error.value.returncode == 2
    return str(error.value)


def test_create_organization_is_idempotent_and_audited() -> None:
    assert run("create_organization", "larkspur", "Larkspur Compute").startswith("created: larkspur")
    assert run("create_organization", "larkspur", "Larkspur Compute").startswith("exists: larkspur")
    assert Organization.objects.filter(slug="larkspur").count() == 1
    assert AuditEvent.objects.filter(action="organization.create").count() == 1


@pytest.mark.parametrize(("slug", "name", "reason"), [
    ("Bad Slug", "Whatever", "is not a slug"),
    ("ok-slug", "", "1 to 120 characters"),
    ("ok-slug", "x" * 121, "1 to 120 characters"),
])
def test_create_organization_refuses_bad_input(slug, name, reason) -> None:
    assert reason in refused("create_organization", slug, name)
    assert not Organization.objects.exists()


def test_create_organization_refuses_a_slug_taken_by_another_name() -> None:
    run("create_organization", "larkspur", "Larkspur Compute")
    assert "another name" in refused("create_organization", "larkspur", "Someone Else")


def test_create_user_with_a_password_role_chair_and_staff(monkeypatch) -> None:
    run("create_organization", "larkspur", "Larkspur Compute")
    round_ = open_round()
    monkeypatch.setenv("PODIUM_PASSWORD", "a-long-and-unusual-passphrase-7")
    said = run("create_user", "ada", "--email", "ada@example.org", "--organization", "larkspur", "--role",
               "submitter", "--chair", round_.slug, "--staff")
    assert "created: ada" in said and "submitter of larkspur" in said and f"chair of {round_.slug}" in said
    user = User.objects.get(username="ada")
    assert user.check_password("a-long-and-unusual-passphrase-7") and user.is_staff
    assert Membership.objects.filter(user=user, organization__slug="larkspur", role="submitter").exists()
    assert round_.chairs.filter(pk=user.pk).exists()
    # The same command again changes nothing.
    assert "exists: ada" in run("create_user", "ada", "--email", "ada@example.org", "--organization", "larkspur",
                                "--role", "submitter", "--chair", round_.slug)
    assert Membership.objects.filter(user=user).count() == 1 and round_.chairs.count() == 1


def test_create_user_without_a_password_mails_a_link_that_sets_one(monkeypatch, client) -> None:
    monkeypatch.delenv("PODIUM_PASSWORD", raising=False)
    said = run("create_user", "grace", "--email", "grace@example.org")
    assert "link to set the password was sent" in said
    user = User.objects.get(username="grace")
    assert not user.has_usable_password()
    link = next(line for line in mail.outbox[0].body.splitlines() if "/accounts/reset/" in line)
    path = link.split("://", 1)[1].split("/", 1)[1]
    form = client.get("/" + path, follow=True)
    assert form.status_code == 200
    new = "another-long-unusual-passphrase-8"
    client.post(form.redirect_chain[-1][0], {"new_password1": new, "new_password2": new})
    user.refresh_from_db()
    assert user.check_password(new)


@pytest.mark.parametrize(("args", "reason"), [
    (["bob", "--email", "not-an-address"], "valid email"),
    (["bad name!", "--email", "x@example.org"], "is not a user name"),
    (["bob", "--email", "bob@example.org", "--organization", "nowhere", "--role", "submitter"], "no organization"),
    (["bob", "--email", "bob@example.org", "--organization", "larkspur"], "go together"),
    (["bob", "--email", "bob@example.org", "--chair", "no-such-round"], "no round"),
])
def test_create_user_refuses_bad_input(args, reason, monkeypatch) -> None:
    monkeypatch.setenv("PODIUM_PASSWORD", "a-long-and-unusual-passphrase-7")
    run("create_organization", "larkspur", "Larkspur Compute")
    assert reason in refused("create_user", *args)
    assert not User.objects.filter(username__in=["bob", "bad name!"]).exists()


def test_create_user_refuses_a_weak_password_and_another_address(monkeypatch) -> None:
    monkeypatch.setenv("PODIUM_PASSWORD", "123")
    assert "too short" in refused("create_user", "bob", "--email", "bob@example.org")
    monkeypatch.setenv("PODIUM_PASSWORD", "a-long-and-unusual-passphrase-7")
    run("create_user", "bob", "--email", "bob@example.org")
    assert "another e-mail" in refused("create_user", "bob", "--email", "robert@example.org")


def test_create_api_token_prints_a_working_token_alone() -> None:
    people = make_people()
    secret = run("create_api_token", "alice", "--scope", "read", "--days", "7").strip()
    assert secret.startswith("pod_") and "\n" not in secret
    token = ApiToken.objects.get(user=people.alice)
    assert token.scope == "read"
    answer = APIClient().get("/api/v1/submissions/", HTTP_AUTHORIZATION=f"Token {secret}")
    assert answer.status_code == 200


@pytest.mark.parametrize(("args", "reason"), [
    (["nobody", "--scope", "read"], "no active user"),
    (["alice", "--scope", "read", "--days", "0"], "--days must be"),
    (["alice", "--scope", "read", "--days", "10000"], "--days must be"),
])
def test_create_api_token_refuses_bad_input(args, reason) -> None:
    make_people()
    assert reason in refused("create_api_token", *args)
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("phase", ["open", "review", "published"])
def test_round_phase_moves_the_dates_so_the_round_is_in_that_phase_now(phase) -> None:
    round_ = open_round()
    assert run("round_phase", round_.slug, phase).startswith(f"{round_.slug}: {phase}")
    round_.refresh_from_db()
    assert round_.phase() == phase
    assert AuditEvent.objects.filter(action="round.phase", subject_id=round_.pk).exists()


def test_round_phase_refuses_a_round_with_submissions_unless_forced() -> None:
    people = make_people()
    round_ = open_round()
    Submission.objects.create(organization=people.acme, round=round_, source="upload", sha256="a" * 64)
    assert "holds submissions" in refused("round_phase", round_.slug, "review")
    round_.refresh_from_db()
    assert round_.phase() == Round.Phase.OPEN
    run("round_phase", round_.slug, "review", "--force")
    round_.refresh_from_db()
    assert round_.phase() == Round.Phase.REVIEW


def test_round_phase_refuses_an_unknown_round() -> None:
    assert "no round" in refused("round_phase", "no-such-round", "open")
