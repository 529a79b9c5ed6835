"""Personas and a round that accepts uploads, shared by the upload, permission and browser tests.

alice submits for Acme (slug acme, named "Larkspur Compute" like the demo bundles she uploads; the
owner); bob is her co-member (reviewer at Acme); carol submits for Zeta (slug zeta, "Tessellate Cloud"),
which also submits to the round; dave belongs to Omega, which does not; chair chairs the
round; staff is a site admin.
"""

from __future__ import annotations

import datetime
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.models import Membership, Organization
from accounts.services import api_token_issue, membership_add
from catalog.models import Round
from catalog.services import round_create

PASSWORD = "correct-horse-battery-staple-9"


@dataclass
class People:
    acme: Organization
    zeta: Organization
    omega: Organization
    alice: object
    bob: object
    carol: object
    dave: object
    chair: object
    staff: object


def make_people() -> People:
    users = get_user_model()

    def user(name: str, **extra: object) -> object:
        return users.objects.create_user(name, email=f"{name}@example.org", password=PASSWORD, **extra)

    # Named as the demo bundles they upload name themselves (a bundle's submitter is its uploader).
    acme = Organization.objects.create(name="Larkspur Compute", slug="acme")
    zeta = Organization.objects.create(name="Tessellate Cloud", slug="zeta")
    omega = Organization.objects.create(name="Omega", slug="omega")
    people = People(acme, zeta, omega, user("alice"), user("bob"), user("carol"), user("dave"), user("chair"),
                    user("staff", is_staff=True))
    membership_add(user=people.alice, organization=acme, role=Membership.Role.SUBMITTER)
    membership_add(user=people.alice, organization=acme, role=Membership.Role.ADMIN)
    membership_add(user=people.bob, organization=acme, role=Membership.Role.REVIEWER)
    membership_add(user=people.carol, organization=zeta, role=Membership.Role.SUBMITTER)
    membership_add(user=people.dave, organization=omega, role=Membership.Role.SUBMITTER)
    return people


def open_round(slug: str = "open-v4.0", ruleset: str = "4.0.0") -> Round:
    now = timezone.now()
    return round_create(slug=slug, name=f"Open round {slug}", ruleset=ruleset,
                        submission_deadline=now + datetime.timedelta(days=7),
                        review_start=now + datetime.timedelta(days=7),
                        review_end=now + datetime.timedelta(days=21),
                        publication_date=now + datetime.timedelta(days=30))


def set_phase(round_: Round, phase: str) -> None:
    """Move a round's dates so that it is in `phase` now."""
    now = timezone.now()
    day = datetime.timedelta(days=1)
    dates = {
        Round.Phase.OPEN: (now + 7 * day, now + 30 * day),
        Round.Phase.REVIEW: (now - day, now + 30 * day),
        Round.Phase.PUBLISHED: (now - 30 * day, now - day),
    }[phase]
    round_.submission_deadline, round_.publication_date = dates
    round_.save(update_fields=["submission_deadline", "publication_date"])
    assert round_.phase() == phase


def token_for(user: object, scope: str = "submit") -> str:
    return api_token_issue(user=user, name="test", scope=scope, days=30).secret


def tar_gz_of(folder: Path, *, top: str | None = None) -> bytes:
    """A .tar.gz of a submitter folder (under `top`, default the folder's own name)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(folder, arcname=top or folder.name)
    return buffer.getvalue()
