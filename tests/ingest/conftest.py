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
