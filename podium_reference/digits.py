"""Podium's reference benchmark `podium_digits`: a small convolutional classifier trained on
scikit-learn's bundled 8×8 digits (no download) to a fixed quality target, logged through
mlperf_logging's MLLogger in the shape of an MLPerf Training closed-division result. It runs in a few
seconds on a CPU, on the GPU when there is one, so reproducing a result is real on any runner.

    python -m podium_reference.digits --config CONFIG.json --log RESULT.txt
        [--device auto|cpu|cuda] [--max-seconds N]

Podium's compliance rules for its logs: catalog/extensions/podium_digits.yaml.
Exit status: 0 when the run completed (its run_stop says success or aborted), 2 for a bad config or
command line, 1 on a crash.

Config parsing needs neither torch nor scikit-learn: both are imported only to train.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mlperf_logging.mllog import constants
from mlperf_logging.mllog.mllog import MLLogger

if TYPE_CHECKING:
    import torch

BENCHMARK = "podium_digits"
QUALITY_TARGET = 0.97  # top-1 accuracy on the held-out split; the rules file checks the same number
PROG = "python -m podium_reference.digits"

# The held-out split is the same for every run whatever its seed: results are comparable only on one
# eval set. Its seed is not the run's. The rules file pins both sizes, as MLPerf's closed rules do.
SPLIT_SEED = 2024
EVAL_SAMPLES = 360
TRAIN_SAMPLES = 1437  # 1797 digits in all

OPTIMIZERS = ("sgd", "adam")
DIVISIONS = ("closed", "open")
STATUSES = ("onprem", "cloud", "preview", "research")  # as MLPerf Training's rules list them
DEFAULT_MOMENTUM = 0.9


class ConfigError(ValueError):
    """The config cannot be run as given: the CLI exits 2 with this message."""


@dataclass(frozen=True)
class Submission:
    org: str = "Podium"
    platform: str | None = None  # None: named after the device the run uses
    division: str = "closed"
    status: str = "onprem"


@dataclass(frozen=True)
class Config:
    seed: int = 1
    global_batch_size: int = 32
    opt_name: str = "sgd"
    opt_base_learning_rate: float = 0.05
    opt_weight_decay: float = 1e-4
    opt_momentum: float | None = DEFAULT_MOMENTUM  # sgd only; None for adam
    max_epochs: int = 30
    quality_target: float = QUALITY_TARGET
    submission: Submission = field(default_factory=Submission)


_KEYS = {f.name for f in fields(Config)}
_SUBMISSION_KEYS = {f.name for f in fields(Submission)}


def _unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown key(s) in {where}: {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def _int(data: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{key} must be between {low} and {high}, not {value}")
    return value


def _float(data: dict[str, Any], key: str, default: float, ok: Callable[[float], bool], rule: str) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key} must be a number, not {value!r}")
    if not (math.isfinite(value) and ok(value)):
        raise ConfigError(f"{key} must be {rule}, not {value}")
    return float(value)


def _choice(data: dict[str, Any], key: str, default: str, choices: tuple[str, ...], where: str = "") -> str:
    value = data.get(key, default)
    if value not in choices:
        raise ConfigError(f"{where}{key} must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _text(data: dict[str, Any], key: str, default: str | None) -> str | None:
    value = data.get(key, default)
    if value is None and default is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"submission.{key} must be a non-empty string, not {value!r}")
    return value


def parse_config(data: object) -> Config:
    """A Config from the decoded JSON, or ConfigError naming the first thing wrong."""
    if not isinstance(data, dict):
        raise ConfigError(f"the config must be a JSON object, not {type(data).__name__}")
    _unknown(data, _KEYS, "the config")
    opt_name = _choice(data, "opt_name", Config.opt_name, OPTIMIZERS)
    momentum: float | None = None
    if opt_name == "sgd":
        momentum = _float(data, "opt_momentum", DEFAULT_MOMENTUM, lambda v: 0 <= v < 1, "in [0, 1)")
    elif "opt_momentum" in data:
        raise ConfigError(f"opt_momentum applies to sgd only, and opt_name is {opt_name!r}")
    raw_submission = data.get("submission", {})
    if not isinstance(raw_submission, dict):
        raise ConfigError(f"submission must be a JSON object, not {type(raw_submission).__name__}")
    _unknown(raw_submission, _SUBMISSION_KEYS, "submission")
    defaults = Submission()
    submission = Submission(
        org=_text(raw_submission, "org", defaults.org) or defaults.org,
        platform=_text(raw_submission, "platform", None),
        division=_choice(raw_submission, "division", defaults.division, DIVISIONS, "submission."),
        status=_choice(raw_submission, "status", defaults.status, STATUSES, "submission."),
    )
    return Config(
        seed=_int(data, "seed", Config.seed, 0, 2**63 - 1),
        global_batch_size=_int(data, "global_batch_size", Config.global_batch_size, 1, TRAIN_SAMPLES),
        opt_name=opt_name,
        opt_base_learning_rate=_float(
            data, "opt_base_learning_rate", Config.opt_base_learning_rate, lambda v: 0 < v <= 10, "in (0, 10]"
        ),
        opt_weight_decay=_float(data, "opt_weight_decay", Config.opt_weight_decay, lambda v: 0 <= v < 1, "in [0, 1)"),
        opt_momentum=momentum,
        max_epochs=_int(data, "max_epochs", Config.max_epochs, 1, 10_000),
        # A lower target than QUALITY_TARGET runs, and its log fails the rules' target check.
        quality_target=_float(data, "quality_target", Config.quality_target, lambda v: 0 < v <= 1, "in (0, 1]"),
        submission=submission,
    )


def load_config(path: Path) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read it: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc}") from exc
    return parse_config(data)


# --- The log -------------------------------------------------------------------------------------------------


class _RunOutput(logging.Logger):
    """mllog's logger for one run: each line goes to the run's file and to stdout at once, flushed,
    since a runner agent streams stdout back while the run goes on. Like ingest/demo/runlog.py it
    bypasses handlers, so a process that silences logging still writes a complete file, and, built
    directly, it stays out of logging's registry and leaves mllog's module-global logger alone."""

    def __init__(self, file: TextIO, echo: TextIO) -> None:
        super().__init__("podium_reference.mllog")
        self._file = file
        self._echo: TextIO | None = echo

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        # mllog turns any exception in here into an ERROR "Failed to encode" call: re-raised, with the
        # original (a full disk, say) as its context.
        if level >= logging.ERROR:
            raise RuntimeError(str(msg))
        if level != logging.INFO:
            return
        line = f"{msg}\n"
        self._file.write(line)
        self._file.flush()
        if self._echo is None:
            return
        try:
            self._echo.write(line)
            self._echo.flush()
        except OSError:  # the reader went away (a closed pipe): the file is the result, so train on
            self._stop_echo()

    def _stop_echo(self) -> None:
        echo, self._echo = self._echo, None
        if echo is sys.stdout:
            # Python's own advice for a closed stdout: point it at devnull, or the final flush at exit
            # fails again and turns a completed run's status into 120.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), echo.fileno())


class RunLog:
    """MLLOG lines for one run. Each call returns its time_ms, so the summary agrees with the log."""

    def __init__(self, file: TextIO, echo: TextIO) -> None:
        # Stack offset 2 skips these wrappers: metadata names the line of this file that logged the
        # key, as in a real training script (the MLPerf seed checker keys seeds on file and line).
        root = re.escape(str(Path(__file__).resolve().parent.parent))
        self._mllog = MLLogger(
            logger=_RunOutput(file, echo), default_namespace="", default_stack_offset=2, root_dir=root
        )

    def event(self, key: str, value: Any, **metadata: Any) -> int:
        now = _now_ms()
        self._mllog.event(key, value, metadata=metadata or None, time_ms=now)
        return now

    def start(self, key: str, **metadata: Any) -> int:
        now = _now_ms()
        self._mllog.start(key, None, metadata=metadata or None, time_ms=now)
        return now

    def end(self, key: str, **metadata: Any) -> int:
        now = _now_ms()
        self._mllog.end(key, None, metadata=metadata or None, time_ms=now)
        return now


def _now_ms() -> int:
    return int(time.time() * 1e3)


# --- Training ------------------------------------------------------------------------------------------------


class UsageError(Exception):
    """The command line asks for something this machine cannot do (CUDA without a GPU): exit 2."""


@dataclass(frozen=True)
class Outcome:
    status: str  # run_stop's: "success" or "aborted"
    accuracies: list[float]  # one per epoch
    time_to_train_s: float  # run_start to run_stop, from the log's own timestamps
    timed_out: bool


def pick_device(choice: str) -> torch.device:
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda, but torch sees no CUDA device here")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def _platform_name(device: torch.device) -> str:
    import torch

    if device.type == "cuda":
        return f"1x{torch.cuda.get_device_name(device)}"
    return f"{platform.machine() or 'unknown'} CPU ({torch.get_num_threads()} thread)"


def _build_model() -> torch.nn.Module:
    from torch import nn

    # About 10k parameters: two 3×3 convolutions, one pooling, one linear layer. Past 0.98 in a few epochs.
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 10),
    )


DATASET_FILE = "digits.csv"


def write_dataset(folder: Path) -> Path:
    """The dataset as a runner holds it: scikit-learn's digits, one image per line (64 pixels, then the
    label), so that a reproduction reads it from the folder the runner declares, as MLPerf jobs do."""
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DATASET_FILE
    path.write_text("".join(",".join(str(int(v)) for v in (*row, label)) + "\n" for row, label in zip(images, labels,
                                                                                                        strict=True)))
    return path


def _read_dataset(folder: Path) -> tuple[Any, Any]:
    import numpy as np

    rows = np.loadtxt(folder / DATASET_FILE, delimiter=",", dtype=np.int64, ndmin=2)
    if rows.shape[1] != 65:
        raise ConfigError(f"{folder / DATASET_FILE} has {rows.shape[1]} columns, not 64 pixels and a label")
    return rows[:, :64].astype(np.float64), rows[:, 64]


def _load_split(device: torch.device, data_dir: Path | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Train and eval images (N×1×8×8, scaled to [0, 1]) and labels, on the device: from the dataset folder
    when given, else from scikit-learn."""
    import numpy as np
    import torch
    from sklearn.datasets import load_digits

    images, labels = _read_dataset(data_dir) if data_dir is not None else load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(images))
    held_out, train = order[:EVAL_SAMPLES], order[EVAL_SAMPLES:]
    assert len(train) == TRAIN_SAMPLES, f"scikit-learn's digits changed size: {len(images)} images"

    def images_of(rows: np.ndarray) -> torch.Tensor:
        return torch.tensor(images[rows] / 16.0, dtype=torch.float32).view(-1, 1, 8, 8).to(device)

    def labels_of(rows: np.ndarray) -> torch.Tensor:
        return torch.tensor(labels[rows], dtype=torch.long).to(device)

    return images_of(train), labels_of(train), images_of(held_out), labels_of(held_out)


