"""Demo data for `make run`: fictional MLPerf Training result bundles in the MLCommons layout.

Third-party result files may not go into the repository, so the demo generates its own: logs
written with mlperf-logging's `mllog`, that the real checkers accept (compliance, system
description, seed and RCP checks), except for a few items broken on purpose so the leaderboard
shows what a rejected run looks like. Pure Python, no Django: `write_demo_tree(root, seed=...)`
or `python -m ingest.demo OUTDIR [--seed N]`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingest.demo.manifest import ABORTED, GARBAGE_LINE, NO_RUN_STOP, DemoItem, DemoManifest, DemoRound
    from ingest.demo.tree import main, write_demo_tree

# Loaded on first use (PEP 562): every process imports `ingest.demo.steps` from an AppConfig.ready(),
# and the tree writer pulls mlperf-logging's RCP checker and scipy (seconds of start-up, tens of MB)
# into web workers that never write a demo tree.
_SOURCES = {
    "ABORTED": "ingest.demo.manifest",
    "GARBAGE_LINE": "ingest.demo.manifest",
    "NO_RUN_STOP": "ingest.demo.manifest",
    "DemoItem": "ingest.demo.manifest",
    "DemoManifest": "ingest.demo.manifest",
    "DemoRound": "ingest.demo.manifest",
    "main": "ingest.demo.tree",
    "write_demo_tree": "ingest.demo.tree",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(source), name)


__all__ = [
    "ABORTED",
    "GARBAGE_LINE",
    "NO_RUN_STOP",
    "DemoItem",
    "DemoManifest",
    "DemoRound",
    "main",
    "write_demo_tree",
]
