from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser

from accounts.management.commands._operator import attempt, refuse
from accounts.models import ApiToken
from accounts.services import MAX_TOKEN_DAYS, api_token_issue


class Command(BaseCommand):
    help = "Issue an API token for a user and print it alone on stdout (it is shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--scope", required=True, choices=[s.value for s in ApiToken.Scope])
        parser.add_argument("--days", type=int, default=90, help=f"1 to {MAX_TOKEN_DAYS} (default 90)")
        parser.add_argument("--name", default="issued by manage.py create_api_token")

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["username"], is_active=True).first()
        if user is None:
            raise refuse(f"no active user {options['username']!r}")
        if not 1 <= options["days"] <= MAX_TOKEN_DAYS:
            raise refuse(f"--days must be from 1 to {MAX_TOKEN_DAYS}")
        issued = attempt(api_token_issue, user=user, name=options["name"][:80], scope=options["scope"],
                         days=options["days"])
        self.stdout.write(issued.secret)
