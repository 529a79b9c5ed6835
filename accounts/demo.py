"""The demo's personas: one account per side of the site, so that a visitor of `make run` can try each.

They exist only in demo mode (PODIUM_DEMO_BANNER): the password is public, printed by `make run` and shown
on the demo banner, so a site that is not a demo must never hold these accounts.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from accounts.models import Membership, Organization
from accounts.services import chair_add, membership_add, user_create
from catalog.models import Round

DEMO_PASSWORD = "podium-demo"
ACTOR = "demo_data"
# The demo organizations the personas belong to, named as the importer names them (the bundles' folders).
SUBMITTER_ORG, REVIEWER_ORG = "Larkspur_Compute", "Tessellate_Cloud"


class DemoModeOff(RuntimeError):
    """Demo accounts asked for on a site that is not in demo mode."""


def demo_mode() -> bool:
    return bool(getattr(settings, "PODIUM_DEMO_BANNER", False))


def demo_accounts_described() -> list[tuple[str, str]]:
    """(username, what it may do) for each persona, as the banner and `make run` show them."""
    return [
        ("submitter", f"submitter and admin of {SUBMITTER_ORG}: uploads, answers flags, invites members"),
        ("reviewer", f"reviewer for {REVIEWER_ORG}: flags other organizations' results during review"),
        ("chair", "chair of the demo rounds: decides flags"),
        ("operator", "site staff: runners and reproduction jobs"),
    ]


@transaction.atomic
def demo_accounts_create(*, submitter_org: Organization, reviewer_org: Organization,
                         chaired: Iterable[Round]) -> list[User]:
    """Create (or find) the four personas with their memberships, chair seats and staff flag.

    Idempotent: a second run finds every account, membership and seat in place and writes nothing.
    """
    if not demo_mode():
        raise DemoModeOff("demo accounts exist only in demo mode (PODIUM_DEMO_BANNER=1): their password is public")
    users: dict[str, User] = {}
    for username in ("submitter", "reviewer", "chair", "operator"):
        user, created = user_create(username=username, email=f"{username}@demo.podium.invalid", actor=ACTOR,
                                    password=DEMO_PASSWORD, staff=username == "operator")
        if not created and not user.check_password(DEMO_PASSWORD):
            # Someone changed a persona's password: the banner would lie, so put the public one back.
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
        users[username] = user
    membership_add(user=users["submitter"], organization=submitter_org, role=Membership.Role.SUBMITTER, actor=ACTOR)
    membership_add(user=users["submitter"], organization=submitter_org, role=Membership.Role.ADMIN, actor=ACTOR)
    membership_add(user=users["reviewer"], organization=reviewer_org, role=Membership.Role.REVIEWER, actor=ACTOR)
    for round_ in chaired:
        chair_add(round=round_, user=users["chair"], actor=ACTOR)
    return list(users.values())
