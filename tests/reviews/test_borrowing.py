"""Hyperparameter borrowing, on real v4.0 results and on hand-made entries.

The corpus pairs (training_results_v4.0, ruleset 4.0.0), first run of each:
- llama2_70b_lora: Red_Hat AS-8125GS-TNHR-RHEL9.4 borrows from NVIDIA eos_ngc24.04_nemo. They differ in
  opt_base_learning_rate (0.0004 vs 0.0005) and opt_learning_rate_training_steps (1024 vs 896); both log
  global_batch_size 8 and gradient_accumulation_steps 4. Red_Hat and Intel-HabanaLabs HLS-Gaudi2-PT differ only
  in gradient_accumulation_steps (4 vs 1), a batch key, so borrowing between them would change nothing the rule
  checks: Intel-HabanaLabs serves instead as a borrower from NVIDIA that keeps its own gradient accumulation.
- bert: Dell XE8640x4H100-SXM-80GB borrows from NVIDIA eos_ngc23.04_pytorch. They differ in
  opt_learning_rate_training_steps (4500.0 vs 3680.0) and global_batch_size (576 vs 768), which Dell keeps.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from catalog.catalog_data import load_catalog
from ingest.engine.findings import Finding
from ingest.engine.logparse import TOKEN
from ingest.engine.tree import items_of
from ingest.engine.verify import ItemReport, verify_item
from reviews.borrowing import (
    BATCH_KEYS,
    DiffRow,
    Entry,
    check_borrowing,
    hyperparameter_diff,
    values_equal,
)
from tests.mllog_edit import rewrite_log as _rewrite_log

ROUND = "training_results_v4.0"
RULESET = "4.0.0"
_TOKEN = TOKEN.encode()


@dataclass(frozen=True)
class Side:
    org: str
    system: str
    benchmark: str

    def label(self, version: str) -> str:
        return f"{self.org}/{self.system} {self.benchmark} ({version})"


RED_HAT_LORA = Side("Red_Hat", "AS-8125GS-TNHR-RHEL9.4", "llama2_70b_lora")
NVIDIA_LORA = Side("NVIDIA", "eos_ngc24.04_nemo", "llama2_70b_lora")
INTEL_LORA = Side("Intel-HabanaLabs", "HLS-Gaudi2-PT", "llama2_70b_lora")
DELL_BERT = Side("Dell", "XE8640x4H100-SXM-80GB", "bert")
NVIDIA_BERT = Side("NVIDIA", "eos_ngc23.04_pytorch", "bert")


Published = Callable[[Side], Entry]
Resubmit = Callable[..., Entry]
Modifiable = dict[str, tuple[str, ...]]


def _copy_item(corpus_dir: Path, side: Side, dest: Path) -> Path:
    """The item's system description and result folder, copied: the corpus is never written to."""
    org_dir = dest / side.org
    (org_dir / "systems").mkdir(parents=True)
    shutil.copyfile(corpus_dir / ROUND / side.org / "systems" / f"{side.system}.json",
                    org_dir / "systems" / f"{side.system}.json")
    shutil.copytree(corpus_dir / ROUND / side.org / "results" / side.system / side.benchmark,
                    org_dir / "results" / side.system / side.benchmark)
    return org_dir


def entry_from_report(report: ItemReport, label: str) -> Entry:
    return Entry(
        label=label,
        system_sha256=report.system_facts.sha256,
        runs=tuple((run.file, dict(run.hyperparameters)) for run in report.runs),
        system_file=report.system_facts.file,
    )


def _entry(org_dir: Path, side: Side, version: str) -> Entry:
    (item,) = [i for i in items_of(org_dir) if i.benchmark == side.benchmark]
    return entry_from_report(verify_item(item, RULESET), side.label(version))


@pytest.fixture(scope="module")
def modifiable() -> Modifiable:
    (benchmarks,) = [infos for info, infos in load_catalog() if info.ruleset == RULESET]
    return {b.key: b.modifiable_hyperparameters for b in benchmarks}


