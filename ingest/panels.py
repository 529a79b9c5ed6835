"""Panels that apps above ingest add to a result's page (reviews: flags and borrowing; runners:
reproductions), so that the page that shows a result never imports them: each registers a template and a
function that builds its context in its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accounts.viewer import Visitor
from ingest.models import Result


@dataclass(frozen=True)
class Panel:
    template: str
    context: dict[str, Any]


PanelBuilder = Callable[[Visitor, Result], dict[str, Any]]
_RESULT_PANELS: dict[str, tuple[int, str, PanelBuilder]] = {}


def register_result_panel(name: str, *, template: str, context: PanelBuilder, order: int) -> None:
    """Add a panel to every result page; registering the same name again replaces it."""
    _RESULT_PANELS[name] = (order, template, context)


def result_panels(user: Visitor, result: Result) -> list[Panel]:
    return [Panel(template, build(user, result)) for _, template, build in sorted(_RESULT_PANELS.values())]
