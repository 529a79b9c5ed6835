"""core.fields.ValuesRowInsert: the bulk inserts of a verdict's runs and findings are one VALUES row per object
(not Django's UNNEST of one array per column), and what a log or a checker wrote comes back exactly, whatever
characters it holds."""

from __future__ import annotations

import math

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest.models import Finding, Run
from tests.factories import ResultFactory

pytestmark = pytest.mark.django_db

# What a submitter's log can put into the JSON columns: quotes and backslashes (what an array literal escapes),
# braces and commas (what separates its elements), NULs' neighbours, other scripts, deep nesting, big numbers.
HOSTILE = [
    'a "quoted" value',
    "back\\slash \\\" and \\\\ twice",
    "{braces},[brackets],(parens)",
    "NULL",
    "",
    "'single' '' quotes",
    "ünïcødé ✓ 训练 \u2028 line separator",
    "tab\tnewline\nreturn\r",
    "%s %(name)s %% placeholders",
]


def _runs(result, count: int) -> list[Run]:
    runs = []
    for position in range(count):
        runs.append(Run(
            result=result, position=position, file=f"org/results/s/bert/result_{position}.txt", sha256="a" * 64,
            byte_count=1, line_count=1, status="success", compliant=True, counted=True,
            hyperparameters={text: position for text in HOSTILE} | {"nested": {"deep": [[[HOSTILE]]]},
                                                                   "big": 2**80, "small": -1e-300},
            eval_curve=[{"minutes": 1.5, "epoch": 1, "samples": 2.0, "value": text} for text in HOSTILE],
            seeds=[1, 2**63 - 1, "seed \"7\""],
            logged={"submission_org": HOSTILE[position % len(HOSTILE)], "submission_platform": None},
        ))
    return runs


def _findings(result, count: int) -> list[Finding]:
    return [Finding(submission_id=result.submission_id, result=result, severity=Finding.Severity.WARNING,
                    checker="compliance", rule=HOSTILE[i % len(HOSTILE)][:120], file=f"org/results/s/bert/r_{i}.txt",
                    line=i, message=HOSTILE[i % len(HOSTILE)], detail=" ".join(HOSTILE),
                    excerpt=HOSTILE[-i % len(HOSTILE)])
            for i in range(count)]


def _insert_of(table: str, objects: list, model) -> str:
    with CaptureQueriesContext(connection) as captured:
        model.objects.bulk_create(objects)
    inserts = [q["sql"] for q in captured.captured_queries if q["sql"].startswith(f'INSERT INTO "{table}"')]
    assert len(inserts) == 1
    return inserts[0]


def test_a_bulk_insert_of_runs_or_findings_is_one_values_row_each() -> None:
    result = ResultFactory()
    runs = _insert_of("ingest_run", _runs(result, 3), Run)
    findings = _insert_of("ingest_finding", _findings(result, 3), Finding)
    for sql in (runs, findings):
        assert "UNNEST" not in sql.upper()
        assert sql.count(" VALUES (") == 1 and sql.count("), (") == 2  # three rows


def test_what_a_log_wrote_comes_back_exactly() -> None:
    result = ResultFactory()
    made = _runs(result, 4)
    Run.objects.bulk_create(made)
    stored = {run.position: run for run in Run.objects.filter(result=result)}
    assert sorted(stored) == [0, 1, 2, 3]
    for run in made:
        back = stored[run.position]
        assert back.hyperparameters == run.hyperparameters
        assert back.eval_curve == run.eval_curve
        assert back.seeds == run.seeds
        assert back.logged == run.logged
    assert math.isclose(stored[0].hyperparameters["small"], -1e-300, rel_tol=0, abs_tol=0)


def test_a_checkers_text_comes_back_exactly() -> None:
    result = ResultFactory()
    made = _findings(result, len(HOSTILE) + 2)
    Finding.objects.bulk_create(made)
    stored = {f.line: f for f in Finding.objects.filter(result=result)}
    assert len(stored) == len(made)
    for finding in made:
        back = stored[finding.line]
        assert (back.rule, back.message, back.detail, back.excerpt) == (
            finding.rule, finding.message, finding.detail, finding.excerpt)


def test_one_run_and_an_update_take_the_same_placeholder() -> None:
    result = ResultFactory()
    (run,) = Run.objects.bulk_create(_runs(result, 1))
    Run.objects.filter(pk=run.pk).update(logged={"after": HOSTILE[1]})
    run.refresh_from_db()
    assert run.logged == {"after": HOSTILE[1]}
    run.eval_curve = [{"value": HOSTILE[0]}]
    run.save(update_fields=["eval_curve"])
    run.refresh_from_db()
    assert run.eval_curve == [{"value": HOSTILE[0]}]
