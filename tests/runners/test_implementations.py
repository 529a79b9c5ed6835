"""Code in bundles: the benchmarks/ tree screened as hostile input, content-addressed, tied to results by
config_<system>.sh; and the agent's own screening of what it unpacks before any of it runs."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from ingest.bundles import BundleRejected, Limits, extract_bundle
from ingest.bundles.implementations import ImplementationLimits, pack, scan_implementations
from runner_agent.datasets import tree_digest as agent_tree_digest
from runner_agent.implementation import Code, ImplementationProblem, parse_code, unpack
from tests.people import tar_gz_of

IMPL = "benchmarks/podium_digits/implementations/pytorch"


def _org(root: Path, files: dict[str, str] | None = None) -> Path:
    """A minimal submitter folder (systems/, results/) with an implementation of `files`."""
    org = root / "Acme"
    (org / "systems").mkdir(parents=True)
    (org / "systems" / "box.json").write_text("{}")
    (org / "results" / "box" / "podium_digits").mkdir(parents=True)
    (org / "results" / "box" / "podium_digits" / "result_0.txt").write_text(":::MLLOG {}\n")
    for name, text in (files if files is not None else {"run_and_time.sh": "echo hi\n",
                                                         "config_box.sh": "export X=1\n"}).items():
        path = org / IMPL / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return org


def test_an_implementation_is_found_addressed_by_content_and_tied_to_its_systems(tmp_path) -> None:
    org = _org(tmp_path, {"run_and_time.sh": "x", "config_box.sh": "y", "config_big-box.sh": "z",
                          "sub/config_nested.sh": "not a system config: not at the top", "src/train.py": "w"})
    (trees, problems) = scan_implementations(org)
    assert problems == [] and len(trees) == 1
    tree = trees[0]
    assert (tree.benchmark, tree.name, tree.rel) == ("podium_digits", "pytorch", IMPL)
    assert tree.systems == ["big-box", "box"]
    # The digest is of names and contents only: the agent computes the same from the unpacked folder.
    assert tree.digest == agent_tree_digest(org / IMPL)
    assert pack(tree) == pack(scan_implementations(org)[0][0])  # canonical: same tree, same bytes
    (org / IMPL / "src" / "train.py").write_text("changed")
    assert scan_implementations(org)[0][0].digest != tree.digest


@pytest.mark.parametrize(("files", "limits", "problem"), [
    ({"config_box.sh": "x"}, ImplementationLimits(), "has no run_and_time.sh"),
    ({"run_and_time.sh": "x", "big.bin": "0" * 101}, ImplementationLimits(max_file_bytes=100), "at most 100 bytes"),
    ({"run_and_time.sh": "x" * 60, "b": "y" * 60}, ImplementationLimits(max_bytes=100), "is larger than 100 bytes"),
    ({"run_and_time.sh": "x", "a": "", "b": ""}, ImplementationLimits(max_files=2), "has more than 2 files"),
    ({"run_and_time.sh": "x", "a/b/c/d": ""}, ImplementationLimits(max_depth=2), "nested more than 2"),
])
def test_an_implementation_past_its_limits_is_named_and_kept_out(tmp_path, files, limits, problem) -> None:
    org = _org(tmp_path, files)
    trees, problems = scan_implementations(org, limits)
    assert trees == [] and len(problems) == 1 and problem in problems[0]


def test_links_anywhere_in_an_imported_tree_are_refused_never_followed(tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    org = _org(tmp_path)
    os.symlink(secret, org / IMPL / "data.txt")
    trees, problems = scan_implementations(org)
    assert trees == [] and "is a symbolic link" in problems[0]
    other = _org(tmp_path / "2")
    os.symlink(tmp_path, other / "benchmarks" / "podium_digits" / "implementations" / "linked")
    trees, problems = scan_implementations(other)
    assert [t.name for t in trees] == ["pytorch"] and "linked' is a symbolic link" in problems[0]
    fifo_org = _org(tmp_path / "3")
    os.mkfifo(fifo_org / IMPL / "pipe")
    assert "not a regular file" in scan_implementations(fifo_org)[1][0]


def test_badly_named_folders_are_refused(tmp_path) -> None:
    org = _org(tmp_path)
    weird = org / "benchmarks" / "podium_digits" / "implementations" / "-rf"
    weird.mkdir()
    (weird / "run_and_time.sh").write_text("x")
    assert "name benchmark and implementation folders" in scan_implementations(org)[1][0]


def test_an_upload_with_a_hostile_benchmarks_tree_is_refused_and_a_good_one_accepted(tmp_path) -> None:
    good = _org(tmp_path / "good")
    archive = tmp_path / "good.tar.gz"
    archive.write_bytes(tar_gz_of(good))
    folder = extract_bundle(archive, tmp_path / "out-good", limits=Limits())
    assert (folder / IMPL / "run_and_time.sh").is_file()

    bad = _org(tmp_path / "bad", {"config_box.sh": "no entry point"})
    archive = tmp_path / "bad.tar.gz"
    archive.write_bytes(tar_gz_of(bad))
    with pytest.raises(BundleRejected, match=r"has no run_and_time\.sh"):
        extract_bundle(archive, tmp_path / "out-bad", limits=Limits())
    assert not any((tmp_path / "out-bad").iterdir())  # nothing left behind on a refusal

    linked = tmp_path / "linked.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        tar.add(good, arcname="Acme")
        link = tarfile.TarInfo(f"Acme/{IMPL}/data")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    linked.write_bytes(raw.getvalue())
    with pytest.raises(BundleRejected, match="symbolic link"):
        extract_bundle(linked, tmp_path / "out-linked", limits=Limits())


# --- the agent's side ---------------------------------------------------------------------------------

def _code(data: bytes, digest: str, config: str = "config_box.sh") -> Code:
    return Code(id=1, path=IMPL, digest=digest, archive_sha256=hashlib.sha256(data).hexdigest(),
                system_config=config, benchmark="podium_digits", dataset_sha256=None)


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return raw.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def test_the_agent_unpacks_what_podium_packed_and_checks_it(tmp_path) -> None:
    tree = scan_implementations(_org(tmp_path))[0][0]
    data = pack(tree)
    unpack(data, _code(data, tree.digest), tmp_path / "impl")
    assert (tmp_path / "impl" / "run_and_time.sh").read_text() == "echo hi\n"
    with pytest.raises(ImplementationProblem, match="does not match the sha256"):
        unpack(data + b"x", _code(data, tree.digest), tmp_path / "other")
    with pytest.raises(ImplementationProblem, match="does not match the digest"):
        unpack(data, _code(data, "0" * 64), tmp_path / "third")
    with pytest.raises(ImplementationProblem, match=r"no config_other\.sh"):
        unpack(data, _code(data, tree.digest, "config_other.sh"), tmp_path / "fourth")


@pytest.mark.parametrize(("member", "problem"), [
    (_file("../escape.sh"), "outside its folder"),
    (_file("/etc/cron.d/x"), "outside its folder"),
    (_file("a\\..\\b"), "outside its folder"),
])
def test_the_agent_refuses_names_outside_the_folder(tmp_path, member, problem) -> None:
    data = _tar([member])
    with pytest.raises(ImplementationProblem, match=problem):
        unpack(data, _code(data, "0" * 64), tmp_path / "impl")
    assert not (tmp_path / "escape.sh").exists()


def test_the_agent_refuses_links_and_devices(tmp_path) -> None:
    link = tarfile.TarInfo("run_and_time.sh")
    link.type, link.linkname = tarfile.SYMTYPE, "/bin/sh"
    data = _tar([(link, None)])
    with pytest.raises(ImplementationProblem, match="not a regular file"):
        unpack(data, _code(data, "0" * 64), tmp_path / "impl")
    device = tarfile.TarInfo("dev")
    device.type = tarfile.CHRTYPE
    data = _tar([(device, None)])
    with pytest.raises(ImplementationProblem, match="not a regular file"):
        unpack(data, _code(data, "0" * 64), tmp_path / "impl2")


@pytest.mark.parametrize("job", [
    {"implementation": "x", "benchmark": "b"},
    {"implementation": {"system_config": "../../etc/x.sh", "digest": "0" * 64, "archive_sha256": "0" * 64},
     "benchmark": "b"},
    {"implementation": {"system_config": "config_a.sh", "digest": "nope", "archive_sha256": "0" * 64},
     "benchmark": "b"},
    {"implementation": {"system_config": "config_a.sh", "digest": "0" * 64, "archive_sha256": "0" * 64}},
])
def test_a_claim_with_an_unusable_implementation_is_a_protocol_error(job) -> None:
    with pytest.raises(ValueError):
        parse_code(job)
