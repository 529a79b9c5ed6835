"""Which rule files the compliance checker may load: its package's own and Podium's (catalog/extensions).

The checker's rules choose the next rule files from what a log says: on the line giving the division,
`enqueue_config('training_4.0.0/{}_common.yaml'.format(v['value']))`, and likewise for the benchmark (the
oldest rulesets format `'{}.yaml'`). The checker joins the name to its package folder, parses the file and
runs the code in it. A log whose value climbs out of that folder (`"../../../../tmp/x"`) made it load and run
whichever `x_common.yaml` the machine held, under the worker's account. `install` puts a gate in front of the
queue (`enqueue_config`, a module global the rules reach through their state): a name that resolves, links
followed, outside the allowed folders is refused with `RuleFileOutside`. Raised from a rule's PRE or POST code,
the checker's own handling turns it into a message on that line ("Failed executing code POST ..."): the log is
judged non-compliant instead of running anything. Names inside the folders go through unchanged, including
those of files that do not exist, which the checker reports as it always has.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any


class RuleFileOutside(ValueError):
    """A rule file named outside the folders the checker may load rules from."""


def _within(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


# How many names found inside a Gate keeps (the rule files of every ruleset are a few hundred; the names come from
# logs, so a log of made-up ones must not grow the set without end: past this they are resolved each time).
KEPT_NAMES = 2_000
# And only names this long at most: a log's line may be 64 KB, and a name that long made of "./" still resolves
# inside; the package's own are under 60 characters.
KEPT_NAME_CHARS = 200


class Gate:
    """Stands in for the checker's `enqueue_config`.

    A name found inside is kept, and not resolved again: every log's check enqueues three or four names (its
    common rules, its division's, its benchmark's), and resolving each, links followed, took ~31 us of the checker
    child's time (a system call per folder of the path), on the way to every verdict. What it resolves to can
    change only where someone changes the allowed folders themselves (Podium's installed files and the checker's
    package), which no submitter can; a name refused is resolved again each time."""

    def __init__(self, real: Callable[[Any], Any], base: Path, allowed: tuple[Path, ...]) -> None:
        self.real = real
        self.base = os.path.realpath(base)  # where the checker resolves a name (mlp_compliance.check_loglines)
        self.allowed = tuple(os.path.realpath(folder) for folder in allowed)
        self.inside: set[str] = set()

    def __call__(self, config: Any) -> Any:
        if not (type(config) is str and config in self.inside):
            self.admit(config)
        return self.real(config)

    def admit(self, config: Any) -> None:
        """Raise RuleFileOutside unless `config` resolves inside the allowed folders; keep it where it does."""
        path = os.path.realpath(os.path.join(self.base, config))
        if not any(_within(path, folder) for folder in self.allowed):
            raise RuleFileOutside(f"the log names a rules file outside the checker's own: {str(config)[:200]!r}")
        if type(config) is str and len(config) <= KEPT_NAME_CHARS and len(self.inside) < KEPT_NAMES:
            self.inside.add(config)


def install(module: ModuleType, *, extra: tuple[Path, ...] = ()) -> None:
    """Gate `module.enqueue_config`: names inside the module's folder or one of `extra` pass."""
    if isinstance(vars(module).get("enqueue_config"), Gate):
        return
    base = Path(module.__file__ or "").resolve().parent
    module.enqueue_config = Gate(module.enqueue_config, base, (base, *extra))  # type: ignore[attr-defined]
