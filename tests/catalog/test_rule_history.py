"""rule_changes.yaml against catalog.yaml and the installed mlperf_logging: every change is dated on the
right side of its round's dates, every reference point it names exists in the pinned tool, and the
loader refuses what it cannot use. No Django and no database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from catalog import catalog_data
from catalog.catalog_data import (
    AFTER_PUBLICATION,
    REVIEW,
    RULE_CHANGES_PATH,
    TOOL_LAG,
    CatalogError,
    load_catalog,
    load_rule_changes,
)
from ingest.engine import history

CHANGES = load_rule_changes()
ROUNDS = {info.ruleset: info for info, _ in load_catalog()}
IDS = [f"{c.id}-{c.kind}-{'+'.join(c.rulesets)}" for c in CHANGES]


def test_the_file_loads_with_every_kind_and_a_source() -> None:
    assert {c.kind for c in CHANGES} == set(catalog_data.KINDS)
    assert all(c.source.startswith("RULE_HISTORY.md") and c.what for c in CHANGES)


@pytest.mark.parametrize("change", CHANGES, ids=IDS)
def test_each_change_is_dated_on_the_right_side_of_its_rounds(change: catalog_data.RuleChange) -> None:
    for ruleset in change.rulesets:
        published = ROUNDS[ruleset].publication_date
        deadline = ROUNDS[ruleset].submission_deadline
        assert published is not None, ruleset
        if change.phase == AFTER_PUBLICATION:
            assert change.landed > published, (ruleset, change.id)
        elif change.phase == REVIEW:
            assert change.landed <= published, (ruleset, change.id)
            assert deadline is None or change.landed > deadline, (ruleset, change.id)
        else:  # in force before the deadline by the rules' text, after the round's tool tag
            assert change.phase == TOOL_LAG and deadline is not None and change.landed <= deadline


@pytest.mark.parametrize("change", [c for c in CHANGES if c.kind == catalog_data.RCP_POINTS],
                         ids=[i for c, i in zip(CHANGES, IDS, strict=True) if c.kind == catalog_data.RCP_POINTS])
def test_every_rcp_point_named_is_in_the_pinned_tools_reference_data(change: catalog_data.RuleChange) -> None:
    for ruleset in change.rulesets:
        for benchmark, sizes in change.points.items():
            records = json.loads(history.rcp_file(ruleset, benchmark).read_text())
            present = {r["BS"] for r in records.values() if r["Benchmark"] == benchmark}
            assert set(sizes) <= present, (ruleset, benchmark, set(sizes) - present)


def test_the_reference_of_the_time_leaves_out_exactly_the_later_points() -> None:
    of_the_time = history.reference_of_the_time("3.1.0", "ssd")
    assert of_the_time is not None
    sizes = {r["BS"] for r in of_the_time.values()}
    assert 320 not in sizes and {256, 512, 768, 1024, 1280, 2048, 4096} <= sizes
    assert history.reference_of_the_time("4.0.0", "ssd") is None  # nothing came after v4.0's publication


def test_the_status_spellings_v4_0_accepted() -> None:
    change = history.status_change("4.0.0")
    assert change is not None and change.id == "191ed2c"
    assert all(history.accepted_then(change, s) for s in ("onprem", "Cloud", "cloud", "available", "Preview"))
    assert not any(history.accepted_then(change, s) for s in ("Available on premise", "Available in cloud"))
    assert history.status_change("3.1.0") is None and history.status_change("4.1.0") is None


@pytest.mark.parametrize(("ruleset", "phase"), [("1.0.0", AFTER_PUBLICATION), ("4.0.0", AFTER_PUBLICATION),
                                                ("4.1.0", TOOL_LAG), ("5.0.0", None), ("0.7.0", None)])
def test_the_seed_rule_of_each_round(ruleset: str, phase: str | None) -> None:
    change = history.seed_change(ruleset)
    assert (change.phase if change else None) == phase


def _write(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(RULE_CHANGES_PATH.read_text())
    edit(data["changes"])
    path = tmp_path / "rule_changes.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c[0].update(id="not a commit"), "commit hash"),
    (lambda c: c[0].update(rulesets=["9.9.0"]), "unknown to mlperf_logging"),
    (lambda c: c[0].update(phase="someday"), "phase"),
    (lambda c: c[0].update(messages=["("]), "does not compile"),
    (lambda c: c[1].update(then={"key": "eval_accuracy"}), "exactly one of req"),
    (lambda c: c[0].update(surprise=1), "unknown fields"),
    (lambda c: c[0].pop("landed"), "landed"),
])
def test_the_loader_refuses_what_it_cannot_use(tmp_path: Path, edit, message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        load_rule_changes(_write(tmp_path, edit))


# --- round dates in catalog.yaml ------------------------------------------------------------------------

def test_every_round_the_tool_knows_has_a_publication_date_or_is_not_published_yet() -> None:
    unpublished = [r for r, info in ROUNDS.items() if info.publication_date is None]
    assert unpublished == ["6.1.0"]


def test_every_deadline_has_a_source_and_comes_before_publication() -> None:
    for ruleset, info in ROUNDS.items():
        if info.submission_deadline is not None:
            assert info.deadline_source, ruleset
            assert info.publication_date is None or info.submission_deadline < info.publication_date
    # RULE_HISTORY.md gives only estimates for these: an admin sets them.
    assert [r for r, info in ROUNDS.items() if info.submission_deadline is None] == ["1.1.0", "3.0.0", "3.1.0",
                                                                                     "6.0.0"]
