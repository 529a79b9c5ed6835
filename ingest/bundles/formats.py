"""Reading .tar.gz and .zip archives header by header, with every library error made a refusal."""

from __future__ import annotations

import gzip
import io
import lzma
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, BinaryIO, Protocol, cast

from ingest.bundles.limits import BundleRejected, Limits, human_size, shown
from ingest.bundles.screen import (
    DEVICE,
    DIR,
    FIFO,
    FILE,
    HARDLINK,
    SOCKET,
    SPARSE,
    SYMLINK,
    Header,
    Member,
    clean_name,
    too_many_members,
)

CHUNK = 256 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip with members, an empty zip
# What a broken or crafted archive makes the standard library raise while reading it.
_DAMAGE: tuple[type[BaseException], ...] = (
    tarfile.TarError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    lzma.LZMAError,
    struct.error,
    EOFError,
    OSError,  # gzip.BadGzipFile, and bz2's 'Invalid data stream'
    RecursionError,  # a chain of tar extended headers
)


class Archive(Protocol):
    compressed_size: int

    def headers(self) -> Iterator[Header]: ...

    def open(self, member: Member) -> IO[bytes]: ...

    def verify_end(self) -> None: ...


@contextmanager
def reading() -> Iterator[None]:
    """Wraps every read from the archive (never a write to disk, whose errors are ours, not the upload's)."""
    try:
        yield
    except UnicodeDecodeError:
        # zipfile decodes names flagged as UTF-8 strictly, before any member is seen.
        raise BundleRejected(
            "a member name is marked as UTF-8 but is not valid UTF-8; rename the file using UTF-8 characters "
            "and create the archive again"
        ) from None
    except NotImplementedError as exc:
        raise BundleRejected(
            f"the archive uses a feature Podium cannot read ({exc}); create it again with standard settings"
        ) from None
    except _DAMAGE as exc:
        detail = str(exc) or type(exc).__name__
        raise BundleRejected(f"the archive is damaged: {detail}; create it again and upload it again") from None


@contextmanager
def open_archive(path: Path, limits: Limits, *, whole: bool = False) -> Iterator[Archive]:
    """`whole`: every member will be read (an extraction): a small .tar.gz is then inflated once, into memory
    (_TarGz); a caller after one member (read_member) leaves it False and stops inflating at that member."""
    size = path.stat().st_size
    if size > limits.max_bundle_bytes:
        raise BundleRejected(
            f"the upload is {human_size(size)}; a bundle may be at most {human_size(limits.max_bundle_bytes)} "
            "compressed — leave out checkpoints, datasets and other large files"
        )
    with path.open("rb") as raw:
        magic = raw.read(4)
        raw.seek(0)
        archive: _TarGz | _Zip
        if magic.startswith(_GZIP_MAGIC):
            with reading():
                archive = _TarGz(raw, size, limits, whole=whole)
        elif magic in _ZIP_MAGICS:
            with reading():
                archive = _Zip(raw, size, limits)
        else:
            raise BundleRejected("the upload is not a .tar.gz or .zip archive; create one and upload it again")
        try:
            yield archive
        finally:
            archive.close()


def read_member(path: Path, wanted: str, *, limits: Limits, max_bytes: int) -> bytes | None:
    """The first `max_bytes` of the file `wanted` (a '/'-separated path) in an accepted bundle, or None.

    The member may sit under any top folder the archive chose: `wanted` matches a member named
    `wanted` or ending in `/wanted`. Raises BundleRejected when the archive cannot be read.
    """
    with open_archive(path, limits) as archive:
        for header in archive.headers():
            if header.kind != FILE:
                continue
            name = clean_name(header.raw_name)
            if name == wanted or name.endswith("/" + wanted):
                chunks: list[bytes] = []
                left = max_bytes
                with reading(), archive.open(Member(name, False, header.size, header.ref)) as stream:
                    # In CHUNKs: the tar window refuses one large read as a crafted header would be.
                    while left > 0 and (chunk := stream.read(min(CHUNK, left))):
                        chunks.append(chunk)
                        left -= len(chunk)
                return b"".join(chunks)
    return None


