from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from accounts.management.commands._operator import attempt
from ingest.backup import backup_restore


class Command(BaseCommand):
    help = ("Restore a backup written by `manage.py backup` into an empty database (run `migrate` first) and "
            "store; every file's checksum is verified.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", type=Path, help="the .tar file `manage.py backup` wrote")
        parser.add_argument("--force", action="store_true", help="restore into a database that has submissions")

    def handle(self, *args: Any, **options: Any) -> None:
        manifest = attempt(backup_restore, source=options["source"], force=options["force"])
        rows = sum(manifest["counts"].values())
        self.stdout.write(f"restored {rows} rows and {len(manifest['files'])} files from {options['source']}")
