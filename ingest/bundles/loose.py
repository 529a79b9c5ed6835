"""Files chosen one by one on the upload form, packed into the same canonical bundle an archive gives."""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ingest.bundles.layout import RESULT_NAME, check_log_text, check_system_json
from ingest.bundles.limits import BundleRejected, Limits, check_expanded_size, check_file_size, human_size, shown
from ingest.bundles.screen import CONTROL, too_many_members
from ingest.engine.logparse import parse_log


@dataclass(frozen=True)
class LooseFile:
    name: str  # as the browser gave it
    data: bytes


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def pack_loose_files(
    *,
    organization: str,
    system_json: LooseFile,
    result_files: list[LooseFile],
    benchmark: str | None,
    limits: Limits,
) -> bytes:
    """A deterministic .tar.gz of `<organization>/systems/<system>.json` and the result logs.

    The same inputs give the same bytes, so an identical re-upload has the same hash. The system
    is named after the JSON file; the benchmark, when not given, after the logs' submission_benchmark.
    """
    org = _folder_name(organization, "the organization")
    system = _system_name(system_json.name)
    if not result_files:
        raise BundleRejected("choose at least one result file (result_0.txt, result_1.txt, ...)")
    if 1 + len(result_files) > limits.max_members:
        raise too_many_members(limits)
    for chosen in (system_json, *result_files):
        check_file_size(_basename(chosen.name), len(chosen.data), limits)
    names = _result_names(result_files)
    bench = _folder_name(benchmark, "the benchmark") if benchmark is not None else _infer_benchmark(result_files)

    system_rel = f"{org}/systems/{system}.json"
    check_system_json(system_rel, system_json.data, limits.max_system_json_bytes)
    members = {system_rel: system_json.data}
    for name, chosen in zip(names, result_files, strict=True):
        rel = f"{org}/results/{system}/{bench}/{name}"
        check_log_text(rel, io.BytesIO(chosen.data), limits.max_line_bytes)
        members[rel] = chosen.data

    packed = canonical_tar_gz(members)
    if len(packed) > limits.max_bundle_bytes:
        raise BundleRejected(
            f"the chosen files compress to {human_size(len(packed))}; a bundle may be at most "
            f"{human_size(limits.max_bundle_bytes)} compressed"
        )
    check_expanded_size(sum(len(data) for data in members.values()), len(packed), limits)
    return packed


def canonical_tar_gz(members: Mapping[str, bytes | Path]) -> bytes:
    """A .tar.gz of `members` (name: bytes, or the file holding them), the same bytes for the same files.

    Regular files only, sorted by name, with times, owners and modes fixed and no name or time in the
    gzip header: the server's packing of loose uploads and the CLI's packing of a folder give the same
    sha256 for the same files, so an upload sent again is recognized as already uploaded.
    """
    buffer = io.BytesIO()
    # filename="" and mtime=0 keep the upload's name and the clock out of the gzip header.
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar,
    ):
        for name in sorted(members):
            source = members[name]
            info = tarfile.TarInfo(name)
            info.size = source.stat().st_size if isinstance(source, Path) else len(source)
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with source.open("rb") if isinstance(source, Path) else io.BytesIO(source) as stream:
                tar.addfile(info, stream)
    return buffer.getvalue()


def _basename(browser_name: str) -> str:
    # Old browsers send a full Windows path ('C:\fakepath\dgx.json'); only the last part is the name.
    return re.split(r"[\\/]", browser_name)[-1]


def _folder_name(value: str, what: str) -> str:
    problem = ""
    if not value.strip():
        problem = "is empty"
    elif value != value.strip():
        problem = "starts or ends with spaces"
    elif value.startswith("."):
        problem = "starts with a dot"
    elif "/" in value or "\\" in value:
        problem = "contains a slash"
    elif CONTROL.search(value):
        problem = "contains control characters"
    elif len(value.encode("utf-8", "surrogatepass")) > 255:
        problem = "is longer than 255 bytes"
    if problem:
        raise BundleRejected(f"{what} {shown(value)} cannot be used as a folder name: it {problem}")
    return value


def _system_name(browser_name: str) -> str:
    name = _basename(browser_name)
    if not name.lower().endswith(".json"):
        raise BundleRejected(
            f"the system description {shown(name)} must be a .json file named after the system, e.g. dgx_h100.json"
        )
    return _folder_name(name[: -len(".json")], "the system name")


def _result_names(result_files: list[LooseFile]) -> list[str]:
    names = []
    for index, chosen in enumerate(result_files):
        name = _basename(chosen.name)
        names.append(_folder_name(name, "the result file") if RESULT_NAME.match(name) else f"result_{index}.txt")
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        raise BundleRejected(
            f"two result files would both be stored as {repeated[0]}; rename one (result_0.txt, result_1.txt, "
            "...) and upload again"
        )
    return names


def _infer_benchmark(result_files: list[LooseFile]) -> str:
    found: dict[str, list[str]] = {}
    for chosen in result_files:
        name = _basename(chosen.name)
        value = parse_log(chosen.data, name).first_value("submission_benchmark")
        if not isinstance(value, str) or not value.strip():
            raise BundleRejected(
                f"{shown(name)} has no submission_benchmark line; choose the benchmark on the form and upload again"
            )
        found.setdefault(value, []).append(name)
    if len(found) > 1:
        listing = "; ".join(f"{bench} in {', '.join(names)}" for bench, names in sorted(found.items()))
        raise BundleRejected(f"the result files name different benchmarks ({listing}); upload one benchmark at a time")
    return _folder_name(next(iter(found)), "the benchmark")
