"""Reading one file back out of a stored bundle, for the (visibility-checked) log view."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

MAX_SERVED_BYTES = 64 * 2**20


def read_member(bundle: Path, rel_path: str) -> bytes | None:
    """The bytes of `<org>/results/...` inside the bundle, wherever the archive put its top folder."""
    wanted = rel_path.split("/", 1)[1] if "/" in rel_path else rel_path  # drop the org folder
    if zipfile.is_zipfile(bundle):
        with zipfile.ZipFile(bundle) as archive:
            for info in archive.infolist():
                if not info.is_dir() and (info.filename == wanted or info.filename.endswith("/" + wanted)):
                    return archive.read(info)[:MAX_SERVED_BYTES]
        return None
    with tarfile.open(bundle, mode="r:*") as archive:
        for member in archive:
            if member.isfile() and (member.name == wanted or member.name.endswith("/" + wanted)):
                handle = archive.extractfile(member)
                return None if handle is None else handle.read(MAX_SERVED_BYTES)
    return None