def train(config: Config, log: RunLog, device: torch.device, max_seconds: float | None,
          data_dir: Path | None = None) -> Outcome:
    """One logged run, in MLPerf's order: header, init (model build), then the timed run."""
    import sklearn.datasets  # noqa: F401 (importing takes a second, reading the data milliseconds: before the clock)
    import torch
    import torch.nn.functional as F

    # Batches of 32 tiny images cannot be split usefully across threads; on a busy 2-core machine two
    # threads made runs up to ten times slower (OpenMP workers spinning), with identical results.
    torch.set_num_threads(1)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True

    sub = config.submission
    log.event(constants.SUBMISSION_ORG, sub.org)
    log.event(constants.SUBMISSION_PLATFORM, sub.platform or _platform_name(device))
    log.event(constants.SUBMISSION_DIVISION, sub.division)
    log.event(constants.SUBMISSION_STATUS, sub.status)
    log.event(constants.SUBMISSION_BENCHMARK, BENCHMARK)
    # The data lives in scikit-learn's package and is read again in the timed region of every run:
    # there is no cache of ours to clear, but MLPerf's logs (and its rules) expect the line.
    log.event(constants.CACHE_CLEAR, True)

    log.start(constants.INIT_START)
    torch.manual_seed(config.seed)  # model init here; shuffling draws from its own generator below
    model = _build_model().to(device)
    optimizer: torch.optim.Optimizer
    if config.opt_name == "sgd":
        optimizer = torch.optim.SGD(
            model.parameters(),
            lr=config.opt_base_learning_rate,
            momentum=config.opt_momentum or 0.0,
            weight_decay=config.opt_weight_decay,
        )
    else:
        optimizer = torch.optim.Adam(
            model.parameters(), lr=config.opt_base_learning_rate, weight_decay=config.opt_weight_decay
        )
    shuffle = torch.Generator().manual_seed(config.seed)  # on the CPU: the same order on any device
    log.end(constants.INIT_STOP)

    run_start = log.start(constants.RUN_START)
    deadline = time.monotonic() + max_seconds if max_seconds is not None else math.inf
    log.event(constants.SEED, config.seed)
    log.event(constants.GLOBAL_BATCH_SIZE, config.global_batch_size)
    log.event(constants.GRADIENT_ACCUMULATION_STEPS, 1)
    log.event(constants.OPT_NAME, config.opt_name)
    log.event(constants.OPT_BASE_LR, config.opt_base_learning_rate)
    log.event(constants.OPT_WEIGHT_DECAY, config.opt_weight_decay)
    if config.opt_name == "sgd":
        log.event("opt_momentum", config.opt_momentum)
    train_x, train_y, eval_x, eval_y = _load_split(device, data_dir)
    log.event(constants.TRAIN_SAMPLES, TRAIN_SAMPLES)
    log.event(constants.EVAL_SAMPLES, EVAL_SAMPLES)

    accuracies: list[float] = []
    status, timed_out = constants.ABORTED, False
    for epoch in range(1, config.max_epochs + 1):
        log.start(constants.EPOCH_START, epoch_num=epoch)
        model.train()
        order = torch.randperm(TRAIN_SAMPLES, generator=shuffle).to(device)
        for first in range(0, TRAIN_SAMPLES, config.global_batch_size):
            rows = order[first : first + config.global_batch_size]
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(train_x[rows]), train_y[rows]).backward()
            optimizer.step()
            if time.monotonic() > deadline:
                timed_out = True
                break
        if timed_out:  # mid-epoch: no epoch_stop, as MLPerf's rules allow for a run ended early
            break
        log.end(constants.EPOCH_STOP, epoch_num=epoch)

        log.start(constants.EVAL_START, epoch_num=epoch)
        model.eval()
        with torch.no_grad():
            correct = int((model(eval_x).argmax(dim=1) == eval_y).sum().item())
        accuracy = correct / EVAL_SAMPLES
        accuracies.append(accuracy)
        log.event(constants.EVAL_ACCURACY, accuracy, epoch_num=epoch)
        log.end(constants.EVAL_STOP, epoch_num=epoch)
        if accuracy >= config.quality_target:
            status = constants.SUCCESS
            break
        if time.monotonic() > deadline:
            timed_out = True
            break

    run_stop = log.end(constants.RUN_STOP, status=status)
    return Outcome(
        status=status, accuracies=accuracies, time_to_train_s=(run_stop - run_start) / 1e3, timed_out=timed_out
    )


