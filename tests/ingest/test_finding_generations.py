"""What an import run again may add without changing a submission's state (an implementation and the
warning about a result without one) moves its round's results generation: the findings API and a result
page show them, and a submission finished unchanged moves nothing itself."""

from __future__ import annotations

import pytest

from core.cache import generations
from ingest.implementations import MISSING_RULE, implementation_findings_store
from ingest.models import Round, Submission
from tests.factories import ResultFactory

pytestmark = pytest.mark.django_db


def test_a_new_missing_code_finding_moves_its_rounds_generation(django_capture_on_commit_callbacks) -> None:
    result = ResultFactory()
    Round.objects.filter(pk=result.round_id).update(reproduction_sample_size=3)
    submission = Submission.objects.get(pk=result.submission_id)
    before = generations(result.round_id)
    with django_capture_on_commit_callbacks(execute=True):
        assert len(implementation_findings_store(submission=submission)) == 1
    after = generations(result.round_id)
    assert after[0] != before[0] and after[2] != before[2]  # every change's number and its round's
    assert after[1] == before[1]  # confined to the round: other rounds' pages stand
    with django_capture_on_commit_callbacks(execute=True):
        assert implementation_findings_store(submission=submission) == []  # once per result
    assert generations(result.round_id) == after
    assert result.findings.filter(rule=MISSING_RULE).count() == 1


def test_a_recorded_implementation_moves_its_rounds_generation(django_capture_on_commit_callbacks) -> None:
    from ingest.implementations import Packed, implementations_record

    result = ResultFactory()
    packed = Packed(benchmark=result.benchmark_key, name="impl", path="Acme/benchmarks/x/implementations/impl",
                    digest="d" * 64, archive_key="implementations/aa/a.tar.gz", archive_sha256="a" * 64,
                    archive_bytes=1, files=[], systems=[result.system_slug])
    before = generations(result.round_id)
    with django_capture_on_commit_callbacks(execute=True):
        implementations_record(submission=result.submission, packed=[packed], actor="test")
    after = generations(result.round_id)
    assert after[2] != before[2] and after[1] == before[1]
    with django_capture_on_commit_callbacks(execute=True):
        implementations_record(submission=result.submission, packed=[packed], actor="test")  # kept, not new
    assert generations(result.round_id) == after
