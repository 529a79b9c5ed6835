from __future__ import annotations

import getpass
import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from accounts.management.commands._operator import attempt, refuse
from accounts.models import Membership, Organization
from accounts.services import chair_add, membership_add, password_link_send, user_create
from catalog.models import Round

ACTOR = "manage.py create_user"


class Command(BaseCommand):
    help = ("Create a user (or find it), give it a role in an organization, make it a round's chair or "
            "staff. The password comes from $PODIUM_PASSWORD, else a prompt, else an e-mailed link.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", required=True)
        parser.add_argument("--organization", metavar="SLUG", help="give the user a role in this organization")
        parser.add_argument("--role", choices=[r.value for r in Membership.Role], help="with --organization")
        parser.add_argument("--chair", metavar="ROUND", help="make the user a chair of this round (its slug)")
        parser.add_argument("--staff", action="store_true", help="site staff: operators' pages and the admin")

    def handle(self, *args: Any, **options: Any) -> None:
        if bool(options["organization"]) != bool(options["role"]):
            raise refuse("--organization and --role go together")
        organization = round_ = None
        if options["organization"]:
            organization = Organization.objects.filter(slug=options["organization"]).first()
            if organization is None:
                raise refuse(f"no organization {options['organization']!r} (create it with create_organization)")
        if options["chair"]:
            round_ = Round.objects.filter(slug=options["chair"]).first()
            if round_ is None:
                raise refuse(f"no round {options['chair']!r}")
        password = os.environ.get("PODIUM_PASSWORD") or None
        if password is None and sys.stdin.isatty():
            password = getpass.getpass(f"Password for {options['username']} (empty: e-mail a link): ") or None
        with transaction.atomic():
            user, created = attempt(user_create, username=options["username"], email=options["email"],
                                    password=password, staff=options["staff"], actor=ACTOR)
            said = [("created" if created else "exists") + f": {user.get_username()} <{user.email}>"]
            if organization is not None:
                membership_add(user=user, organization=organization, role=options["role"], actor=ACTOR)
                said.append(f"{options['role']} of {organization.slug}")
            if round_ is not None:
                chair_add(round=round_, user=user, actor=ACTOR)
                said.append(f"chair of {round_.slug}")
            if user.is_staff:
                said.append("staff")
        if created and password is None:
            password_link_send(user=user, base_url=settings.PODIUM_BASE_URL)
            said.append(f"a link to set the password was sent to {user.email}")
        self.stdout.write("; ".join(said))
