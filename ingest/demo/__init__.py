"""Demo data for `make run`: fictional MLPerf Training result bundles in the MLCommons layout.

Third-party result files may not go into the repository, so the demo generates its own: logs
written with mlperf-logging's `mllog`, that the real checkers accept (compliance, system
description, seed and RCP checks), except for a few items broken on purpose so the leaderboard
shows what a rejected run looks like. Pure Python, no Django: `write_demo_tree(root, seed=...)`
or `python -m ingest.demo OUTDIR [--seed N]`.
"""

from ingest.demo.manifest import ABORTED, GARBAGE_LINE, NO_RUN_STOP, DemoItem, DemoManifest, DemoRound
from ingest.demo.tree import main, write_demo_tree

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
