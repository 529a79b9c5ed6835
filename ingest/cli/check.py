"""`check`: the server's verification, run locally on a folder or an archive, with no server."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest.cli import archives
from ingest.cli.common import EXIT_NONCOMPLIANT, EXIT_OK, CliError, finding_lines, result_line, shown
from ingest.engine.tree import ItemSource, TreeError, items_of, submitter_folders

if TYPE_CHECKING:
    from ingest.engine.verify import ItemReport

VERIFIED = "verified"


def resolve_ruleset(path: Path, explicit: str | None) -> str:
    """`--ruleset`, else the nearest `training_results_vX.Y` folder around `path`.

    Mirrors the importer's rule; the importer's own function lives in a module that imports Django.
    """
    from ingest.engine import rules, tool  # imports mlperf-logging: about a second, so only when checking

    known = rules.known_rulesets()
    if explicit:
        if explicit not in known:
            raise CliError(f"--ruleset {explicit} is not a training ruleset of mlperf-logging "
                           f"{tool.tool_version()}; known: {', '.join(known)}")
        return explicit
    resolved = path.resolve()
    for candidate in (resolved, *resolved.parents):
        ruleset = rules.ruleset_from_folder(candidate.name)
        if ruleset is not None:
            if ruleset not in known:
                raise CliError(f"{candidate.name} names ruleset {ruleset}, which mlperf-logging "
                               f"{tool.tool_version()} does not know; known: {', '.join(known)}")
            return ruleset
    raise CliError(f"cannot tell the ruleset of {path}: keep it under a folder named like training_results_v4.0 "
                   "or pass --ruleset X.Y.Z")


def run_check(path: Path, *, ruleset: str | None, as_json: bool) -> int:
    if not path.exists():
        raise CliError(f"{path} does not exist")
    if path.is_file() and archives.content_type(path) is None:
        raise CliError(f"{path} is neither a folder nor a .tar.gz, .tgz or .zip archive")
    resolved_ruleset = resolve_ruleset(path, ruleset)
    with tempfile.TemporaryDirectory(prefix="podium-check-") as scratch:
        if path.is_file():
            orgs = [archives.extract(path, Path(scratch))]
        else:
            try:
                orgs = submitter_folders(path)
            except TreeError as exc:
                raise CliError(str(exc)) from None
        sources = [source for org in orgs for source in items_of(org)]
        if not sources:
            raise CliError(f"no (system, benchmark) results in {path}: expected "
                           "<org>/results/<system>/<benchmark>/result_*.txt")
        results = _verify_all(sources, resolved_ruleset, as_json)

    from ingest.engine import tool

    verdicts = [r["verdict"] for r in results]
    overall = VERIFIED if all(v == VERIFIED for v in verdicts) else "noncompliant"
    if as_json:
        document = {"path": str(path), "ruleset": resolved_ruleset, "tool_version": tool.tool_version(),
                    "verdict": overall, "results": results}
        print(json.dumps(document, indent=2))
    else:
        print(f"{len(results)} item(s): {verdicts.count(VERIFIED)} verified, "
              f"{len(verdicts) - verdicts.count(VERIFIED)} noncompliant "
              f"(ruleset {resolved_ruleset}, mlperf-logging {tool.tool_version()})")
    return EXIT_OK if overall == VERIFIED else EXIT_NONCOMPLIANT


def _verify_all(sources: list[ItemSource], ruleset: str, as_json: bool) -> list[dict[str, Any]]:
    from ingest.engine.verify import verify_item

    results = []
    for source in sources:
        result = _result(verify_item(source, ruleset))
        results.append(result)
        if not as_json:
            # Printed as each item finishes: a round folder takes a while, and progress is the report.
            print(result_line(result))
            for finding in shown(result["findings"]):
                print("\n".join(finding_lines(finding)))
            sys.stdout.flush()
    return results


def _result(report: ItemReport) -> dict[str, Any]:
    """An ItemReport in the shape of the server's status API, plus what only a local check knows."""
    return {
        "org": report.org,
        "system": report.system,
        "benchmark": report.benchmark,
        "division": report.division,
        "verdict": report.verdict,
        "score": report.score,
        "raw_score": report.raw_score,
        "scaling_factor": report.scaling_factor,
        "scaling_source": report.scaling_source,
        "no_score_reason": report.no_score_reason,
        "runs": len(report.runs),
        "runs_compliant": report.runs_compliant,
        "digest": report.digest,
        "findings": [asdict(f) for f in report.all_findings()],
    }