@pytest.fixture(scope="module")
def published(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Published:
    """The entry as published (the borrower's previous version, or a source), verified once per module."""
    cache: dict[Side, Entry] = {}

    def get(side: Side) -> Entry:
        if side not in cache:
            org_dir = _copy_item(corpus_dir, side, tmp_path_factory.mktemp("published"))
            cache[side] = _entry(org_dir, side, "published")
        return cache[side]

    return get


@pytest.fixture
def resubmit(corpus_dir: Path, tmp_path: Path) -> Resubmit:
    """The borrower's folder copied and its result logs rewritten: the new version, verified."""

    def build(side: Side, values: dict[str, Any], *, per_run: dict[int, dict[str, Any]] | None = None,
              system_edit: Callable[[dict[str, Any]], None] | None = None) -> Entry:
        org_dir = _copy_item(corpus_dir, side, tmp_path / "new")
        folder = org_dir / "results" / side.system / side.benchmark
        for path in sorted(folder.glob("result_*.txt")):
            position = int(path.stem.removeprefix("result_"))
            _rewrite_log(path, {**values, **(per_run or {}).get(position, {})})
        if system_edit is not None:
            system_json = org_dir / "systems" / f"{side.system}.json"
            description = json.loads(system_json.read_bytes())
            system_edit(description)
            system_json.write_text(json.dumps(description, indent=2))
        return _entry(org_dir, side, "new version")

    return build


def _borrowed(source: Entry, modifiable: tuple[str, ...]) -> dict[str, Any]:
    """What a borrower copies: the source's value of every modifiable hyperparameter it logs."""
    return {k: v for k, v in source.hyperparameters.items() if k in modifiable}


def _check(borrower: Side, source: Side, new: Entry, published: Published, modifiable: Modifiable) -> list[Finding]:
    return check_borrowing(benchmark=borrower.benchmark, modifiable=modifiable[borrower.benchmark],
                           previous=published(borrower), new=new, source=published(source))


# --- real logs ------------------------------------------------------------------------------------------


@pytest.mark.corpus
def test_the_corpus_pairs_differ_where_these_tests_rely_on_it(published: Published, modifiable: Modifiable) -> None:
    lora = modifiable["llama2_70b_lora"]
    rows = hyperparameter_diff(published(RED_HAT_LORA).hyperparameters, published(NVIDIA_LORA).hyperparameters, lora)
    assert {r.key for r in rows if r.will_change} == {"opt_base_learning_rate", "opt_learning_rate_training_steps"}
    # Red_Hat and Intel differ only in a batch key: that pair would test nothing, so NVIDIA is the source.
    rows = hyperparameter_diff(published(RED_HAT_LORA).hyperparameters, published(INTEL_LORA).hyperparameters, lora)
    assert [r.key for r in rows if not values_equal(r.mine, r.source)] == ["gradient_accumulation_steps"]
    assert not any(r.will_change for r in rows)
    rows = hyperparameter_diff(published(DELL_BERT).hyperparameters, published(NVIDIA_BERT).hyperparameters,
                               modifiable["bert"])
    assert {r.key for r in rows if r.will_change} == {"opt_learning_rate_training_steps"}
    assert {r.key for r in rows if not values_equal(r.mine, r.source)} == {
        "opt_learning_rate_training_steps", "global_batch_size"}


@pytest.mark.corpus
def test_borrowing_all_of_the_sources_modifiable_hyperparameters_passes(
    published: Published, resubmit: Resubmit, modifiable: Modifiable
) -> None:
    new = resubmit(RED_HAT_LORA, _borrowed(published(NVIDIA_LORA), modifiable["llama2_70b_lora"]))
    assert new.hyperparameters["opt_base_learning_rate"] == 0.0005
    assert _check(RED_HAT_LORA, NVIDIA_LORA, new, published, modifiable) == []


@pytest.mark.corpus
def test_a_borrower_may_choose_its_own_global_batch_size(
    published: Published, resubmit: Resubmit, modifiable: Modifiable
) -> None:
    values = _borrowed(published(NVIDIA_LORA), modifiable["llama2_70b_lora"]) | {"global_batch_size": 16}
    new = resubmit(RED_HAT_LORA, values)
    assert _check(RED_HAT_LORA, NVIDIA_LORA, new, published, modifiable) == []


@pytest.mark.corpus
def test_a_borrower_may_keep_its_own_batch_size_when_the_source_differs(
    published: Published, resubmit: Resubmit, modifiable: Modifiable
) -> None:
    bert = modifiable["bert"]
    values = {k: v for k, v in _borrowed(published(NVIDIA_BERT), bert).items() if k not in BATCH_KEYS}
    new = resubmit(DELL_BERT, values)
    assert new.hyperparameters["global_batch_size"] == 576  # NVIDIA's is 768
    assert new.hyperparameters["opt_learning_rate_training_steps"] == 3680.0
    assert _check(DELL_BERT, NVIDIA_BERT, new, published, modifiable) == []


@pytest.mark.corpus
def test_a_borrower_may_keep_its_own_gradient_accumulation(
    published: Published, resubmit: Resubmit, modifiable: Modifiable
) -> None:
    values = _borrowed(published(NVIDIA_LORA), modifiable["llama2_70b_lora"])
    values["gradient_accumulation_steps"] = published(INTEL_LORA).hyperparameters["gradient_accumulation_steps"]
    new = resubmit(INTEL_LORA, values)
    assert new.hyperparameters["gradient_accumulation_steps"] == 1  # NVIDIA's is 4
    assert _check(INTEL_LORA, NVIDIA_LORA, new, published, modifiable) == []


@pytest.mark.corpus
def test_changing_a_non_modifiable_hyperparameter_is_refused(
    published: Published, resubmit: Resubmit, modifiable: Modifiable
) -> None:
    values = _borrowed(published(NVIDIA_LORA), modifiable["llama2_70b_lora"]) | {"lora_rank": 32}
    new = resubmit(RED_HAT_LORA, values)
    (finding,) = _check(RED_HAT_LORA, NVIDIA_LORA, new, published, modifiable)
    assert (finding.severity, finding.checker, finding.rule) == ("error", "borrowing", "lora_rank")
    assert "previous 16, new 32" in finding.message
    assert "not a modifiable hyperparameter of llama2_70b_lora" in finding.message
    assert finding.file == f"{RED_HAT_LORA.org}/results/{RED_HAT_LORA.system}/llama2_70b_lora/result_0.txt"


@pytest.mark.corpus
def test_changing_the_system_description_is_refused(
    published: Published, resubmit: Resubmit, modifiable: Modifiable
) -> None:
    def faster_memory(description: dict[str, Any]) -> None:
        description["host_memory_capacity"] = "3TB"

    new = resubmit(RED_HAT_LORA, _borrowed(published(NVIDIA_LORA), modifiable["llama2_70b_lora"]),
                   system_edit=faster_memory)
    (finding,) = _check(RED_HAT_LORA, NVIDIA_LORA, new, published, modifiable)
    assert finding.rule == "system-description"
    assert finding.file == f"{RED_HAT_LORA.org}/systems/{RED_HAT_LORA.system}.json"


@pytest.mark.corpus
def test_a_borrowed_value_that_differs_from_the_source_is_refused(
    published: Published, resubmit: Resubmit, modifiable: Modifiable
) -> None:
    values = _borrowed(published(NVIDIA_LORA), modifiable["llama2_70b_lora"])
    values["opt_learning_rate_training_steps"] = 1024  # kept its own instead of NVIDIA's 896
    new = resubmit(RED_HAT_LORA, values)
    (finding,) = _check(RED_HAT_LORA, NVIDIA_LORA, new, published, modifiable)
    assert finding.rule == "opt_learning_rate_training_steps"
    assert "previous 1024, new 1024, source 896" in finding.message
    assert NVIDIA_LORA.label("published") in finding.message


@pytest.mark.corpus
def test_one_run_with_different_values_is_refused(
    published: Published, resubmit: Resubmit, modifiable: Modifiable
) -> None:
    values = _borrowed(published(NVIDIA_LORA), modifiable["llama2_70b_lora"])
    new = resubmit(RED_HAT_LORA, values, per_run={3: {"opt_base_learning_rate": 0.0004}})
    (finding,) = _check(RED_HAT_LORA, NVIDIA_LORA, new, published, modifiable)
    assert finding.rule == "consistency"
    assert finding.file.endswith("/llama2_70b_lora/result_3.txt")
    assert "opt_base_learning_rate is 0.0004" in finding.message


# --- hand-made entries ----------------------------------------------------------------------------------

MODIFIABLE = ("global_batch_size", "opt_base_learning_rate", "opt_learning_rate_warmup_steps", "opt_lamb_beta_1")


def _entry_of(label: str, *runs: dict[str, Any], sha: str = "a" * 64) -> Entry:
    return Entry(label=label, system_sha256=sha,
                 runs=tuple((f"org/results/sys/bert/result_{i}.txt", run) for i, run in enumerate(runs)))


def _verdict(previous: dict[str, Any], new: dict[str, Any], source: dict[str, Any],
             modifiable: tuple[str, ...] = MODIFIABLE) -> list[Finding]:
    return check_borrowing(benchmark="bert", modifiable=modifiable, previous=_entry_of("mine (previous)", previous),
                           new=_entry_of("mine (new)", new), source=_entry_of("theirs", source))


BASE = {"global_batch_size": 576, "opt_base_learning_rate": 0.00096, "opt_lamb_beta_1": 0.6, "opt_epsilon": 1e-06}
THEIRS = {"global_batch_size": 768, "opt_base_learning_rate": 0.0005, "opt_lamb_beta_1": 0.7, "opt_epsilon": 1e-06}


def test_floats_equal_within_a_relative_1e_12() -> None:
    assert values_equal(0.0005, 0.0005 * (1 + 5e-13))
    assert not values_equal(0.0005, 0.0005 * (1 + 5e-12))
    assert values_equal(4500, 4500.0)
    assert values_equal([0.1, 0.2], [0.1, 0.2 + 1e-17])
    assert not values_equal(True, 1)
    assert not values_equal("0.0005", 0.0005)
    assert values_equal(float("nan"), float("nan"))


def test_a_borrowed_float_printed_differently_passes() -> None:
    new = BASE | {"opt_base_learning_rate": 0.0005 * (1 + 1e-13), "opt_lamb_beta_1": 0.7}
    assert _verdict(BASE, new, THEIRS) == []


def test_a_borrowed_float_off_by_more_than_the_tolerance_is_refused() -> None:
    new = BASE | {"opt_base_learning_rate": 0.0005 * (1 + 1e-9), "opt_lamb_beta_1": 0.7}
    (finding,) = _verdict(BASE, new, THEIRS)
    assert finding.rule == "opt_base_learning_rate"
    assert finding.file == "org/results/sys/bert/result_0.txt"


def test_a_hyperparameter_that_appears_is_a_change() -> None:
    new = BASE | {"opt_base_learning_rate": 0.0005, "opt_lamb_beta_1": 0.7, "opt_lamb_beta_2": 0.9}
    (finding,) = _verdict(BASE, new, THEIRS)
    assert finding.rule == "opt_lamb_beta_2"
    assert "appeared" in finding.message and "previous not logged, new 0.9" in finding.message


def test_a_hyperparameter_that_disappears_is_a_change() -> None:
    new = {k: v for k, v in BASE.items() if k != "opt_epsilon"} | {"opt_base_learning_rate": 0.0005,
                                                                    "opt_lamb_beta_1": 0.7}
    (finding,) = _verdict(BASE, new, THEIRS)
    assert finding.rule == "opt_epsilon"
    assert "disappeared" in finding.message
    assert finding.file == ""  # no run of the new version logs it


def test_a_modifiable_key_the_source_does_not_log_must_stay_as_it_was() -> None:
    previous = BASE | {"opt_learning_rate_warmup_steps": 100}
    borrowed = {"opt_base_learning_rate": 0.0005, "opt_lamb_beta_1": 0.7}
    assert _verdict(previous, previous | borrowed, THEIRS) == []
    (finding,) = _verdict(previous, previous | borrowed | {"opt_learning_rate_warmup_steps": 0}, THEIRS)
    assert finding.rule == "opt_learning_rate_warmup_steps"
    assert "does not log it" in finding.message


def test_a_modifiable_key_the_source_logs_must_be_borrowed_even_if_mine_lacked_it() -> None:
    previous = {k: v for k, v in BASE.items() if k != "opt_lamb_beta_1"}
    (finding,) = _verdict(previous, previous | {"opt_base_learning_rate": 0.0005}, THEIRS)
    assert finding.rule == "opt_lamb_beta_1"
    assert "new not logged, source 0.7" in finding.message


def test_batch_keys_may_change_even_where_the_benchmark_table_does_not_list_them() -> None:
    previous = BASE | {"gradient_accumulation_steps": 1}
    new = previous | {"opt_base_learning_rate": 0.0005, "opt_lamb_beta_1": 0.7, "gradient_accumulation_steps": 2,
                      "global_batch_size": 1152}
    assert "gradient_accumulation_steps" not in MODIFIABLE
    assert _verdict(previous, new, THEIRS | {"gradient_accumulation_steps": 4}) == []


def test_a_run_that_lacks_a_key_breaks_consistency() -> None:
    new = BASE | {"opt_base_learning_rate": 0.0005, "opt_lamb_beta_1": 0.7}
    second = {k: v for k, v in new.items() if k != "opt_epsilon"}
    findings = check_borrowing(benchmark="bert", modifiable=MODIFIABLE, previous=_entry_of("p", BASE),
                               new=_entry_of("n", new, new, second), source=_entry_of("s", THEIRS))
    assert [(f.rule, f.file) for f in findings] == [("consistency", "org/results/sys/bert/result_2.txt")]
    assert "opt_epsilon is not logged in" in findings[0].message


def test_a_changed_system_description_is_one_finding() -> None:
    new = BASE | {"opt_base_learning_rate": 0.0005, "opt_lamb_beta_1": 0.7}
    findings = check_borrowing(benchmark="bert", modifiable=MODIFIABLE, previous=_entry_of("p", BASE),
                               new=_entry_of("n", new, sha="b" * 64), source=_entry_of("s", THEIRS))
    assert [f.rule for f in findings] == ["system-description"]


def test_the_diff_shows_what_borrowing_would_change() -> None:
    mine = {"global_batch_size": 576, "opt_base_learning_rate": 0.00096, "opt_lamb_beta_1": 0.7,
            "opt_epsilon": 1e-06, "opt_learning_rate_warmup_steps": 100}
    source = {"global_batch_size": 768, "opt_base_learning_rate": 0.0005, "opt_lamb_beta_1": 0.7 * (1 + 1e-15),
              "opt_epsilon": 1e-08, "opt_lamb_beta_2": 0.9}
    rows = {r.key: r for r in hyperparameter_diff(mine, source, (*MODIFIABLE, "opt_lamb_beta_2"))}
    assert list(rows) == sorted(rows)
    assert rows["global_batch_size"] == DiffRow("global_batch_size", 576, 768, modifiable=True, will_change=False,
                                                batch_key=True)
    assert rows["opt_base_learning_rate"].will_change
    assert not rows["opt_lamb_beta_1"].will_change  # equal within the float tolerance
    assert not rows["opt_epsilon"].will_change and not rows["opt_epsilon"].modifiable
    warmup = rows["opt_learning_rate_warmup_steps"]
    assert (warmup.mine, warmup.source, warmup.source_logged, warmup.will_change) == (100, None, False, False)
    beta_2 = rows["opt_lamb_beta_2"]
    assert (beta_2.mine, beta_2.mine_logged, beta_2.source, beta_2.will_change) == (None, False, 0.9, True)


def test_identical_versions_borrowing_from_an_identical_source_pass() -> None:
    assert _verdict(BASE, BASE, BASE) == []
