"""What a forked checker child computed that its parent keeps: the child's memory dies with it.

tool runs the checkers in forked children. Whatever a child computes once for good (a parsed rule file, an RCP
checker's minimum acceptable mean) goes back to the parent with the child's answer, and the parent keeps it,
so the children it forks next start with it: computed once per process, not once per child. Each kind lives
in a `SentBack`: a dict that knows which of its entries its parent already has.
"""

from __future__ import annotations

from typing import Any


class SentBack(dict[Any, Any]):
    """Entries kept in this process; `fresh()` those the parent lacks (since `mark()`), `merge()` a child's."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__()
        self.limit = limit  # past it, nothing more is kept (or merged)
        self._known: set[Any] = set()

    def room(self) -> bool:
        return self.limit is None or len(self) < self.limit

    def mark(self) -> None:
        """Everything kept now is the parent's too (a child just forked, or an answer just sent)."""
        self._known = set(self)

    def fresh(self) -> dict[Any, Any]:
        """What was added here since `mark`: it goes back to the parent with the answer."""
        return {key: value for key, value in self.items() if key not in self._known}

    def merge(self, entries: dict[Any, Any] | None) -> list[Any]:
        """A child's fresh entries, kept where new; returns the keys that were."""
        added = []
        for key, value in (entries or {}).items():
            if key not in self and self.room():
                self[key] = value
                added.append(key)
        return added

    def forget(self) -> None:
        self.clear()
        self._known = set()
