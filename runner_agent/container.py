"""Running a job inside a container, where the host has Docker or Podman and the operator names an image.

The job sees its own work dir (mounted at /podium-job), the GPUs it was assigned and no network: the
image must hold the job's code and data. The container runs as the agent's user, so what the job
writes stays removable by the agent. The engine's client is the job's process: the agent's SIGTERM
reaches the container through the client's signal proxy, and `remove` makes sure it is gone after a
SIGKILL of the client, which the container would otherwise outlive.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ENGINES = ("docker", "podman")
MOUNT = "/podium-job"
REMOVE_TIMEOUT_S = 30.0

log = logging.getLogger("runner_agent")


class NoEngine(LookupError):
    """No container engine is installed where the operator asked for containers."""


@dataclass(frozen=True)
class Container:
    engine: str  # the engine's executable
    image: str
    network: str = "none"

    @property
    def kind(self) -> str:
        return "podman" if Path(self.engine).name.startswith("podman") else "docker"

    def argv(self, *, name: str, module: str, work_dir: Path, config: Path, log_file: Path,
             indexes: tuple[int, ...]) -> list[str]:
        """`engine run` for one attempt; `config` and `log_file` lie in `work_dir`."""
        uid_gid = f"{os.getuid()}:{os.getgid()}" if hasattr(os, "getuid") else None
        argv = [self.engine, "run", "--rm", "--init", "--name", name, f"--network={self.network}",
                "--volume", f"{work_dir}:{MOUNT}:rw", "--workdir", MOUNT,
                "--env", f"HOME={MOUNT}", "--env", "PYTHONUNBUFFERED=1"]
        if uid_gid:
            argv += ["--user", uid_gid]
        if indexes:
            # Inside, the assigned GPUs are numbered from 0: no CUDA_VISIBLE_DEVICES of the host's numbers.
            listed = ",".join(str(i) for i in indexes)
            if self.kind == "podman":
                for index in indexes:
                    argv += ["--device", f"nvidia.com/gpu={index}"]
            else:
                argv += ["--gpus", f'"device={listed}"']  # quoted: docker reads the value as CSV
        return [*argv, self.image, "python", "-m", module, "--config", f"{MOUNT}/{config.relative_to(work_dir)}",
                "--log", f"{MOUNT}/{log_file.relative_to(work_dir)}"]

    def remove(self, name: str) -> None:
        """Force the container away (it may be gone already: `--rm`)."""
        remove_container(self.engine, name)


def remove_container(engine: str, name: str) -> None:
    """`engine rm --force name`; a container that is gone already is no problem."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run([engine, "rm", "--force", name], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=REMOVE_TIMEOUT_S, check=False)
        if done.returncode != 0 and b"no such container" not in done.stderr.lower():
            log.warning("%s rm --force %s: %s", engine, name, done.stderr.decode(errors="replace").strip())


def find_engine(wanted: str) -> str:
    """The engine's path: `wanted` is "auto" (Docker, else Podman), "docker", "podman" or a path."""
    names = ENGINES if wanted == "auto" else (wanted,)
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise NoEngine(f"no container engine found on PATH (looked for {', '.join(names)})")


DATA_MOUNT = "/data"


def implementation_argv(container: Container, *, name: str, work_dir: Path, impl_dir: Path, dataset: Path,
                        env: dict[str, str], indexes: tuple[int, ...], entry: str) -> list[str]:
    """Build the implementation's image from its Dockerfile (if it has one; else the operator's image) and
    run its entry point in it: the work dir mounted, the dataset read-only at /data, the assigned GPUs,
    the operator's network. One process for both, so the time limit and a cancel cover the build too."""
    tag = f"podium-impl-{name.removeprefix('podium-job-')}"
    base = container.argv(name=name, module="x", work_dir=work_dir, config=work_dir, log_file=work_dir,
                          indexes=indexes)
    run = base[1:base.index(container.image)]  # the options of `run`, without the module's command line
    inside = {**env, "DATADIR": DATA_MOUNT, "LOGDIR": f"{MOUNT}/logs", "PODIUM_CONFIG": f"{MOUNT}/config.json"}
    options = ["--volume", f"{dataset}:{DATA_MOUNT}:ro", "--workdir", f"{MOUNT}/{impl_dir.relative_to(work_dir)}"]
    for key in ("DATADIR", "LOGDIR", "PODIUM_CONFIG", "PODIUM_SYSTEM_CONFIG", "SEED"):
        options += ["--env", f"{key}={inside[key]}"]
    workdir_at = run.index("--workdir")
    run = run[:workdir_at] + run[workdir_at + 2:]
    if (impl_dir / "Dockerfile").is_file():
        script = 'e=$1; t=$2; d=$3; shift 3; "$e" build --tag "$t" "$d" && exec "$e" "$@"'
        return ["/bin/sh", "-c", script, "sh", container.engine, tag, str(impl_dir), *run, *options, tag,
                "bash", "-c", entry]
    return [container.engine, *run, *options, container.image, "bash", "-c", entry]
