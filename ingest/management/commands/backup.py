from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ingest.backup import backup_write


class Command(BaseCommand):
    help = "Write the database and every stored file (bundles, reproduction logs) to one .tar file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("target", type=Path, help="the .tar file to write")

    def handle(self, *args: Any, **options: Any) -> None:
        manifest = backup_write(options["target"])
        rows = sum(manifest["counts"].values())
        self.stdout.write(f"{options['target']}: {rows} rows, {len(manifest['files'])} files")
