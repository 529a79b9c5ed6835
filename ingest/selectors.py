"""Reads of the ingest app shared by the importer, pages and commands."""

from __future__ import annotations

from typing import Any

from ingest.models import Result
from leaderboard.models import Round


def current_digests(round_: Round, keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """Digest of the current result of each (organization name, system slug, benchmark key)."""
    wanted = set(keys)
    rows = Result.objects.current().filter(round=round_).values_list(
        "organization__name", "system_slug", "benchmark_key", "digest"
    )
    return {(o, s, b): d for o, s, b, d in rows if (o, s, b) in wanted}


def current_result(round_: Round, org_name: str, system_slug: str, benchmark_key: str) -> Result | None:
    return (
        Result.objects.current()
        .select_related("round", "organization", "system")
        .filter(round=round_, organization__name=org_name, system_slug=system_slug, benchmark_key=benchmark_key)
        .first()
    )


def result_row(result: Result) -> dict[str, Any]:
    """The summary of one result that import_results prints, one JSON object per line."""
    findings = list(result.findings.values_list("severity", flat=True))
    system = result.system
    return {
        "round": result.round.slug,
        "ruleset": result.round.ruleset,
        "submitter": result.organization.name,
        "system": result.system_slug,
        "benchmark": result.benchmark_key,
        "division": result.division or None,
        "category": system.category or None,
        "system_type": system.system_type or None,
        "accelerators": system.accelerator_count,
        "hosts": system.number_of_nodes,
        "runs": result.runs_count,
        "runs_compliant": result.runs_compliant,
        "raw_score": result.raw_score,
        "scaling_factor": result.scaling_factor,
        "scaling_source": result.scaling_source,
        "score": result.score,
        "energy_j": result.energy_j,
        "verdict": result.verdict,
        "findings": len(findings),
        "errors": findings.count("error"),
        "warnings": findings.count("warning"),
        "result_id": result.pk,
    }
