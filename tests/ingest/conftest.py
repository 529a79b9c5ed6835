from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.people import make_people, open_round


@pytest.fixture
def make_tree(demo_tree, tmp_path: Path) -> Callable[..., Path]:
    """Copy demo items into a fresh `training_results_v4.0` tree that a test may then break.

    `make_tree(("Larkspur_Compute", "atlas_lx4_n1", "resnet"), ...)` returns the round folder.
    """
    root, manifest = demo_tree
    demo_round = manifest.round("demo-2024a")

    def build(*items: tuple[str, str, str], round_name: str = "training_results_v4.0") -> Path:
        target = tmp_path / round_name
        for org, system, benchmark in items:
            source_org = root / demo_round.folder / org
            (target / org / "systems").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source_org / "systems" / f"{system}.json", target / org / "systems" / f"{system}.json")
            shutil.copytree(source_org / "results" / system / benchmark, target / org / "results" / system / benchmark)
        return target

    return build


@pytest.fixture
def people():
    return make_people()


@pytest.fixture
def round_open():
    return open_round()


@pytest.fixture
def offered_at_once(monkeypatch) -> None:
    """verify_item's speculation (`speculate`) offered before the first answer is read and held for as long as a
    test takes: it is otherwise offered the first time the parent would wait for an answer, and held for
    verify.SPECULATION_HOLD_S, both of which depend on the machine's speed."""
    from ingest.engine import tool, verify

    real = tool.ComplianceChecks.answered
    monkeypatch.setattr(tool.ComplianceChecks, "answered",
                        lambda self, within_s: within_s > 0 and real(self, within_s))
    monkeypatch.setattr(verify, "SPECULATION_HOLD_S", 600.0)