# --- Command line --------------------------------------------------------------------------------------------


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=f"Podium's reference benchmark {BENCHMARK}: train a small classifier on scikit-learn's "
        f"8×8 digits to {QUALITY_TARGET:.0%} eval accuracy, logging MLPerf-style (MLLOG) lines "
        "to the log file and to stdout.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        required=True,
        help="JSON: seed, global_batch_size, opt_name (sgd|adam), opt_base_learning_rate, "
        "opt_weight_decay, opt_momentum (sgd), max_epochs, quality_target, submission "
        "{org, platform, division, status}; every key optional, unknown keys rejected",
    )
    parser.add_argument("--log", type=Path, required=True, help="the result file to write (replaced)")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: the GPU when torch sees one, else the CPU (default)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"read the digits from DIR/{DATASET_FILE} (a runner's dataset folder) instead of scikit-learn",
    )
    parser.add_argument(
        "--max-seconds",
        type=_seconds,
        default=None,
        help="abort (run_stop status aborted) once the timed run has lasted this long",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"{PROG}: bad config {args.config}: {exc}", file=sys.stderr)
        return 2
    try:
        device = pick_device(args.device)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        file = args.log.open("w", encoding="utf-8")
    except OSError as exc:
        print(f"{PROG}: cannot write the log {args.log}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    with file:
        outcome = train(config, RunLog(file, sys.stdout), device, args.max_seconds, args.data_dir)
    last = f"{outcome.accuracies[-1]:.4f}" if outcome.accuracies else "none"
    why = f" (--max-seconds {args.max_seconds:g} reached)" if outcome.timed_out else ""
    print(
        f"{BENCHMARK}: {outcome.status}{why} after {len(outcome.accuracies)} epoch(s) on {device.type}, "
        f"last eval_accuracy {last}, time to train {outcome.time_to_train_s:.3f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
