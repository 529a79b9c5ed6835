"""Arguments and exit statuses of `python -m runner_agent`."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from runner_agent import leftovers
from runner_agent.agent import Agent
from runner_agent.client import AgentError, Client, Clock, server_base
from runner_agent.container import Container, NoEngine, find_engine
from runner_agent.datasets import Dataset, DatasetError, check_present, parse_declaration
from runner_agent.hardware import detect
from runner_agent.settings import DEFAULT_MODULE, MODULE_NAME, Settings, Timing

TOKEN_ENV = "PODIUM_RUNNER_TOKEN"
DEFAULT_WORK_DIR = Path("~/.cache/podium-runner")

EPILOG = f"""\
The agent claims reproduction jobs from the Podium server and runs each as
`python -m MODULE --config CONFIG.json --log LOG` in a fresh work dir under --work-dir, with only
the GPUs the server assigned (CUDA_VISIBLE_DEVICES) and a minimal environment, or with --container
in a container of that image (work dir mounted, assigned GPUs only, no network). It heartbeats while
the job runs, stops it at its time limit or when cancelled, uploads its log and reports the outcome.
A lost server is retried with backoff; SIGINT or SIGTERM stops the running jobs and the agent (the
server re-queues them when their leases run out). An agent killed outright takes its jobs' main
processes with it (Linux); the next agent on the same --work-dir kills what they started, removes
their containers and work dirs.

exit status:
  0  stopped by SIGINT/SIGTERM, or --once done (one job reported, or nothing to do)
  2  usage error, the server refused this runner (token, address, protocol), or another agent
     runs on the same --work-dir

environment:
  {TOKEN_ENV}  the runner token, if --token is not given
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _module(text: str) -> str:
    if not MODULE_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python module name")
    return text


def _dataset(text: str) -> Dataset:
    try:
        return parse_declaration(text)
    except DatasetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m runner_agent",
        description="Run Podium reproduction jobs on this host's GPUs (or CPUs).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--server", required=True, metavar="URL", help="the Podium server, e.g. https://podium.example")
    parser.add_argument("--token", metavar="TOKEN",
                        help=f"runner token (default: ${TOKEN_ENV}, which is better: a command line is visible to "
                             "other users of the machine)")
    parser.add_argument("--name", metavar="NAME",
                        help="a name for this runner, shown in the agent's log and sent with each claim for the "
                             "server's records; the server knows the runner by its token (default: the host name)")
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR, metavar="DIR",
                        help=f"where each attempt gets its own folder, removed once reported (default: "
                             f"{DEFAULT_WORK_DIR})")
    parser.add_argument("--max-jobs", type=_positive_int, metavar="N",
                        help="jobs run at once (default: one per GPU, or 1 without a GPU)")
    parser.add_argument("--allow-module", action="append", type=_module, dest="modules", metavar="MODULE",
                        help=f"a Python module jobs may run; repeat for several (default: {DEFAULT_MODULE})")
    parser.add_argument("--container", metavar="IMAGE",
                        help="run each job in a container of IMAGE (Docker or Podman), which must hold the job "
                             "modules; the job gets its work dir, its GPUs and no network")
    parser.add_argument("--container-engine", default="auto", metavar="ENGINE",
                        help="docker, podman, a path to either, or auto (the default: Docker, else Podman)")
    parser.add_argument("--container-network", default="none", metavar="NETWORK",
                        help="the container's network (default: none)")
    parser.add_argument("--run-implementations", action="store_true",
                        help="also run the code submissions ship (their run_and_time.sh): untrusted code, so only on "
                             "a host that holds nothing else of value, preferably with --container")
    parser.add_argument("--dataset", action="append", type=_dataset, dest="datasets", default=[],
                        metavar="BENCHMARK=PATH[,sha256=HEX]",
                        help="a benchmark's dataset on this host, and its checksum (python -m runner_agent.datasets "
                             "PATH prints it); repeat for several. Jobs of benchmarks without one never come here")
    parser.add_argument("--once", action="store_true",
                        help="claim one job, run and report it, wait for its verdict, then exit (at once if there is "
                             "nothing to do)")
    return parser


def main(argv: Sequence[str] | None = None, *, clock: Clock | None = None, timing: Timing | None = None,
         stop: threading.Event | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    log = logging.getLogger("runner_agent")
    token = args.token or os.environ.get(TOKEN_ENV, "")
    if not token:
        log.error("no runner token: set %s (or pass --token)", TOKEN_ENV)
        return 2
    try:
        server = server_base(args.server)
        work_dir = args.work_dir.expanduser().resolve()
        work_dir.mkdir(parents=True, exist_ok=True)
        container = None if args.container is None else Container(
            find_engine(args.container_engine), args.container, network=args.container_network)
        for dataset in args.datasets:
            check_present(dataset)
        work_dir_lock = leftovers.lock(work_dir)
    except (AgentError, OSError, NoEngine, leftovers.WorkDirTaken, DatasetError) as exc:
        log.error("%s", exc)
        return 2
    try:  # the lock is held until the agent ends: the kernel lets go of it if the agent is killed
        if container is not None:
            log.info("jobs run in containers of %s (%s, network %s)", container.image, container.engine,
                     container.network)
        leftovers.clean_up(work_dir, container.engine if container else None)
        return _serve(args, server, token, work_dir, container, clock=clock, timing=timing, stop=stop)
    finally:
        os.close(work_dir_lock)


def _serve(args: argparse.Namespace, server: str, token: str, work_dir: Path, container: Container | None, *,
           clock: Clock | None, timing: Timing | None, stop: threading.Event | None) -> int:
    log = logging.getLogger("runner_agent")
    host = detect()
    timing = timing or Timing()
    clock = clock or Clock()
    stop = stop or threading.Event()
    settings = Settings(name=args.name or socket.gethostname(), work_dir=work_dir,
                        max_jobs=args.max_jobs or max(1, host.accelerators.count),
                        allowed_modules=frozenset(args.modules or [DEFAULT_MODULE]), once=args.once, timing=timing,
                        container=container, datasets={d.benchmark: d for d in args.datasets},
                        run_implementations=args.run_implementations)
    client = Client(server, token, clock=clock, stop=stop, retry_first_s=timing.retry_first_s,
                    retry_max_s=timing.retry_max_s, timeout_s=timing.request_timeout_s)
    agent = Agent(settings, host, client, clock=clock, stop=stop)

    if threading.current_thread() is not threading.main_thread():
        return agent.run()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return agent.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
