"""The checks every archive member passes, whatever the format, before anything is written.

Format readers (`formats.py`) turn each header into a `Header`; `Screen.admit` refuses the
first hostile one, so a bomb or a traversal is refused after reading its header, not its data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ingest.bundles.limits import BundleRejected, Limits, check_expanded_size, check_file_size, shown

FILE = "file"
DIR = "folder"
# Anything else a header may describe, as the refusal names it.
SYMLINK = "a symbolic link"
HARDLINK = "a hard link"
DEVICE = "a device file"
FIFO = "a FIFO (named pipe)"
SOCKET = "a socket"
SPARSE = "a sparse file"

_DRIVE = re.compile(r"^[A-Za-z]:")
# Unicode's control characters (general category Cc), which its stability policy fixes for good: U+0000-U+001F and
# U+007F-U+009F. One search of a name, not unicodedata.category() per character (a member name's ~60 characters,
# each a call, on the way to every upload's verdict; tests/ingest/test_bundles.py holds the two alike).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_MAX_COMPONENT_BYTES = 255  # NAME_MAX on Linux filesystems
_MAX_NAME_CHARS = 1024
# macOS Finder and Archive Utility add these; they are never part of a submission.
_JUNK_FOLDERS = {"__MACOSX"}
_JUNK_FILES = {".DS_Store", "Thumbs.db"}


@dataclass(frozen=True)
class Header:
    raw_name: str  # as the archive spells it; undecodable bytes are surrogate escapes
    kind: str
    size: int  # as declared, which may be a lie
    ref: Any  # the format's own header object, for reading the data later


@dataclass(frozen=True)
class Member:
    name: str  # relative, '/'-separated, without '.' or empty components
    is_dir: bool
    size: int
    ref: Any


def is_junk(name: str) -> bool:
    parts = name.split("/")
    return parts[0] in _JUNK_FOLDERS or parts[-1] in _JUNK_FILES or parts[-1].startswith("._")


def clean_name(raw: str) -> str:
    """The member's path inside the bundle, or a refusal saying why it may not be extracted."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise BundleRejected(
            f"the member name {shown(raw)} is not valid UTF-8; rename the file using UTF-8 characters "
            "and create the archive again"
        ) from None
    if CONTROL.search(raw):
        raise BundleRejected(f"the member name {shown(raw)} contains control characters; rename the file")
    if "\\" in raw:
        # Windows would read a backslash as a separator, so 'a\..\..\x' is a traversal there.
        raise BundleRejected(
            f"the member name {shown(raw)} contains a backslash; create the archive with a tool that "
            "separates folders with '/'"
        )
    if raw.startswith("/"):
        raise BundleRejected(f"member {shown(raw)} points outside the bundle (an absolute path)")
    if _DRIVE.match(raw):
        raise BundleRejected(f"member {shown(raw)} points outside the bundle (a drive letter)")
    # Tools write './org/...' when archiving the current folder; those dots and empty parts are harmless.
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise BundleRejected(f"member {shown(raw)} points outside the bundle")
    if len(raw) > _MAX_NAME_CHARS or any(len(p.encode()) > _MAX_COMPONENT_BYTES for p in parts):
        raise BundleRejected(f"the member name {shown(raw)} is too long; shorten the file or folder names")
    return "/".join(parts)


class Screen:
    """Admits headers one at a time and keeps the members that will be extracted."""

    def __init__(self, limits: Limits, compressed_size: int) -> None:
        self.limits = limits
        self.compressed_size = compressed_size
        self.members: list[Member] = []
        self._seen: set[str] = set()
        self._count = 0
        self._declared = 0

    def admit(self, header: Header) -> None:
        self._count += 1
        if self._count > self.limits.max_members:
            raise too_many_members(self.limits)
        name = clean_name(header.raw_name)
        if header.kind not in (FILE, DIR):
            raise BundleRejected(f"{shown(header.raw_name)} is {header.kind}; bundles may only contain regular files")
        if not name:
            if header.kind == DIR:
                return  # the archive's own root, './'
            raise BundleRejected(f"the archive has a file with an empty name ({shown(header.raw_name)})")
        if name in self._seen:
            raise BundleRejected(f"{shown(name)} appears twice in the archive; each file may appear only once")
        self._seen.add(name)
        if header.kind == FILE:
            check_file_size(name, header.size, self.limits)
            self._declared += header.size
            check_expanded_size(self._declared, self.compressed_size, self.limits)
        self.members.append(Member(name, header.kind == DIR, header.size, header.ref))

    def finish(self) -> list[Member]:
        """Refuses a name used both as a file and as a folder, which no extraction can honour."""
        files = {m.name for m in self.members if not m.is_dir}
        folders = {"/".join(m.name.split("/")[:i]) for m in self.members for i in range(1, m.name.count("/") + 1)}
        clashes = sorted(files & folders)
        if clashes:
            raise BundleRejected(f"{shown(clashes[0])} is both a file and a folder in the archive")
        return self.members


def too_many_members(limits: Limits) -> BundleRejected:
    return BundleRejected(
        f"the bundle has more than {limits.max_members} members; leave out checkpoints, datasets, build "
        "outputs and other files that are neither results nor the implementation's source"
    )
