from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from accounts.management.commands._operator import attempt
from accounts.services import organization_create


class Command(BaseCommand):
    help = "Create an organization (a second run with the same slug and name changes nothing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="lowercase letters, digits and hyphens, e.g. larkspur-compute")
        parser.add_argument("name", help="the name results are published under, e.g. 'Larkspur Compute'")

    def handle(self, *args: Any, **options: Any) -> None:
        organization, created = attempt(organization_create, slug=options["slug"], name=options["name"],
                                        actor="manage.py create_organization")
        self.stdout.write(f"{'created' if created else 'exists'}: {organization.slug} ({organization.name})")
