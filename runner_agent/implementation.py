"""Running a submission's implementation the MLCommons way: its `run_and_time.sh`, after sourcing the
system's `config_<system>.sh`, with the dataset the runner declared and the job's hyperparameters.

The code is submitter input. The agent fetches the archive Podium stored, checks it against the
checksum the claim names, and unpacks it with its own screening (regular files only, no absolute or
`..` names, no links, bounded sizes) before anything of it runs, and runs it only where the operator
passed --run-implementations. It runs in the attempt's work dir, with the job's time limit, in the
job's minimal environment (or in a container built from its Dockerfile with --container).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from runner_agent.datasets import tree_digest

MAX_FILES = 2000
MAX_BYTES = 128 * 2**20
CONFIG_NAME = re.compile(r"^config_[^/]+\.sh$")
# Sources the system's config, then runs the entry point: `set -a` exports what the config sets.
ENTRY = 'set -a; . "./$PODIUM_SYSTEM_CONFIG"; set +a; exec bash ./run_and_time.sh'


class ImplementationProblem(ValueError):
    """The implementation cannot be run here; the message is the attempt's failure note."""


@dataclass(frozen=True)
class Code:
    id: int
    path: str
    digest: str
    archive_sha256: str
    system_config: str
    benchmark: str
    dataset_sha256: str | None  # what Podium declares for the benchmark's dataset, if it does


def parse_code(job: dict[str, Any]) -> Code | None:
    """The implementation part of a claim's job, or None for a module's job; ValueError when unusable."""
    raw = job.get("implementation")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("implementation is not an object")
    config = raw.get("system_config")
    if not isinstance(config, str) or not CONFIG_NAME.match(config):
        raise ValueError(f"system_config {config!r} is not a config_<system>.sh name")
    for key in ("digest", "archive_sha256"):
        if not isinstance(raw.get(key), str) or not re.fullmatch(r"[0-9a-f]{64}", raw[key]):
            raise ValueError(f"implementation.{key} is not a sha256")
    dataset = job.get("dataset")
    expected = dataset.get("sha256") if isinstance(dataset, dict) else None
    expected = expected if isinstance(expected, str) else None
    benchmark = job.get("benchmark")
    if not isinstance(benchmark, str) or not benchmark:
        raise ValueError("the job names no benchmark")
    return Code(id=int(raw.get("id") or 0), path=str(raw.get("path") or ""), digest=raw["digest"],
                archive_sha256=raw["archive_sha256"], system_config=config, benchmark=benchmark,
                dataset_sha256=expected)


def unpack(data: bytes, code: Code, dest: Path) -> None:
    """Check the archive against the claim and unpack it into `dest` (new); ImplementationProblem if not."""
    if hashlib.sha256(data).hexdigest() != code.archive_sha256:
        raise ImplementationProblem("the implementation archive does not match the sha256 the claim names")
    dest.mkdir(mode=0o700)
    total = count = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                name = _safe_name(member.name)
                if not member.isreg():
                    raise ImplementationProblem(f"the implementation holds {name!r}, which is not a regular file")
                count += 1
                total += member.size
                if count > MAX_FILES or total > MAX_BYTES:
                    raise ImplementationProblem("the implementation is larger than a runner unpacks")
                target = dest.joinpath(*PurePosixPath(name).parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                stream = tar.extractfile(member)
                assert stream is not None
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                with stream, os.fdopen(os.open(target, flags, 0o600), "wb") as out:
                    out.write(stream.read(member.size + 1)[: member.size])
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ImplementationProblem(f"the implementation archive cannot be unpacked: {exc}") from None
    if tree_digest(dest) != code.digest:
        raise ImplementationProblem("the unpacked implementation does not match the digest the claim names")
    if not (dest / code.system_config).is_file() or not (dest / "run_and_time.sh").is_file():
        raise ImplementationProblem(f"the implementation has no {code.system_config} beside its run_and_time.sh")


def _safe_name(name: str) -> str:
    path = PurePosixPath(name)
    if name.startswith("/") or "\\" in name or ".." in path.parts or not path.parts or "\x00" in name:
        raise ImplementationProblem(f"the implementation holds a member named {name!r}, outside its folder")
    return str(path)


def environment(base: dict[str, str], *, code: Code, data_dir: str, log_dir: str, config: str, seed: Any,
                python: str | None) -> dict[str, str]:
    """What run_and_time.sh is given beside the job's minimal environment."""
    env = {**base, "DATADIR": data_dir, "LOGDIR": log_dir, "PODIUM_CONFIG": config,
           "PODIUM_SYSTEM_CONFIG": code.system_config, "SEED": str(seed if isinstance(seed, int) else 1)}
    if python:
        env["PYTHON"] = python
    return env
