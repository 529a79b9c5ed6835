"""What a forked checker child computed that its parent keeps: the child's memory dies with it.

tool runs the checkers in forked children. Whatever a child computes once for good (a parsed rule file, an RCP
checker's minimum acceptable mean) goes back to the parent with the child's answer, and the parent keeps it,
so the children it forks next start with it: computed once per process, not once per child. Each kind lives
in a `SentBack`: a dict that knows which of its entries its parent already has.
"""

from __future__ import annotations

from typing import Any


class SentBack(dict[Any, Any]):
    """Entries kept in this process; `fresh()` those the parent lacks (since `mark()`), `merge()` a child's.

    Entries are added only through `self[key] = value` (which notes the key) or `merge`; `mark` and `fresh` are
    called around every checker call a child answers, so they cost what was added since, not what is kept:
    rebuilt from every entry (hundreds of rule files and RCP means once preloaded), they took ~0.1 ms a call,
    7% of a 10-log item's checks in a child (cProfile against the same checks in process)."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__()
        self.limit = limit  # past it, nothing more is kept (or merged)
        self._added: dict[Any, None] = {}  # keys added since `mark`, in order

    def __setitem__(self, key: Any, value: Any) -> None:
        if key not in self:
            self._added[key] = None
        super().__setitem__(key, value)

    def room(self) -> bool:
        return self.limit is None or len(self) < self.limit

    def mark(self) -> None:
        """Everything kept now is the parent's too (a child just forked, or an answer just sent)."""
        self._added.clear()

    def fresh(self) -> dict[Any, Any]:
        """What was added here since `mark`: it goes back to the parent with the answer."""
        return {key: self[key] for key in self._added}

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
        self._added.clear()

    # Only `self[key] = value` notes a key: the dict's other ways in would add entries no parent ever gets.
    def update(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("SentBack is filled through item assignment or merge")

    def setdefault(self, key: Any, default: Any = None) -> Any:
        raise TypeError("SentBack is filled through item assignment or merge")
