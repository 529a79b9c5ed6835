"""Demo steps of the apps above ingest: `demo_data` imports the bundles, then runs what later apps registered.

ingest may not import reviews or runners (docs/architecture.md), yet the tour needs flags, decisions and
reproductions on the demo results. Each app registers its step in its AppConfig.ready(), as it registers a
visibility hold or a result panel; demo_data runs them in registration order (the apps' order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class DemoContext:
    """What a step works on: the demo rounds by phase and the personas (empty outside demo mode)."""

    published: list[Any]  # catalog Round, oldest first; the newest published is the last
    review: Any  # the round in review
    open: Any  # the round open for uploads
    personas: dict[str, Any] = field(default_factory=dict)  # username -> User
    # Round slug -> the round's folder of written bundles: a step citing a log line reads it there.
    folders: dict[str, Path] = field(default_factory=dict)
    say: Callable[[str], None] = print


DemoStep = Callable[[DemoContext], None]
_STEPS: dict[str, DemoStep] = {}


def register_demo_step(name: str, step: DemoStep) -> None:
    """Add (or replace, so a reloaded app does not run twice) the step called `name`. A step must be
    idempotent: `make run` runs every step on every start."""
    _STEPS[name] = step


def demo_steps() -> list[tuple[str, DemoStep]]:
    return list(_STEPS.items())