class _Window:
    """The decompressed tar stream, refusing to go further than an acceptable bundle could need.

    tarfile reads a PAX or GNU long-name header's whole body in one read and follows chains of them
    before it returns a member, so without this a crafted header could make it inflate gigabytes
    into memory before Screen ever saw a size.
    """

    _MAX_READ = 4 * CHUNK

    def __init__(self, stream: gzip.GzipFile | io.BytesIO, ceiling: int) -> None:
        self._stream = stream
        self._ceiling = ceiling

    def _refuse_past(self, position: int) -> None:
        if position > self._ceiling:
            raise BundleRejected(
                f"the bundle expands to more than {human_size(self._ceiling)}; it is damaged or crafted"
            )

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > self._MAX_READ:
            raise BundleRejected(
                f"the archive has a tar header larger than {human_size(self._MAX_READ)}; it is damaged or crafted"
            )
        allowed = max(0, self._ceiling - self._stream.tell())
        data = self._stream.read(min(size, allowed))
        # A request reaching past the ceiling is refused only if the stream really goes on.
        if size > allowed and len(data) == allowed and self._stream.read(1):
            self._refuse_past(self._ceiling + 1)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            self._refuse_past(offset)
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()


class _TarGz:
    """A .tar.gz read header by header. With `whole` (every member will be read), one that inflates to at most
    IN_MEMORY_BYTES (a real 10-log BERT item's bundle is ~1.2 MB) is inflated once, into memory, and read from
    there. Streamed, its headers are read through to the end and each member's data is then inflated again
    from the stream's start (a gzip stream seeks back by starting over): the demo's 10-log bundle took 3.4-3.6
    ms to extract, 2.7-2.8 ms so (2-core AMD EPYC, load 0.5-0.7; a real BERT item's ~6.2 ms either way, its
    copying in memory costing what the second inflating did). One whose gzip trailer declares more (its
    length, modulo 2**32: a hint, as anything in an upload is) is streamed without trying; one that inflates
    past the size anyway, and one whose inflating fails in any way, is streamed from the start, so that what an
    archive is refused for, and in what order, stays what the streamed reading says (its headers judged
    first)."""

    IN_MEMORY_BYTES = 8 * 2**20

    def __init__(self, raw: BinaryIO, size: int, limits: Limits, *, whole: bool = False) -> None:
        self.compressed_size = size
        budget = min(limits.max_total_bytes, int(limits.max_ratio * size))
        # Each member also costs a header block, and perhaps an extended header and padding.
        ceiling = budget + (limits.max_members + 1) * 3 * tarfile.BLOCKSIZE + tarfile.RECORDSIZE
        self._raw, self._ceiling = raw, ceiling
        most = min(ceiling, self.IN_MEMORY_BYTES)
        wanted = whole and _declared_size(raw, size) <= most  # read before the gzip reader starts on `raw`
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")
        self._window = _Window(self._gzip, ceiling)
        inflated = self._inflated(most) if wanted else None
        self._in_memory = inflated is not None
        if inflated is not None:
            # Still through a window: it refuses the one huge read a crafted extended header asks for.
            self._window = _Window(io.BytesIO(inflated), ceiling)
        # Not a context manager: open_archive closes it through close() when the caller is done.
        self._tar = tarfile.open(  # noqa: SIM115
            fileobj=cast("IO[bytes]", self._window),  # tarfile only reads, seeks and tells
            mode="r:",
            encoding="utf-8",
            errors="surrogateescape",
        )

    def _inflated(self, most: int) -> bytes | None:
        """The whole inflated stream, its CRC checked, if it is at most `most` bytes; else None, and the gzip
        stream is opened again at its start."""
        chunks: list[bytes] = []
        total = 0
        try:
            while chunk := self._gzip.read(min(CHUNK, most + 1 - total)):
                chunks.append(chunk)
                total += len(chunk)
                if total > most:
                    break
        except Exception:  # whatever it is, the streamed reading meets it again and says so
            total = most + 1
        if total <= most:
            return b"".join(chunks)
        self._gzip.close()
        self._raw.seek(0)
        self._gzip = gzip.GzipFile(fileobj=self._raw, mode="rb")
        self._window = _Window(self._gzip, self._ceiling)
        return None

    def headers(self) -> Iterator[Header]:
        while True:
            # next() reads one header; the data is skipped only when the next header is asked for,
            # after Screen has judged the declared size.
            with reading():
                info = self._tar.next()
            if info is None:
                return
            yield Header(info.name, _tar_kind(info), info.size, info)

    def open(self, member: Member) -> IO[bytes]:
        info: tarfile.TarInfo = member.ref
        stream = self._tar.extractfile(info)
        if stream is None:  # only for non-files, which Screen has refused
            raise BundleRejected(f"{shown(member.name)} cannot be read as a file")
        return stream

    def verify_end(self) -> None:
        if self._in_memory:
            return  # inflated to its end: the gzip trailer's CRC was checked then
        # tarfile stops at the end-of-archive blocks and never reaches the gzip trailer, whose CRC
        # is what tells a flipped bit or an upload cut short after the last member.
        with reading():
            while self._window.read(CHUNK):
                pass

    def close(self) -> None:
        self._tar.close()
        self._gzip.close()


