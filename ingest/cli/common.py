"""What both commands share: exit statuses, the error that ends a command, and the human report.

Results and findings are rendered from plain mappings shaped like the server's status API
(`results[]`, `findings[]`), so a local check and a server's answer read the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXIT_OK = 0
EXIT_NONCOMPLIANT = 1
EXIT_USAGE = 2  # bad arguments or input, HTTP trouble, a refused upload, a timeout
EXIT_SERVER_ERROR = 3  # the server's verification failed on its side: not the submitter's fault

# Info findings (an RCP check passed, a scaling note) are in --json; the human report keeps to what
# a submitter has to act on.
SHOWN_SEVERITIES = ("error", "warning")


class CliError(Exception):
    """Ends the command: its message goes to stderr, without a traceback, and `exit_code` to the shell."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def score_text(result: Mapping[str, Any]) -> str:
    score = result.get("score")
    if score is None:
        reason = result.get("no_score_reason")
        return f"no score ({reason})" if reason else "no score"
    text = f"{score:.2f} min"
    raw, factor = result.get("raw_score"), result.get("scaling_factor")
    if raw is not None and factor not in (None, 1.0):
        text += f" ({raw:.2f} min × scaling {factor:.4g})"
    return text


def result_line(result: Mapping[str, Any]) -> str:
    label = "/".join(str(result[k]) for k in ("org", "system", "benchmark") if result.get(k) is not None)
    runs = f"{result.get('runs_compliant', '?')}/{result.get('runs', '?')} runs compliant"
    return f"{label}: {result.get('verdict')}, {score_text(result)}, {runs}"


def finding_lines(finding: Mapping[str, Any], indent: str = "  ") -> list[str]:
    """`file:line: [severity] check/rule: message`, then the offending line's excerpt indented."""
    where = finding.get("file") or ""
    if where and finding.get("line") is not None:
        where += f":{finding['line']}"
    checker = finding.get("checker", finding.get("check"))  # servers before the rename said "check"
    head = f"[{finding.get('severity')}] {checker}/{finding.get('rule')}: {finding.get('message')}"
    lines = [f"{indent}{where}: {head}" if where else f"{indent}{head}"]
    lines += [f"{indent}    {text}" for text in (finding.get("excerpt") or "").splitlines()]
    return lines


def shown(findings: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [f for f in findings if f.get("severity") in SHOWN_SEVERITIES]
