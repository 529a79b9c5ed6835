"""The running code's release: a digest of the source that shapes what the site shows (Podium's own Python
modules and templates), part of every cached answer's key (leaderboard.cache), so that an answer made by
one version of the code is never served by another: after an upgrade every page is made anew, and during a
rolling one, old and new processes share the cache (and the results generation, which is not part of this)
without serving each other's pages. Read once per process; the files are read, not their times, which an
image build or a checkout does not keep."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

# Podium's own folders (the apps and the templates): what a page, a figure or an API answer is made by.
FOLDERS = ("accounts", "catalog", "core", "ingest", "leaderboard", "reviews", "runners", "templates", "config")
SUFFIXES = (".py", ".html", ".txt", ".json", ".yaml", ".yml")


@functools.cache
def release() -> str:
    return digest_of(Path(settings.BASE_DIR), FOLDERS)


def digest_of(root: Path, folders: Iterable[str]) -> str:
    """A digest of the files under `folders` of `root` with one of SUFFIXES, their names and contents."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
