"""Bundles on the client side: packing a submitter folder for upload, and unpacking an archive to check it.

Both go through `ingest.bundles`: packing gives the server's canonical form, and unpacking the
server's own screening (traversal, links, bombs, size limits), so `check` refuses exactly what an
upload would be refused for.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ingest.cli.common import CliError

CONTENT_TYPES = {".tar.gz": "application/gzip", ".tgz": "application/gzip", ".zip": "application/zip"}
PACKED_NAME = "bundle.tar.gz"
# Files the server drops on extraction (macOS Finder and Windows Explorer add them): not worth uploading.
_JUNK_FILES = {".DS_Store", "Thumbs.db"}


def _suffix(path: Path) -> str | None:
    name = path.name.lower()
    return next((suffix for suffix in CONTENT_TYPES if name.endswith(suffix)), None)


def content_type(path: Path) -> str | None:
    """The upload's MIME type when `path` is named like a bundle archive, else None."""
    suffix = _suffix(path)
    return CONTENT_TYPES[suffix] if suffix else None


def pack_folder(folder: Path) -> bytes:
    """A .tar.gz of the files under `folder`, named `<folder>/...`, the same bytes for the same files.

    The server's canonical form (`ingest.bundles.canonical_tar_gz`): an unchanged folder packed again
    has the same sha256, so the server answers "already uploaded" instead of opening a new submission.
    """
    from ingest.bundles import canonical_tar_gz

    return canonical_tar_gz(_files(folder))


def _files(folder: Path) -> dict[str, Path]:
    found = {}
    for top, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            path = Path(top, name)
            mode = path.lstat().st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                # The server refuses links and special files in a bundle; say so before uploading.
                raise CliError(f"{path} is a link or a special file: a bundle may hold only plain files and folders")
            if stat.S_ISREG(mode) and name not in _JUNK_FILES and not name.startswith("._"):
                found[f"{folder.name}/{path.relative_to(folder).as_posix()}"] = path
    return found


def extract(archive: Path, scratch: Path) -> Path:
    """Unpack `archive` under the empty folder `scratch` and return the one submitter folder it holds."""
    from ingest.bundles import BundleRejected, Limits, extract_bundle

    suffix = _suffix(archive) or ""
    # An archive may hold systems/ and results/ at its top; the folder is then named after the
    # archive, which is the name its findings are reported under.
    dest = scratch / (archive.name[: -len(suffix)] or "bundle")
    try:
        return extract_bundle(archive, dest, limits=Limits())
    except BundleRejected as exc:
        raise CliError(f"{archive}: {exc}") from None
    except OSError as exc:
        raise CliError(f"cannot unpack {archive}: {exc}") from None
