"""Receiving uploaded bundles: hostile archives are refused with a message that says what to fix,
and nothing is left behind; good bundles and form uploads come out as one submitter folder.

Hostile archives are built here byte by byte; realistic content comes from the demo generator.
No database involved.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import random
import re
import stat
import struct
import sys
import tarfile
import unicodedata
import warnings
import zipfile
import zlib
from pathlib import Path

import pytest

from ingest.bundles import (
    BundleRejected,
    Limits,
    LooseFile,
    extract_bundle,
    formats,
    pack_loose_files,
    read_member,
    screen,
    sha256_of,
)
from ingest.bundles import extract as extract_module
from ingest.bundles.screen import Member
from ingest.demo import DemoManifest
from ingest.engine.tree import items_of


def mllog(key: str, value: object) -> bytes:
    return (
        f':::MLLOG {{"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "{key}", '
        f'"value": "{value}", "metadata": {{"file": "train.py", "lineno": 1}}}}\n'
    ).encode()


SYSTEM = b'{\n    "submitter": "Org",\n    "division": "closed"\n}\n'
LOG = mllog("submission_benchmark", "bert") + mllog("submission_org", "Org")
GOOD = {"Org/systems/sys.json": SYSTEM, "Org/results/sys/bert/result_0.txt": LOG}
DEFAULT = Limits()


# --- building archives ------------------------------------------------------------------------


def entry(
    name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **fields: object
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    for field, value in fields.items():
        setattr(info, field, value)
    return info, data


def entries(files: dict[str, bytes]) -> list[tuple[tarfile.TarInfo, bytes]]:
    return [entry(name, data) for name, data in files.items()]


def write_tgz(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def write_zip(path: Path, members: list[tuple[str | zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate names some tests write on purpose
        for name, data in members:
            archive.writestr(name, data)
    return path


def zip_items(files: dict[str, bytes]) -> list[tuple[str | zipfile.ZipInfo, bytes]]:
    return list(files.items())


def hostile(tmp_path: Path, fmt: str, extra: dict[str, bytes]) -> Path:
    """GOOD plus `extra`, as a .tar.gz or a .zip."""
    files = {**GOOD, **extra}
    if fmt == "tgz":
        return write_tgz(tmp_path / "bundle.tar.gz", entries(files))
    return write_zip(tmp_path / "bundle.zip", zip_items(files))


def patch_central_entry(blob: bytes, name: bytes, offset: int, fmt: str, value: int) -> bytes:
    """Overwrite one field of the central-directory entry for `name` (offsets from the entry's signature)."""
    at = blob.find(b"PK\x01\x02")
    while at >= 0:
        name_length = struct.unpack_from("<H", blob, at + 28)[0]
        if blob[at + 46 : at + 46 + name_length] == name:
            patched = bytearray(blob)
            struct.pack_into(fmt, patched, at + offset, value)
            return bytes(patched)
        at = blob.find(b"PK\x01\x02", at + 46)
    raise AssertionError(f"{name!r} is not in the central directory")


def archive_folder(folder: Path, path: Path, *, top: str | None) -> Path:
    """A .tar.gz or .zip (by suffix) of `folder`, under `top/` or at the archive root."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    prefix = f"{top}/" if top else ""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for file in files:
                archive.write(file, prefix + file.relative_to(folder).as_posix())
    else:
        with tarfile.open(path, "w:gz") as tar:
            tar.add(folder, arcname=top or ".")  # tar's own './' prefix when there is no top folder
    return path


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "extracted"


def refused(archive: Path, dest: Path, limits: Limits = DEFAULT) -> str:
    with pytest.raises(BundleRejected) as caught:
        extract_bundle(archive, dest, limits=limits)
    assert list(dest.iterdir()) == [], "a refusal must leave nothing behind"
    return str(caught.value)


@pytest.fixture(scope="module")
def larkspur(demo_tree: tuple[Path, DemoManifest]) -> Path:
    root, _ = demo_tree
    return root / "demo_training_results_v4.0" / "Larkspur_Compute"


def tree_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- good bundles -----------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_a_bundle_with_a_top_folder_yields_that_folder(larkspur: Path, tmp_path: Path, dest: Path, suffix: str) -> None:
    archive = archive_folder(larkspur, tmp_path / f"bundle{suffix}", top="Larkspur_Compute")
    folder = extract_bundle(archive, dest, limits=DEFAULT)
    assert folder == dest / "Larkspur_Compute"
    assert tree_files(folder) == tree_files(larkspur)


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_a_bundle_of_the_folder_contents_yields_dest_itself(
    larkspur: Path, tmp_path: Path, dest: Path, suffix: str
) -> None:
    archive = archive_folder(larkspur, tmp_path / f"bundle{suffix}", top=None)
    folder = extract_bundle(archive, dest, limits=DEFAULT)
    assert folder == dest
    assert tree_files(folder) == tree_files(larkspur)


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_each_folder_is_made_once(larkspur: Path, tmp_path: Path, dest: Path, suffix: str, monkeypatch) -> None:
    archive = archive_folder(larkspur, tmp_path / f"bundle{suffix}", top="Larkspur_Compute")
    made: list[Path] = []
    real = Path.mkdir
    depth = [0]

    def mkdir(self: Path, *args: object, **kwargs: object) -> None:
        if not depth[0]:  # a call of the extraction's, not pathlib's own for the missing parents
            made.append(self)
        depth[0] += 1
        try:
            real(self, *args, **kwargs)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(Path, "mkdir", mkdir)
    folder = extract_bundle(archive, dest, limits=DEFAULT)
    assert tree_files(folder) == tree_files(larkspur)
    inside = [path for path in made if path.is_relative_to(dest)]
    assert len(inside) == len(set(inside)), [p for p in set(inside) if inside.count(p) > 1]


@pytest.mark.parametrize("in_memory", [True, False])
def test_a_small_tar_gz_is_inflated_once(larkspur: Path, tmp_path: Path, dest: Path, in_memory: bool,
                                         monkeypatch) -> None:
    # Streamed, each member's data is inflated again from the stream's start (a gzip stream seeks back so).
    archive = archive_folder(larkspur, tmp_path / "bundle.tar.gz", top="Larkspur_Compute")
    size = len(gzip.decompress(archive.read_bytes()))
    inflated = [0]
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self._inner = real(*args, **kwargs)

        def decompress(self, data: bytes, *args: object) -> bytes:
            out = self._inner.decompress(data, *args)
            inflated[0] += len(out)
            return out

        def __getattr__(self, name: str) -> object:
            return getattr(self._inner, name)

    monkeypatch.setattr(zlib, "decompressobj", Counting)
    if not in_memory:
        monkeypatch.setattr(formats._TarGz, "IN_MEMORY_BYTES", 0)
    folder = extract_bundle(archive, dest, limits=DEFAULT)
    assert tree_files(folder) == tree_files(larkspur)
    assert (inflated[0] == size) is in_memory, (inflated[0], size)


@pytest.fixture
def tried_in_memory(monkeypatch) -> list[int]:
    """Each time an archive was tried in memory (_TarGz._inflated), the most it would hold."""
    tried: list[int] = []
    real = formats._TarGz._inflated

    def recorded(self: formats._TarGz, most: int) -> bytes | None:
        tried.append(most)
        return real(self, most)

    monkeypatch.setattr(formats._TarGz, "_inflated", recorded)
    return tried


def test_a_tar_gz_past_the_in_memory_size_is_streamed_without_trying(larkspur: Path, tmp_path: Path, dest: Path,
                                                                     monkeypatch, tried_in_memory) -> None:
    archive = archive_folder(larkspur, tmp_path / "bundle.tar.gz", top="Larkspur_Compute")
    monkeypatch.setattr(formats._TarGz, "IN_MEMORY_BYTES", len(gzip.decompress(archive.read_bytes())) - 1)
    assert tree_files(extract_bundle(archive, dest, limits=DEFAULT)) == tree_files(larkspur)
    assert tried_in_memory == []  # its trailer said so


def test_a_tar_gz_whose_trailer_understates_its_size_is_streamed_alike(larkspur: Path, tmp_path: Path, dest: Path,
                                                                       monkeypatch, tried_in_memory) -> None:
    # Two gzip members: the trailer read is the last one's, a few bytes; the whole inflates past the size.
    archive = archive_folder(larkspur, tmp_path / "bundle.tar.gz", top="Larkspur_Compute")
    tar = gzip.decompress(archive.read_bytes())
    archive.write_bytes(gzip.compress(tar[:-1024]) + gzip.compress(tar[-1024:]))
    monkeypatch.setattr(formats._TarGz, "IN_MEMORY_BYTES", len(tar) - 1)
    assert tree_files(extract_bundle(archive, dest, limits=DEFAULT)) == tree_files(larkspur)
    assert tried_in_memory == [len(tar) - 1]  # tried, found too large, streamed from the start


def test_reading_one_member_never_inflates_the_whole_bundle(larkspur: Path, tmp_path: Path,
                                                            tried_in_memory) -> None:
    archive = archive_folder(larkspur, tmp_path / "bundle.tar.gz", top="Larkspur_Compute")
    found = read_member(archive, "systems/atlas_lx4_n1.json", limits=DEFAULT, max_bytes=2**20)
    assert found == (larkspur / "systems" / "atlas_lx4_n1.json").read_bytes()
    assert tried_in_memory == []


def test_the_format_comes_from_the_bytes_not_the_name(larkspur: Path, tmp_path: Path, dest: Path) -> None:
    archive = archive_folder(larkspur, tmp_path / "bundle.zip", top="Larkspur_Compute")
    renamed = archive.rename(tmp_path / "bundle.tar.gz")
    assert extract_bundle(renamed, dest, limits=DEFAULT) == dest / "Larkspur_Compute"


def test_extracted_items_are_what_the_importer_reads(larkspur: Path, tmp_path: Path, dest: Path) -> None:
    archive = archive_folder(larkspur, tmp_path / "bundle.tar.gz", top="Larkspur_Compute")
    found = {(i.system, i.benchmark) for i in items_of(extract_bundle(archive, dest, limits=DEFAULT))}
    assert found == {(i.system, i.benchmark) for i in items_of(larkspur)}


def test_mac_junk_is_ignored_and_not_extracted(tmp_path: Path, dest: Path) -> None:
    junk = {
        "__MACOSX/Org/._sys.json": b"\x00\x05\x16\x07",
        "Org/.DS_Store": b"\x00\x00",
        "Org/systems/._sys.json": b"\xff",
    }
    archive = write_zip(tmp_path / "bundle.zip", zip_items({**GOOD, **junk}))
    folder = extract_bundle(archive, dest, limits=DEFAULT)
    assert folder == dest / "Org"
    assert sorted(tree_files(dest)) == sorted(GOOD)


def test_source_code_and_readmes_inside_the_folder_are_allowed(tmp_path: Path, dest: Path) -> None:
    extras = {"Org/README.md": b"# notes\n", "Org/benchmarks/bert/implementations/run.sh": b"#!/bin/sh\n"}
    archive = hostile(tmp_path, "tgz", extras)
    assert extract_bundle(archive, dest, limits=DEFAULT) == dest / "Org"


def test_explicit_folder_entries_are_fine(tmp_path: Path, dest: Path) -> None:
    folders = [entry(name, kind=tarfile.DIRTYPE) for name in ("./", "Org", "Org/systems", "Org/results/")]
    archive = write_tgz(tmp_path / "bundle.tar.gz", folders + entries(GOOD))
    assert extract_bundle(archive, dest, limits=DEFAULT) == dest / "Org"


# --- hostile member names ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["tgz", "zip"])
@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("../../etc/passwd", "member '../../etc/passwd' points outside the bundle"),
        ("../x", "member '../x' points outside the bundle"),
        ("/abs", "member '/abs' points outside the bundle (an absolute path)"),
        ("a/../../b", "member 'a/../../b' points outside the bundle"),
        ("Org/../Org/x.txt", "points outside the bundle"),
        ("C:/Windows/x", "points outside the bundle (a drive letter)"),
        ("Org\\..\\..\\x", "contains a backslash"),
        ("Org/bell\x07.txt", "contains control characters"),
        ("Org/del\x7f.txt", "contains control characters"),
        ("Org/c1\x85.txt", "contains control characters"),
    ],
)
def test_a_member_escaping_the_bundle_is_refused(
    tmp_path: Path, dest: Path, fmt: str, name: str, fragment: str
) -> None:
    assert fragment in refused(hostile(tmp_path, fmt, {name: b"x"}), dest)


def test_the_control_characters_refused_are_unicodes_own() -> None:
    """screen.CONTROL, one search of a name, finds exactly the characters of Unicode's general category Cc."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    assert set(screen.CONTROL.findall(every)) == {c for c in every if unicodedata.category(c) == "Cc"}


def test_the_refusal_comes_before_anything_is_written(
    tmp_path: Path, dest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object) -> None:
        raise AssertionError("extraction started")

    monkeypatch.setattr(extract_module, "_write", never)
    # The hostile member comes last, after members that would be written first.
    archive = write_tgz(tmp_path / "bundle.tar.gz", [*entries(GOOD), entry("../x", b"x")])
    assert "points outside the bundle" in refused(archive, dest)


def test_a_tar_name_that_is_not_utf8_is_refused(tmp_path: Path, dest: Path) -> None:
    archive = write_tgz(tmp_path / "bundle.tar.gz", [*entries(GOOD), entry("Org/caf\udce9.txt", b"x")])
    assert "the member name 'Org/caf\\xe9.txt' is not valid UTF-8" in refused(archive, dest)


def test_a_zip_name_flagged_utf8_that_is_not_is_refused(tmp_path: Path, dest: Path) -> None:
    # zipfile sets the UTF-8 flag for a non-ASCII name; the bytes of 'é' are then replaced by invalid ones.
    blob = write_zip(tmp_path / "ok.zip", zip_items({**GOOD, "Org/café.txt": b"x"})).read_bytes()
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(blob.replace("café".encode(), b"caf\xff\xfe"))
    assert "is not valid UTF-8" in refused(archive, dest)


def test_an_unflagged_zip_name_that_is_not_utf8_is_refused(tmp_path: Path, dest: Path) -> None:
    blob = write_zip(tmp_path / "ok.zip", zip_items({**GOOD, "Org/cafX.txt": b"x"})).read_bytes()
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(blob.replace(b"cafX", b"caf\xe9"))  # a Latin-1 name, as old Windows tools write
    assert "the member name 'Org/caf\\xe9.txt' is not valid UTF-8" in refused(archive, dest)


@pytest.mark.parametrize("fmt", ["tgz", "zip"])
def test_a_file_given_twice_is_refused(tmp_path: Path, dest: Path, fmt: str) -> None:
    name = "Org/results/sys/bert/result_0.txt"
    if fmt == "tgz":
        archive = write_tgz(tmp_path / "bundle.tar.gz", [*entries(GOOD), entry(name, b"other")])
    else:
        archive = write_zip(tmp_path / "bundle.zip", [*zip_items(GOOD), (name, b"other")])
    assert f"'{name}' appears twice in the archive" in refused(archive, dest)


def test_a_dot_prefixed_duplicate_is_still_a_duplicate(tmp_path: Path, dest: Path) -> None:
    archive = write_tgz(tmp_path / "bundle.tar.gz", [*entries(GOOD), entry("./Org/systems/sys.json", b"{}")])
    assert "'Org/systems/sys.json' appears twice" in refused(archive, dest)


def test_a_name_used_as_file_and_folder_is_refused(tmp_path: Path, dest: Path) -> None:
    archive = write_tgz(tmp_path / "bundle.tar.gz", [entry("Org/results", b"x"), *entries(GOOD)])
    assert "'Org/results' is both a file and a folder" in refused(archive, dest)


# --- members that are not regular files -------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "fields", "fragment"),
    [
        (tarfile.SYMTYPE, {"linkname": "/etc/passwd"}, "is a symbolic link; bundles may only contain regular files"),
        (
            tarfile.LNKTYPE,
            {"linkname": "Org/systems/sys.json"},
            "is a hard link; bundles may only contain regular files",
        ),
        (tarfile.CHRTYPE, {"devmajor": 1, "devminor": 3}, "is a device file"),
        (tarfile.BLKTYPE, {"devmajor": 8, "devminor": 0}, "is a device file"),
        (tarfile.FIFOTYPE, {}, "is a FIFO (named pipe)"),
    ],
)
def test_a_tar_member_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, dest: Path, kind: bytes, fields: dict[str, object], fragment: str
) -> None:
    name = "Org/results/sys/bert/result_1.txt"
    special, _ = entry(name, kind=kind)
    for field, value in fields.items():
        setattr(special, field, value)
    archive = write_tgz(tmp_path / "bundle.tar.gz", [*entries(GOOD), (special, b"")])
    assert f"'{name}' {fragment}" in refused(archive, dest)


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        (stat.S_IFLNK | 0o777, "is a symbolic link"),
        (stat.S_IFIFO | 0o644, "is a FIFO"),
        (stat.S_IFCHR, "is a device file"),
    ],
)
def test_a_zip_entry_marked_as_a_special_file_is_refused(tmp_path: Path, dest: Path, mode: int, fragment: str) -> None:
    info = zipfile.ZipInfo("Org/results/sys/bert/result_1.txt")
    info.create_system = 3  # Unix, where the high bits of external_attr are a file mode
    info.external_attr = mode << 16
    archive = write_zip(tmp_path / "bundle.zip", [*zip_items(GOOD), (info, b"/etc/passwd")])
    assert f"'Org/results/sys/bert/result_1.txt' {fragment}" in refused(archive, dest)


