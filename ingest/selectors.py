"""Reads of the ingest app shared by the importer, pages and commands."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db.models import QuerySet
from django.utils import timezone

from catalog.models import Round
from ingest.models import Result, Submission
from ingest.visibility import (
    FollowedSubmission,
    finding_rows_of_submission,
    result_rows_of_submission,
    visible_submissions,
)


def current_digests(round_: Round, keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """Digest of the current result of each (organization name, system slug, benchmark key)."""
    wanted = set(keys)
    rows = Result.objects.current().filter(round=round_).values_list(
        "organization__name", "system_slug", "benchmark_key", "digest"
    )
    return {(o, s, b): d for o, s, b, d in rows if (o, s, b) in wanted}


def imported_versions(round_: Round, keys: list[tuple[str, str, str]]
                      ) -> dict[tuple[str, str, str], tuple[str, int]]:
    """(digest, pk) of the newest version of each entry that an import stored. Where a later upload (a
    resubmission, a borrowing) holds the entry, the tree is unchanged if it still equals what was imported,
    and that version holds its files."""
    wanted = set(keys)
    rows = (Result.objects.filter(round=round_, submission__source=Submission.Source.IMPORT)
            .order_by("pk").values_list("organization__name", "system_slug", "benchmark_key", "digest", "pk"))
    return {(o, s, b): (d, pk) for o, s, b, d, pk in rows if (o, s, b) in wanted}


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


def submissions_visible_to(user: Any) -> QuerySet[Submission]:
    """The visitor's visible submissions (ingest.visibility), newest first."""
    return visible_submissions(user).order_by("-created_at")


def submission_followed(user: Any, submission: Submission) -> FollowedSubmission:
    """Where a request waiting for `submission`'s state reads it again (ingest.waiting), with what its status
    names (the round, the organization): it finds the submission exactly while the visitor may see it."""
    return FollowedSubmission(user, submission)


def submission_elapsed(submission: Submission) -> float:
    end = submission.finished_at or timezone.now()
    return round(max(0.0, (end - submission.created_at).total_seconds()), 3)


PLATFORM_ERROR = ("Podium could not finish verifying this bundle because of a problem on our side. It is not a "
                  "fault of your bundle and does not count against any limit; the operators have the details.")


def submission_summary(submission: Submission, request: Any | None = None) -> dict[str, Any]:
    url = submission.get_absolute_url()
    return {
        "id": submission.pk,
        "round": submission.round.slug,
        "organization": submission.organization.slug,
        "state": submission.state,
        "label": submission.label,
        "sha256": submission.sha256,
        "created_at": submission.created_at.isoformat(),
        "url": request.build_absolute_uri(url) if request is not None else url,
    }


# What the status shows of each (the rest, a finding's detail among it, is not read: it is what the answer waits
# for once the verdict is stored).
_STATUS_RESULT_COLUMNS = ("id", "system_slug", "benchmark_key", "division", "verdict", "score", "raw_score",
                          "scaling_factor", "runs_count", "runs_compliant", "is_current")
_STATUS_FINDING_COLUMNS = ("severity", "checker", "rule", "file", "line", "message", "excerpt")


def submission_status(submission: Submission, request: Any | None = None) -> dict[str, Any]:
    """The status report, with only the results and findings that the requester may see (a published
    submission may carry a result held back by a review); without a request, what the public may see."""
    from ingest.services.submissions import queue_position

    def absolute(url: str) -> str:
        return request.build_absolute_uri(url) if request is not None else url

    user = request.user if request is not None else AnonymousUser()
    # Every column shown is the result's own (its facts are copied from the system): no join.
    results = result_rows_of_submission(user, submission, _STATUS_RESULT_COLUMNS, ("system_slug", "benchmark_key"))
    findings = finding_rows_of_submission(user, submission, _STATUS_FINDING_COLUMNS, ("file", "line", "id"))
    return {
        **submission_summary(submission, request),
        "queue_position": queue_position(submission),
        "elapsed_seconds": submission_elapsed(submission),
        "attempts": submission.attempts,
        "results": [
            {
                "id": pk,
                "system": system,
                "benchmark": benchmark,
                "division": division or None,
                "verdict": verdict,
                "score": score,
                "raw_score": raw_score,
                "scaling_factor": scaling_factor,
                "runs": runs,
                "runs_compliant": runs_compliant,
                "is_current": bool(is_current),
                "url": absolute(Result(pk=pk).get_absolute_url()),
            }
            for (pk, system, benchmark, division, verdict, score, raw_score, scaling_factor, runs, runs_compliant,
                 is_current) in results
        ],
        "findings": [
            {
                "severity": severity,
                "checker": checker,
                "check": checker,  # the earlier name of `checker`, kept for clients written against it
                "rule": rule,
                "file": file,
                "line": line,
                "message": message,
                "excerpt": excerpt,
            }
            for severity, checker, rule, file, line, message, excerpt in findings
        ],
        "error": PLATFORM_ERROR if submission.state == Submission.State.ERROR else None,
    }
