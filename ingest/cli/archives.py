"""Bundles on the client side: packing a submitter folder for upload, and unpacking an archive to check it.

Unpacking goes through `ingest.bundles`, the server's own screening (traversal, links, bombs, size
limits), so `check` refuses exactly what an upload would be refused for.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
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

    The same canonical form as the server's packing of loose uploads: regular files only, sorted,
    with times, owners and modes fixed and no name or time in the gzip header. An unchanged folder
    packed again has the same sha256, so the server answers "already uploaded" instead of opening
    a new submission.
    """
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar,
    ):
        for arcname, path in sorted(_files(folder).items()):
            info = tarfile.TarInfo(arcname)
            info.size = path.stat().st_size
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with path.open("rb") as stream:
                tar.addfile(info, stream)
    return buffer.getvalue()


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