def _declared_size(raw: BinaryIO, size: int) -> int:
    """The inflated length a gzip file's trailer declares (of its last member, modulo 2**32); 0 if too short."""
    if size < 18:  # a header and a trailer
        return 0
    raw.seek(size - 4)
    declared = int.from_bytes(raw.read(4), "little")
    raw.seek(0)
    return declared


def _tar_kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return SYMLINK
    if info.islnk():
        return HARDLINK
    if info.ischr() or info.isblk():
        return DEVICE
    if info.isfifo():
        return FIFO
    if info.issparse():
        return SPARSE
    if info.isdir():
        return DIR
    if info.isfile():
        return FILE
    return f"an unsupported tar entry (type {info.type!r})"


_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_CENTRAL_ENTRY_ALLOWANCE = 46 + 1024 + 512  # fixed part, a long name, generous extra fields
_ENCRYPTED = 0x01 | 0x40  # traditional and strong encryption flag bits
_UTF8_NAME = 0x800
_READABLE_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


class _Zip:
    def __init__(self, raw: BinaryIO, size: int, limits: Limits) -> None:
        self.compressed_size = size
        # zipfile builds a ZipInfo for the whole central directory at once; judge its size first.
        entries, directory_bytes = _central_directory_size(raw)
        if entries > limits.max_members or directory_bytes > limits.max_members * _CENTRAL_ENTRY_ALLOWANCE:
            raise too_many_members(limits)
        self._zip = zipfile.ZipFile(raw)

    def headers(self) -> Iterator[Header]:
        for info in self._zip.infolist():
            name = _zip_name(info)
            if info.flag_bits & _ENCRYPTED:
                raise BundleRejected(f"{shown(name)} is encrypted; create the archive again without a password")
            if info.compress_type not in _READABLE_METHODS:
                raise BundleRejected(
                    f"{shown(name)} uses zip compression method {info.compress_type}, which Podium cannot "
                    "read; create the archive again with standard (deflate) compression"
                )
            yield Header(name, _zip_kind(info), info.file_size, info)

    def open(self, member: Member) -> IO[bytes]:
        info: zipfile.ZipInfo = member.ref
        return self._zip.open(info)

    def verify_end(self) -> None:
        pass  # each member's CRC was checked as it was read

    def close(self) -> None:
        self._zip.close()


def _central_directory_size(raw: BinaryIO) -> tuple[int, int]:
    """(entries, bytes) of the zip's central directory as its end records declare them."""
    size = raw.seek(0, 2)
    tail_start = max(0, size - _EOCD.size - 0xFFFF)  # the record, then at most a 64 KiB comment
    raw.seek(tail_start)
    tail = raw.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        raise zipfile.BadZipFile("the zip's end-of-directory record is missing")
    *_, entries, directory_bytes, _offset, _comment = _EOCD.unpack_from(tail, at)
    locator = at - _ZIP64_LOCATOR.size
    if (entries == 0xFFFF or directory_bytes == 0xFFFFFFFF) and locator >= 0:
        signature, _, record_at, _ = _ZIP64_LOCATOR.unpack_from(tail, locator)
        if signature == b"PK\x06\x07":
            raw.seek(record_at)
            record = raw.read(_ZIP64_EOCD.size)
            if len(record) == _ZIP64_EOCD.size and record.startswith(b"PK\x06\x06"):
                fields = _ZIP64_EOCD.unpack(record)
                entries, directory_bytes = fields[7], fields[8]
    raw.seek(0)
    return entries, directory_bytes


def _zip_name(info: zipfile.ZipInfo) -> str:
    if info.flag_bits & _UTF8_NAME:
        return info.orig_filename
    # Without the flag zipfile decodes as cp437, but many tools write UTF-8 without setting it.
    raw = info.orig_filename.encode("cp437")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


def _zip_kind(info: zipfile.ZipInfo) -> str:
    # The high 16 bits of external_attr hold a Unix mode when a Unix tool made the zip; zero otherwise.
    file_type = stat.S_IFMT(info.external_attr >> 16)
    if file_type == stat.S_IFLNK:
        return SYMLINK
    if file_type in (stat.S_IFCHR, stat.S_IFBLK):
        return DEVICE
    if file_type == stat.S_IFIFO:
        return FIFO
    if file_type == stat.S_IFSOCK:
        return SOCKET
    return DIR if info.is_dir() or file_type == stat.S_IFDIR else FILE
