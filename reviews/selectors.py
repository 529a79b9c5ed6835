"""Reads for the review pages: what a visitor may do and see around one result or flag."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from accounts.viewer import Visitor
from catalog.models import Round
from ingest.models import Result
from reviews import access
from reviews.borrowing import hyperparameter_diff
from reviews.models import Borrowing, Flag

FINDING_KINDS = ("compliance", "system_desc", "seed", "rcp", "run_count", "scaling", "status", "layout", "parse",
                 "power", "borrowing", "hyperparameters", "reference-equivalence", "availability", "submitter",
                 "sanity", "later_rule", "later_rcp", "spelling", "published_record", "checker_timeout")


def held_results() -> QuerySet:
    """Every version of an entry (round, organization, system, benchmark) with an undecided flag on
    any of its versions: a resubmission in answer to a flag must not release the entry before the
    chair decides. Registered with the one visibility rule (ingest.visibility) in ReviewsConfig.ready."""
    undecided = Flag.objects.filter(
        state__in=Flag.UNRESOLVED, result__round=OuterRef("round"),
        result__organization=OuterRef("organization"), result__system_slug=OuterRef("system_slug"),
        result__benchmark_key=OuterRef("benchmark_key"))
    return Result.objects.filter(Exists(undecided)).values("pk")


def can_raise(user: Visitor, result: Result) -> bool:
    try:
        access.flag_raiser_organization(user, result)
    except Exception:  # PermissionDenied: the form is simply not offered
        return False
    return True


def rule_choices(result: Result) -> list[str]:
    """Suggestions for a flag's rule: the verifier's finding kinds and the rules this result's findings name."""
    named = sorted({f"{c}/{r}" for c, r in result.findings.values_list("checker", "rule") if r})
    return [*FINDING_KINDS, *named]


def result_review(user: Visitor, result: Result) -> dict[str, Any]:
    flags = access.visible_flags(user).filter(result=result).select_related("raised_by_organization")
    borrowing = Borrowing.objects.filter(result=result).select_related("source__organization").first()
    may_borrow = (
        result.round.phase() == Round.Phase.REVIEW and result.is_current
        and result.organization_id in access.answering_organization_ids(user)
        and not Borrowing.objects.filter(round=result.round, organization=result.organization,
                                         system_slug=result.system_slug, benchmark_key=result.benchmark_key).exists()
    )
    return {
        "flags": flags,
        "can_raise": can_raise(user, result),
        "rule_choices": rule_choices(result),
        "borrowed": borrowing,
        "may_borrow": may_borrow,
        "unresolved_flags": any(f.state in Flag.UNRESOLVED for f in flags),
    }


def resubmission_diff(flag: Flag) -> dict[str, Any] | None:
    """The answer against the flagged version: scores, verdicts, findings and hyperparameters."""
    if flag.resubmission is None:
        return None
    new = flag.resubmission.results.filter(system_slug=flag.result.system_slug,
                                           benchmark_key=flag.result.benchmark_key).first()
    if new is None:
        return {"missing": True}
    old = flag.result

    def counts(result: Result) -> dict[str, int]:
        values = list(result.findings.values_list("severity", flat=True))
        return {s: values.count(s) for s in ("error", "warning", "info")}

    old_hp = (old.runs.order_by("position").first() or None)
    new_hp = (new.runs.order_by("position").first() or None)
    modifiable = old.benchmark.modifiable_hyperparameters if old.benchmark else []
    return {
        "missing": False,
        "old": old,
        "new": new,
        "rows": [
            ("Score (min)", old.score, new.score),
            ("Raw olympic mean (min)", old.raw_score, new.raw_score),
            ("Scaling factor", old.scaling_factor, new.scaling_factor),
            ("Verdict", old.get_verdict_display(), new.get_verdict_display()),
            ("Compliant runs", f"{old.runs_compliant}/{old.runs_count}", f"{new.runs_compliant}/{new.runs_count}"),
            ("Findings (error/warning/info)", "/".join(map(str, counts(old).values())),
             "/".join(map(str, counts(new).values()))),
        ],
        "hyperparameters": hyperparameter_diff(old_hp.hyperparameters if old_hp else {},
                                               new_hp.hyperparameters if new_hp else {}, modifiable),
    }
