from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from catalog.services import catalog_sync


class Command(BaseCommand):
    help = "Create or refresh every official training round and its benchmarks from the catalog."

    def handle(self, *args: Any, **options: Any) -> None:
        rounds = catalog_sync()
        self.stdout.write(f"{len(rounds)} rounds, {sum(r.benchmarks.count() for r in rounds)} benchmarks")