# --- sizes, counts and bombs ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["tgz", "zip"])
def test_a_compression_bomb_is_refused_by_its_ratio(tmp_path: Path, dest: Path, fmt: str) -> None:
    archive = hostile(tmp_path, fmt, {"Org/README.md": bytes(4 * 2**20)})  # 4 MiB of zeros: a few KB packed
    assert "times its compressed size" in refused(archive, dest)


@pytest.mark.parametrize("fmt", ["tgz", "zip"])
def test_a_bundle_expanding_past_the_total_is_refused(tmp_path: Path, dest: Path, fmt: str) -> None:
    noise = {f"Org/benchmarks/blob_{i}.bin": os.urandom(48 * 1024) for i in range(3)}  # incompressible
    limits = Limits(max_file_bytes=64 * 1024, max_total_bytes=128 * 1024)
    assert "the bundle expands to more than 128.0 KiB" in refused(hostile(tmp_path, fmt, noise), dest, limits)


def test_a_header_declaring_gigabytes_is_refused_before_its_data_is_read(tmp_path: Path, dest: Path) -> None:
    # A tar header that claims 2 GiB followed by no data at all: only the header can have been read.
    info, _ = entry("Org/results/sys/bert/result_0.txt")
    info.size = 2 * 2**30
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(gzip.compress(info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")))
    limits = Limits(max_file_bytes=4 * 2**30)
    assert "the bundle expands to more than 1.0 GiB" in refused(archive, dest, limits)


@pytest.mark.parametrize("fmt", ["tgz", "zip"])
def test_a_single_oversize_member_is_refused(tmp_path: Path, dest: Path, fmt: str) -> None:
    archive = hostile(tmp_path, fmt, {"Org/benchmarks/weights.bin": os.urandom(5000)})
    message = refused(archive, dest, Limits(max_file_bytes=4000))
    assert "'Org/benchmarks/weights.bin' is larger than 3.9 KiB, the most one file may be" in message


@pytest.mark.parametrize("fmt", ["tgz", "zip"])
def test_too_many_members_are_refused(tmp_path: Path, dest: Path, fmt: str) -> None:
    many = {f"Org/benchmarks/src/file_{i}.py": b"pass\n" for i in range(10)}
    assert "the bundle has more than 10 members" in refused(hostile(tmp_path, fmt, many), dest, Limits(max_members=10))


def test_an_upload_over_the_bundle_limit_is_refused(tmp_path: Path, dest: Path) -> None:
    message = refused(hostile(tmp_path, "tgz", {}), dest, Limits(max_bundle_bytes=100))
    assert message.startswith("the upload is") and "a bundle may be at most 100 bytes compressed" in message


def test_an_oversized_tar_extended_header_is_refused(tmp_path: Path, dest: Path) -> None:
    # A GNU long name is read in one piece before the member is returned: 2 MiB of name would be in memory.
    archive = write_tgz(tmp_path / "bundle.tar.gz", [*entries(GOOD), entry("Org/" + "n" * 2 * 2**20, b"x")])
    assert "tar header larger than 1.0 MiB" in refused(archive, dest)


def test_a_chain_of_tar_extended_headers_is_cut_off(tmp_path: Path, dest: Path) -> None:
    # tarfile follows chained PAX headers before returning a member, reading each body whole.
    padded = tarfile.TarInfo("Org/README.md")
    padded.pax_headers = {"comment": "c" * 900_000}
    pax_only = padded.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")[: -tarfile.BLOCKSIZE]
    member = tarfile.TarInfo("Org/README.md").tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(gzip.compress(pax_only * 8 + member + bytes(2 * tarfile.BLOCKSIZE)))
    message = refused(archive, dest, Limits(max_members=10, max_total_bytes=2**20, max_ratio=1000))
    assert message.startswith("the bundle expands to more than") and "damaged or crafted" in message


def test_a_zip_header_that_understates_a_size_is_refused(tmp_path: Path, dest: Path) -> None:
    name = "Org/benchmarks/data.bin"
    blob = write_zip(tmp_path / "ok.zip", zip_items({**GOOD, name: os.urandom(100_000)})).read_bytes()
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(patch_central_entry(blob, name.encode(), 24, "<L", 10))  # uncompressed size: 10 bytes
    assert "the archive is damaged" in refused(archive, dest)


def test_data_beyond_the_declared_size_stops_the_extraction(tmp_path: Path) -> None:
    # The standard readers stop at the declared size themselves; this is the check behind them.
    class Liar:
        compressed_size = 1000

        def open(self, member: Member) -> io.BytesIO:
            return io.BytesIO(b"x" * 500)

    member = Member(name="Org/README.md", is_dir=False, size=10, ref=None)
    with pytest.raises(BundleRejected, match="holds more data than its header declares"):
        extract_module._write(Liar(), [member], tmp_path, DEFAULT)  # type: ignore[arg-type]


# --- damaged and foreign files ----------------------------------------------------------------


def test_a_truncated_tar_gz_is_refused_as_damaged(larkspur: Path, tmp_path: Path, dest: Path) -> None:
    blob = archive_folder(larkspur, tmp_path / "ok.tar.gz", top="Larkspur_Compute").read_bytes()
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(blob[: len(blob) // 2])
    assert refused(archive, dest).startswith("the archive is damaged: ")


def test_a_tar_gz_with_a_bad_gzip_checksum_is_refused_as_damaged(tmp_path: Path, dest: Path) -> None:
    # tarfile alone stops at the end-of-archive blocks and would never see the gzip trailer.
    blob = bytearray(hostile(tmp_path, "tgz", {}).read_bytes())
    blob[-8] ^= 0xFF  # the trailer: CRC-32, then the length
    archive = tmp_path / "flipped.tar.gz"
    archive.write_bytes(bytes(blob))
    assert "the archive is damaged: CRC check failed" in refused(archive, dest)


def test_a_corrupted_zip_member_is_refused_as_damaged(larkspur: Path, tmp_path: Path, dest: Path) -> None:
    blob = bytearray(archive_folder(larkspur, tmp_path / "ok.zip", top="Larkspur_Compute").read_bytes())
    middle = len(blob) // 2
    blob[middle : middle + 64] = bytes(64)
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(bytes(blob))
    assert refused(archive, dest).startswith("the archive is damaged: ")


def test_a_zip_cut_short_is_refused_as_damaged(tmp_path: Path, dest: Path) -> None:
    blob = hostile(tmp_path, "zip", {}).read_bytes()
    archive = tmp_path / "cut.zip"
    archive.write_bytes(blob[:-30])
    assert refused(archive, dest).startswith("the archive is damaged: ")


def test_gzip_that_holds_no_tar_is_refused_as_damaged(tmp_path: Path, dest: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(gzip.compress(b"just some text, not a tar archive\n" * 40))
    assert refused(archive, dest).startswith("the archive is damaged: ")


@pytest.mark.parametrize("name", ["bundle.zip", "bundle.tar.gz", "bundle.tgz"])
def test_random_bytes_are_not_an_archive(tmp_path: Path, dest: Path, name: str) -> None:
    archive = tmp_path / name
    archive.write_bytes(os.urandom(4096).replace(b"\x1f\x8b", b"..").replace(b"PK", b".."))
    assert "the upload is not a .tar.gz or .zip archive" in refused(archive, dest)


def test_an_uncompressed_tar_is_not_accepted(tmp_path: Path, dest: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w") as tar:
        for info, data in entries(GOOD):
            tar.addfile(info, io.BytesIO(data))
    assert "not a .tar.gz or .zip archive" in refused(archive, dest)


def test_an_encrypted_zip_is_refused(tmp_path: Path, dest: Path) -> None:
    name = "Org/results/sys/bert/result_0.txt"
    blob = hostile(tmp_path, "zip", {}).read_bytes()
    archive = tmp_path / "locked.zip"
    archive.write_bytes(patch_central_entry(blob, name.encode(), 8, "<H", 0x1))  # general-purpose flags
    assert f"'{name}' is encrypted; create the archive again without a password" in refused(archive, dest)


# --- layout -----------------------------------------------------------------------------------


def layout_refusal(tmp_path: Path, dest: Path, files: dict[str, bytes]) -> str:
    return refused(write_tgz(tmp_path / "bundle.tar.gz", entries(files)), dest)


def test_results_without_a_systems_folder_are_refused(tmp_path: Path, dest: Path) -> None:
    message = layout_refusal(tmp_path, dest, {"Org/results/sys/bert/result_0.txt": LOG})
    assert "'Org/' has a results/ folder but no systems/ folder" in message


def test_a_bundle_without_the_layout_is_refused(tmp_path: Path, dest: Path) -> None:
    message = layout_refusal(tmp_path, dest, {"notes/README.md": b"hello\n"})
    assert "the bundle has no systems/ and results/ folders" in message
    assert "<organization>/results/<system>/<benchmark>/result_N.txt" in message


def test_a_round_folder_is_refused_with_a_hint(tmp_path: Path, dest: Path) -> None:
    message = layout_refusal(tmp_path, dest, {f"training_results_v4.0/{k}": v for k, v in GOOD.items()})
    assert "nested too deep ('training_results_v4.0/Org/'); archive the 'Org' folder itself" in message


def test_two_submitter_folders_are_refused(tmp_path: Path, dest: Path) -> None:
    other = {k.replace("Org/", "Other/"): v for k, v in GOOD.items()}
    message = layout_refusal(tmp_path, dest, {**GOOD, **other})
    assert "the bundle holds 2 submitter folders ('Org/', 'Other/')" in message


def test_extras_beside_the_submitter_folder_are_refused(tmp_path: Path, dest: Path) -> None:
    message = layout_refusal(tmp_path, dest, {**GOOD, "README.md": b"hi\n"})
    assert "'README.md' sits next to the submitter folder 'Org/'" in message


def test_results_without_a_matching_system_json_are_refused(tmp_path: Path, dest: Path) -> None:
    message = layout_refusal(tmp_path, dest, {**GOOD, "Org/results/other/bert/result_0.txt": LOG})
    assert "'Org/results/other' has no matching 'Org/systems/other.json'" in message


def test_a_bundle_without_result_logs_is_refused(tmp_path: Path, dest: Path) -> None:
    files = {"Org/systems/sys.json": SYSTEM, "Org/results/sys/bert/notes.txt": LOG}
    assert "the bundle has no result logs" in layout_refusal(tmp_path, dest, files)


def test_a_system_json_syntax_error_names_file_and_line(tmp_path: Path, dest: Path) -> None:
    broken = b'{\n    "submitter": "Org",\n    "division" "closed"\n}\n'
    message = layout_refusal(tmp_path, dest, {**GOOD, "Org/systems/sys.json": broken})
    assert message == "Org/systems/sys.json line 3, column 16: Expecting ':' delimiter — fix the JSON and upload again"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"[1, 2]\n", "Org/systems/sys.json holds an array where a JSON object"),
        (b'{\n"submitter": "Caf\xe9"}\n', "Org/systems/sys.json line 2 is not valid UTF-8"),
        (b"\xef\xbb\xbf" + SYSTEM, "Org/systems/sys.json starts with a byte-order mark"),
    ],
)
def test_a_system_json_that_is_not_an_object_in_utf8_is_refused(
    tmp_path: Path, dest: Path, content: bytes, fragment: str
) -> None:
    assert fragment in layout_refusal(tmp_path, dest, {**GOOD, "Org/systems/sys.json": content})


def test_a_result_log_that_is_not_utf8_names_the_line(tmp_path: Path, dest: Path) -> None:
    log = LOG + b":::MLLOG garbage \xe9\xff\n"
    message = layout_refusal(tmp_path, dest, {**GOOD, "Org/results/sys/bert/result_0.txt": log})
    assert message.startswith("Org/results/sys/bert/result_0.txt line 3 is not valid UTF-8")


def test_a_destination_that_is_not_empty_is_a_caller_error(tmp_path: Path, dest: Path) -> None:
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="must be empty") as caught:
        extract_bundle(hostile(tmp_path, "tgz", {}), dest, limits=DEFAULT)
    assert not isinstance(caught.value, BundleRejected)
    assert (dest / "keep.txt").read_text() == "mine"


# --- reading one file back --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["tgz", "zip"])
@pytest.mark.parametrize("top", ["Org/", "./Org/", ""])
def test_one_file_is_read_back_wherever_the_archive_put_its_top_folder(tmp_path: Path, fmt: str, top: str) -> None:
    files = {top + name.removeprefix("Org/"): data for name, data in GOOD.items()}
    archive = write_tgz(tmp_path / "b.tgz", entries(files)) if fmt == "tgz" else write_zip(tmp_path / "b.zip",
                                                                                              zip_items(files))

    assert read_member(archive, "results/sys/bert/result_0.txt", limits=DEFAULT, max_bytes=2**20) == LOG
    assert read_member(archive, "results/sys/bert/result_1.txt", limits=DEFAULT, max_bytes=2**20) is None


@pytest.mark.parametrize("fmt", ["tgz", "zip"])
def test_a_file_read_back_is_cut_at_max_bytes_and_read_past_one_chunk(tmp_path: Path, fmt: str) -> None:
    big = random.Random(7).randbytes(3 * 2**20)  # more than one read of the tar window allows
    files = {**GOOD, "Org/results/sys/bert/result_1.txt": big}
    archive = write_tgz(tmp_path / "b.tgz", entries(files)) if fmt == "tgz" else write_zip(tmp_path / "b.zip",
                                                                                              zip_items(files))

    assert read_member(archive, "results/sys/bert/result_1.txt", limits=DEFAULT, max_bytes=len(big)) == big
    assert read_member(archive, "results/sys/bert/result_1.txt", limits=DEFAULT, max_bytes=1000) == big[:1000]


def test_reading_back_from_a_damaged_archive_is_a_refusal(tmp_path: Path) -> None:
    archive = tmp_path / "b.tgz"
    archive.write_bytes(gzip.compress(b"not a tar at all" * 100))

    with pytest.raises(BundleRejected, match="damaged"):
        read_member(archive, "results/sys/bert/result_0.txt", limits=DEFAULT, max_bytes=2**20)


# --- files chosen on the form -----------------------------------------------------------------


@pytest.fixture(scope="module")
def chosen(larkspur: Path) -> tuple[LooseFile, list[LooseFile]]:
    system = larkspur / "systems" / "atlas_lx4_n1.json"
    logs = sorted((larkspur / "results" / "atlas_lx4_n1" / "bert").glob("result_*.txt"))
    return LooseFile(system.name, system.read_bytes()), [LooseFile(p.name, p.read_bytes()) for p in logs]


def pack(
    system: LooseFile, logs: list[LooseFile], benchmark: str | None = None, org: str = "Larkspur_Compute"
) -> bytes:
    return pack_loose_files(
        organization=org, system_json=system, result_files=logs, benchmark=benchmark, limits=DEFAULT
    )


def members_of(packed: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        return {info.name: info for info in tar.getmembers()}


def test_packing_is_deterministic(chosen: tuple[LooseFile, list[LooseFile]], tmp_path: Path) -> None:
    system, logs = chosen
    first, second = tmp_path / "first.tar.gz", tmp_path / "second.tar.gz"
    first.write_bytes(pack(system, logs))
    second.write_bytes(pack(system, list(logs)))
    assert first.read_bytes() == second.read_bytes()
    assert sha256_of(first) == sha256_of(second) == hashlib.sha256(first.read_bytes()).hexdigest()


def test_packed_members_carry_no_time_owner_or_mode(chosen: tuple[LooseFile, list[LooseFile]]) -> None:
    system, logs = chosen
    packed = pack(system, logs)
    assert packed[4:8] == bytes(4)  # the gzip header's mtime
    infos = list(members_of(packed).values())
    assert [i.name for i in infos] == sorted(i.name for i in infos)
    assert {(i.mtime, i.uid, i.gid, i.mode, i.uname, i.gname) for i in infos} == {(0, 0, 0, 0o644, "", "")}


def test_the_benchmark_is_read_from_the_logs(chosen: tuple[LooseFile, list[LooseFile]]) -> None:
    system, logs = chosen
    names = set(members_of(pack(system, logs)))
    assert "Larkspur_Compute/systems/atlas_lx4_n1.json" in names
    assert {f"Larkspur_Compute/results/atlas_lx4_n1/bert/{log.name}" for log in logs} <= names


def test_a_given_benchmark_names_the_folder(chosen: tuple[LooseFile, list[LooseFile]]) -> None:
    system, logs = chosen
    assert "Larkspur_Compute/results/atlas_lx4_n1/bert_v2/result_0.txt" in members_of(pack(system, logs, "bert_v2"))


def test_logs_naming_different_benchmarks_are_refused(
    chosen: tuple[LooseFile, list[LooseFile]], larkspur: Path
) -> None:
    system, logs = chosen
    ssd = larkspur / "results" / "atlas_lx4_n1" / "ssd" / "result_0.txt"
    with pytest.raises(BundleRejected, match="the result files name different benchmarks") as caught:
        pack(system, [logs[0], LooseFile("ssd_run.txt", ssd.read_bytes())])
    assert "bert in result_0.txt; ssd in ssd_run.txt" in str(caught.value)


def test_a_log_without_a_benchmark_line_needs_the_benchmark_chosen(chosen: tuple[LooseFile, list[LooseFile]]) -> None:
    system, _ = chosen
    with pytest.raises(
        BundleRejected, match=re.escape("'run.txt' has no submission_benchmark line; choose the benchmark")
    ):
        pack(system, [LooseFile("run.txt", mllog("submission_org", "Larkspur"))])


def test_result_files_with_other_names_are_renamed_in_order(chosen: tuple[LooseFile, list[LooseFile]]) -> None:
    system, logs = chosen
    renamed = [LooseFile("first.log", logs[0].data), LooseFile("result_7.txt", logs[1].data)]
    renamed.append(LooseFile("C:\\fakepath\\third.log", logs[2].data))
    names = {n.rsplit("/", 1)[1] for n in members_of(pack(system, renamed)) if "/results/" in n}
    assert names == {"result_0.txt", "result_7.txt", "result_2.txt"}


def test_renaming_onto_a_taken_name_is_refused(chosen: tuple[LooseFile, list[LooseFile]]) -> None:
    system, logs = chosen
    clash = [LooseFile("result_1.txt", logs[0].data), LooseFile("second.log", logs[1].data)]
    with pytest.raises(BundleRejected, match=re.escape("two result files would both be stored as result_1.txt")):
        pack(system, clash)


@pytest.mark.parametrize(
    ("system_name", "fragment"),
    [("atlas.txt", "must be a .json file named after the system"), (".json", "the system name '' cannot be used")],
)
def test_a_system_file_that_cannot_name_a_system_is_refused(
    chosen: tuple[LooseFile, list[LooseFile]], system_name: str, fragment: str
) -> None:
    system, logs = chosen
    with pytest.raises(BundleRejected) as caught:
        pack(LooseFile(system_name, system.data), logs)
    assert fragment in str(caught.value)


def test_form_files_get_the_same_content_checks(chosen: tuple[LooseFile, list[LooseFile]]) -> None:
    _, logs = chosen
    with pytest.raises(BundleRejected) as caught:
        pack(LooseFile("dgx.json", b'{"a": 1,}'), logs)
    assert str(caught.value).startswith("Larkspur_Compute/systems/dgx.json line 1, column 9: ")


def test_an_unsafe_organization_is_refused(chosen: tuple[LooseFile, list[LooseFile]]) -> None:
    system, logs = chosen
    with pytest.raises(BundleRejected, match=re.escape("the organization '../x' cannot be used as a folder name")):
        pack(system, logs, org="../x")


def test_a_packed_upload_extracts_to_the_item(chosen: tuple[LooseFile, list[LooseFile]], tmp_path: Path) -> None:
    system, logs = chosen
    archive = tmp_path / "upload.tar.gz"
    archive.write_bytes(pack(system, logs))
    folder = extract_bundle(archive, tmp_path / "out", limits=DEFAULT)
    [item] = items_of(folder)
    assert (folder.name, item.system, item.benchmark) == ("Larkspur_Compute", "atlas_lx4_n1", "bert")
    assert [p.read_bytes() for p in item.result_files] == [log.data for log in logs]
