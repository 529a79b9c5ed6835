"""The reference benchmark in the demo without training it: `podium_digits` result files in the shape
podium_reference/digits.py logs them (same keys, order and metadata), with the MLCommons-layout implementation
that trains it for real (podium_reference/implementation.py) shipped beside them.

`make run` installs no torch, so the demo cannot train the runs; it writes what a CPU run logs, epochs of
~0.1 s converging past the quality target, each run from its own seed. A runner that reproduces the result
runs the shipped `run_and_time.sh` and trains for real.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

from ingest.demo.benchmarks import Hyperparameters
from ingest.demo.runlog import _Writer

# The demo borrows the reference benchmark's constants and its implementation writer, which need no torch
# (digits imports it inside train()); tests/ingest/test_demo.py checks that with torch blocked.
from podium_reference import bundle, digits, implementation

SCRIPT = "podium_reference/digits.py"  # as the real runs' metadata names it (relative to the repository)
RUNS = 5  # catalog/extensions: five runs, as for MLPerf's vision benchmarks


def write_digits(dest: Path, *, org: str, logged_org: str, system: str, seed: int = 2024) -> Path:
    """`dest/<org>/` with the system description, five result files and the implementation with its
    config_<system>.sh; the same seed gives the same bytes. Returns that folder."""
    folder = dest / org
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "systems").mkdir(parents=True)
    (folder / "systems" / f"{system}.json").write_text(
        json.dumps(bundle.system_description(submitter=logged_org, system_name=system), indent=1)
    )
    implementation.write_implementation(folder, systems=[system])
    results = folder / "results" / system / digits.BENCHMARK
    results.mkdir(parents=True)
    rng = random.Random(f"{seed}/{org}/{system}/{digits.BENCHMARK}")
    t = 1_717_000_000_000 + rng.randint(0, 86_400_000)  # June 2024, like the round's logs
    for index, run_seed in enumerate(rng.sample(range(1, 2**31), RUNS)):
        text, t = _run(digits, digits.Config(seed=run_seed), logged_org, system, t, rng)
        (results / f"result_{index}.txt").write_text(text, encoding="utf-8")
        t += rng.randint(2_000, 10_000)  # the next run_and_time.sh
    return folder


def _run(digits: Any, config: Any, org: str, system: str, t: int, rng: random.Random) -> tuple[str, int]:
    """One run's log, the lines of podium_reference.digits.train in its order, and its last time."""
    w = _Writer(SCRIPT)
    header: Hyperparameters = [
        ("submission_org", org),
        ("submission_platform", system),
        ("submission_division", "closed"),
        ("submission_status", "onprem"),
        ("submission_benchmark", digits.BENCHMARK),
        ("cache_clear", True),
    ]
    for key, value in header:
        w.event(key, value, t)
    w.start("init_start", t)
    t += rng.randint(3, 12)
    w.end("init_stop", t)
    w.start("run_start", t)
    hyperparameters: Hyperparameters = [
        ("seed", config.seed),
        ("global_batch_size", config.global_batch_size),
        ("gradient_accumulation_steps", 1),
        ("opt_name", config.opt_name),
        ("opt_base_learning_rate", config.opt_base_learning_rate),
        ("opt_weight_decay", config.opt_weight_decay),
        ("opt_momentum", digits.DEFAULT_MOMENTUM),
    ]
    for key, value in hyperparameters:
        w.event(key, value, t)
    t += rng.randint(5, 20)  # the split is read inside the timed region
    w.event("train_samples", digits.TRAIN_SAMPLES, t)
    w.event("eval_samples", digits.EVAL_SAMPLES, t)
    epochs = rng.choice((4, 5, 5, 6, 7))
    accuracy = rng.uniform(0.78, 0.86)
    for epoch in range(1, epochs + 1):
        w.start("epoch_start", t, {"epoch_num": epoch})
        t += round(rng.gauss(95, 8))
        w.end("epoch_stop", t, {"epoch_num": epoch})
        w.start("eval_start", t, {"epoch_num": epoch})
        t += rng.randint(2, 5)
        # Correct answers out of the 360 held out: below the target until the last epoch, past it there.
        accuracy += (1 - accuracy) * rng.uniform(0.35, 0.6)
        correct, target = round(accuracy * digits.EVAL_SAMPLES), math.ceil(digits.QUALITY_TARGET * digits.EVAL_SAMPLES)
        if epoch == epochs:
            correct = max(correct, target + rng.randint(0, 5))
        else:
            correct = min(correct, target - rng.randint(1, 4))
        w.event("eval_accuracy", correct / digits.EVAL_SAMPLES, t, {"epoch_num": epoch})
        w.end("eval_stop", t, {"epoch_num": epoch})
    w.end("run_stop", t, {"status": "success"})
    return w.text(), t
