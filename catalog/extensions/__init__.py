"""Benchmarks of Podium's own, judged like MLPerf ones.

The reference benchmark `podium_digits` (podium_reference/) lets reproduction run anywhere. No MLPerf
ruleset lists it, so Podium brings its compliance rules as a self-contained YAML file in the
mlperf-logging format; the library's own checker evaluates them (its engine, Podium's rules), and
its log parser is the one of the ruleset the round names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Extension:
    key: str
    rules: Path
    required_runs: int
    olympic_k: int
    name: str
    area: str
    task: str
    model: str
    dataset: str
    quality_metric: str
    quality_target: float
    target_text: str
    modifiable_hyperparameters: tuple[str, ...]
    # The module a runner agent executes to reproduce a result (see runner_agent's allow-list).
    module: str
    # The shortest plausible time to train; MLPerf benchmarks get the engine's one second.
    min_time_to_train_s: float


EXTENSIONS = {
    # Five runs, as for MLPerf's vision benchmarks.
    "podium_digits": Extension(
        key="podium_digits", rules=HERE / "podium_digits.yaml", required_runs=5, olympic_k=1,
        name="Digits (reference)", area="Vision", task="Image classification (reference benchmark)",
        model="Small PyTorch classifier", dataset="scikit-learn digits (8×8)", quality_metric="Top-1 accuracy",
        quality_target=0.97, target_text="97% top-1 accuracy on the held-out split",
        modifiable_hyperparameters=("global_batch_size", "opt_base_learning_rate", "opt_weight_decay",
                                    "opt_momentum", "opt_name"),
        module="podium_reference.digits",
        # A CPU trains it to the target in 0.2-0.9 s and a GPU faster; a run needs at least 3 epochs of
        # 1,437 images, which no machine does in under 10 ms.
        min_time_to_train_s=0.01,
    ),
}


def extension(benchmark: str) -> Extension | None:
    return EXTENSIONS.get(benchmark)
