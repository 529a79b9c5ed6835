from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)


@dataclass(frozen=True)
class Finding:
    """One itemized verdict: what rule, where (file and 1-based line), and why.

    `checker` names the check (compliance, system_desc, seed, rcp, run_count, scaling, power,
    parse, layout, tool); `rule` the specific rule within it (a log key, a field, a file name).
    """

    severity: str
    checker: str
    rule: str
    message: str
    file: str = ""
    line: int | None = None
    excerpt: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")
