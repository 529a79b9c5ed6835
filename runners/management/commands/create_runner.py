from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Organization
from runners import services
from runners.models import Runner


class Command(BaseCommand):
    help = "Register a reproduction runner and print its token (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--organization", help="slug of the owning organization (default: the site operator)")
        parser.add_argument("--by", default=None, help="username recorded as creator (default: first superuser)")

    def handle(self, *args: Any, **options: Any) -> None:
        if Runner.objects.filter(name=options["name"]).exists():
            raise CommandError(f"a runner named {options['name']!r} exists")
        users = get_user_model().objects
        if options["by"]:
            user = users.filter(username=options["by"]).first()
            if user is None:
                raise CommandError(f"no user {options['by']!r} (--by names the user recorded as creator)")
        else:
            user = users.filter(is_superuser=True).order_by("pk").first()
            if user is None:
                raise CommandError("no user to record as creator: create a superuser or pass --by USERNAME")
        organization = None
        if options["organization"]:
            organization = Organization.objects.filter(slug=options["organization"]).first()
            if organization is None:
                raise CommandError(f"no organization {options['organization']!r}")
        _, token = services.runner_create(name=options["name"], actor=user, organization=organization)
        self.stdout.write(token)
