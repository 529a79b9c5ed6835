"""What each demo benchmark logs and how a run of it behaves.

Keys and constant values follow mlperf-logging's closed_<benchmark>.yaml rule files (which keys are
required, which values are fixed); quality targets are the ones their ATLEAST_ONE_CHECK tests.
Timing constants are rough public magnitudes, only meant to give believable minutes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

JSONScalar = str | int | float | bool | None
Hyperparameters = list[tuple[str, JSONScalar]]


@dataclass(frozen=True)
class Grid:
    """The progress values (epochs, samples or tokens) at which a run evaluates: first, first+period, ..."""

    first: float
    period: float
    decimals: int = 0  # 0: integral progress, logged as int

    def point(self, index: int) -> float:
        return round(self.first + index * self.period, self.decimals)

    def index_at_or_after(self, value: float) -> int:
        index = max(0, math.ceil((value - self.first) / self.period))
        while self.point(index) < value:
            index += 1
        while index > 0 and self.point(index - 1) >= value:
            index -= 1
        return index

    def as_logged(self, value: float) -> int | float:
        return int(value) if self.decimals == 0 else value


@dataclass(frozen=True)
class Benchmark:
    name: str
    progress_key: str  # metadata key that places an evaluation: "epoch_num" or "samples_count"
    target: float
    higher_is_better: bool
    start: float  # the metric before any training (the curve starts here)
    unit_seconds: float  # seconds per progress unit on 8 reference accelerators
    eval_seconds: float  # one evaluation on 8 reference accelerators
    samples_per_unit: float  # for the logged throughput
    train_samples: int | None  # logged after run_start; None: samples seen, logged at the end
    eval_samples: int
    per_epoch_lines: bool  # log epoch_start/epoch_stop for every epoch inside a block
    script: str  # the training script mllog metadata names
    grid: Callable[[int, float], Grid]  # (global batch size, fastest acceptable convergence) -> grid
    hyperparameters: Callable[[int, float], Hyperparameters]  # (global batch size, RCP mean)


def _resnet_grid(batch_size: int, floor: float) -> Grid:
    # Every 4 epochs, offset so that one evaluation falls on the first whole epoch the RCP accepts
    # (submitters tune eval_offset the same way): otherwise a 4-epoch step could straddle the window.
    first = (math.ceil(floor) - 1) % 4 + 1
    return Grid(first, 4)


def _resnet_hp(batch_size: int, mean: float) -> Hyperparameters:
    return [
        ("global_batch_size", batch_size),
        ("gradient_accumulation_steps", 1),
        ("opt_name", "lars"),
        ("lars_epsilon", 0.0),
        ("lars_opt_weight_decay", 5e-05),
        ("lars_opt_momentum", 0.9),
        ("lars_opt_base_learning_rate", round(min(29.0, 11.0 * (batch_size / 3200) ** 0.35), 2)),
        ("lars_opt_end_learning_rate", 0.0001),
        ("lars_opt_learning_rate_decay_poly_power", 2),
        ("lars_opt_learning_rate_warmup_epochs", 2 if batch_size <= 4096 else 5),
        ("lars_opt_learning_rate_decay_steps", math.ceil(mean) + 2),
    ]


def _ssd_hp(batch_size: int, mean: float) -> Hyperparameters:
    return [
        ("global_batch_size", batch_size),
        ("gradient_accumulation_steps", 1),
        ("opt_name", "adam"),
        ("opt_base_learning_rate", round(8.5e-05 * (batch_size / 256) ** 0.5, 7)),
        ("opt_weight_decay", 0.0),
        ("opt_learning_rate_warmup_epochs", 0 if batch_size <= 512 else 1),
        ("opt_learning_rate_warmup_factor", 0.001),
    ]


def _bert_grid(batch_size: int, floor: float) -> Grid:
    # The reference evaluates every 0.05 * (230.23 * batch + 3,000,000) samples, in whole steps.
    interval = 25_000 * math.ceil(0.05 * (230.23 * batch_size + 3_000_000) / 25_000)
    period = batch_size * math.ceil(interval / batch_size)
    return Grid(period, period)


def _bert_hp(batch_size: int, mean: float) -> Hyperparameters:
    return [
        ("global_batch_size", batch_size),
        ("gradient_accumulation_steps", 1),
        ("max_predictions_per_seq", 76),
        ("opt_learning_rate_training_steps", math.ceil(1.3 * mean / batch_size)),
        ("num_warmup_steps", 0),
        ("start_warmup_step", 0),
        ("opt_base_learning_rate", round(0.00096 * (batch_size / 576) ** 0.5, 6)),
        ("opt_lamb_epsilon", 1e-06),
        ("opt_lamb_beta_1", 0.71),
        ("opt_lamb_beta_2", 0.88),
        ("opt_lamb_weight_decay_rate", 0.1),
        ("opt_learning_rate_warmup_steps", 0),
    ]


_GPT3_EVAL_TOKENS = 24_576 * 2_048  # evaluate every 24,576 sequences of 2,048 tokens


def _gpt3_hp(batch_size: int, mean: float) -> Hyperparameters:
    scale = 1536 / batch_size
    return [
        ("global_batch_size", batch_size),
        ("max_sequence_length", 2048),
        ("gradient_accumulation_steps", 1),
        ("opt_name", "adam"),
        ("opt_base_learning_rate", 2e-05 if batch_size <= 2048 else 3e-05),
        ("opt_end_learning_rate", 2e-06),
        ("opt_learning_rate_decay_steps", int(108_334 * scale)),
        ("opt_learning_rate_warmup_steps", int(265 * scale)),
        ("opt_learning_rate_decay_schedule", "cosine with linear warmup"),
        ("opt_adam_beta_1", 0.9),
        ("opt_adam_beta_2", 0.95),
        ("opt_adam_epsilon", 1e-08),
        ("opt_gradient_clip_norm", 1.0),
        ("init_checkpoint_step", int(4000 * scale)),
    ]


def _gnn_hp(batch_size: int, mean: float) -> Hyperparameters:
    return [
        ("global_batch_size", batch_size),
        ("gradient_accumulation_steps", 1),
        ("opt_name", "adam"),
        ("opt_base_learning_rate", 0.001 if batch_size <= 4096 else 0.002),
    ]


def _llama_hp(batch_size: int, mean: float) -> Hyperparameters:
    return [
        ("global_batch_size", batch_size),
        ("gradient_accumulation_steps", max(1, 16 // batch_size)),
        ("opt_base_learning_rate", 0.0004 if batch_size <= 8 else 0.0005),
        ("opt_adamw_weight_decay", 0.0001),
        ("opt_gradient_clip_norm", 0.3),
        ("opt_learning_rate_training_steps", math.ceil(1.25 * mean / batch_size)),
        ("opt_learning_rate_warmup_factor", 0.0),
        ("lora_rank", 16),
        ("lora_alpha", 32),
    ]


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            name="resnet",
            progress_key="epoch_num",
            target=0.759,
            higher_is_better=True,
            start=0.08,
            unit_seconds=23.0,
            eval_seconds=2.5,
            samples_per_unit=1_281_167,
            train_samples=1_281_167,
            eval_samples=50_000,
            per_epoch_lines=True,
            script="/workspace/image_classification/train.py",
            grid=_resnet_grid,
            hyperparameters=_resnet_hp,
        ),
        Benchmark(
            name="ssd",
            progress_key="epoch_num",
            target=0.340,
            higher_is_better=True,
            start=0.12,
            unit_seconds=440.0,
            eval_seconds=25.0,
            samples_per_unit=1_170_301,
            train_samples=1_170_301,
            eval_samples=24_781,
            per_epoch_lines=True,
            script="/workspace/single_stage_detector/train.py",
            grid=lambda batch_size, floor: Grid(1, 1),
            hyperparameters=_ssd_hp,
        ),
        Benchmark(
            name="bert",
            progress_key="epoch_num",
            target=0.720,
            higher_is_better=True,
            start=0.30,
            unit_seconds=1.35e-4,
            eval_seconds=2.5,
            samples_per_unit=1,
            train_samples=None,
            eval_samples=10_000,
            per_epoch_lines=False,
            script="/workspace/bert/run_pretraining.py",
            grid=_bert_grid,
            hyperparameters=_bert_hp,
        ),
        Benchmark(
            name="gpt3",
            progress_key="epoch_num",
            target=2.69,
            higher_is_better=False,
            start=2.80,
            unit_seconds=1.45e-4,
            eval_seconds=40.0,
            samples_per_unit=1 / 2048,
            train_samples=None,
            eval_samples=24_567,
            per_epoch_lines=False,
            script="/workspace/llm/pretrain_gpt.py",
            grid=lambda batch_size, floor: Grid(_GPT3_EVAL_TOKENS, _GPT3_EVAL_TOKENS),
            hyperparameters=_gpt3_hp,
        ),
        Benchmark(
            name="gnn",
            progress_key="epoch_num",
            target=0.72,
            higher_is_better=True,
            start=0.66,
            unit_seconds=700.0,
            eval_seconds=4.0,
            samples_per_unit=157_000_000,
            train_samples=157_000_000,
            eval_samples=788_379,
            per_epoch_lines=False,
            script="/workspace/gnn/train_rgat.py",
            grid=lambda batch_size, floor: Grid(0.05, 0.05, decimals=2),
            hyperparameters=_gnn_hp,
        ),
        Benchmark(
            name="llama2_70b_lora",
            progress_key="samples_count",
            target=0.925,
            higher_is_better=False,
            start=0.96,
            unit_seconds=0.52,
            eval_seconds=35.0,
            samples_per_unit=1,
            train_samples=3_901,
            eval_samples=173,
            per_epoch_lines=False,
            script="/workspace/ft-llm/train.py",
            grid=lambda batch_size, floor: Grid(1536, 384),
            hyperparameters=_llama_hp,
        ),
    )
}
