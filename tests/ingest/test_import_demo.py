"""The demo data go through the real import and get the verdicts their manifest promises."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from ingest.models import Result

pytestmark = pytest.mark.django_db


def test_demo_data_command_imports_every_item_as_the_manifest_says(demo_tree, tmp_path, capsys, client) -> None:
    _, manifest = demo_tree
    call_command("demo_data", "--out", str(tmp_path / "bundles"), "--jobs", "2")
    out = capsys.readouterr().out
    assert "demo-2024a: 15 new" in out
    results = {
        (r.round.slug, r.organization.name, r.system_slug, r.benchmark_key): r
        for r in Result.objects.current().select_related("round", "organization")
    }
    assert len(results) == len(manifest.items)
    for item in manifest.items:
        result = results[(item.round_slug, item.org, item.system, item.benchmark)]
        assert result.runs_count == item.runs_written, item
        assert result.runs_compliant == item.runs_expected_compliant, item
        assert (result.score is not None) == item.expect_official_score, item
        if "system description" in item.notes:
            # An invalid status leaves the score standing (the summarizer computes it) but fails the item.
            assert result.verdict == Result.Verdict.NONCOMPLIANT
            assert result.findings.filter(checker="system_desc", rule="status").exists()
        if not item.notes:
            assert result.verdict == Result.Verdict.VERIFIED, (item, list(result.findings.values_list("message",
                                                                                                      flat=True)))
    # RCP normalization shows up where the generator converged faster than the reference.
    assert Result.objects.filter(scaling_source=Result.ScalingSource.RCP, scaling_factor__gt=1).exists()
    # The table `make run` opens shows the demo systems with their scale.
    html = client.get("/rounds/demo-2024a/").content.decode()
    assert "Closed division" in html
    for org in {item.org for item in manifest.items if item.round_slug == "demo-2024a"}:
        assert org in html
    # Running it again writes identical bundles and imports nothing new.
    call_command("demo_data", "--out", str(tmp_path / "bundles"), "--jobs", "1")
    assert "demo-2024a: 15 unchanged" in capsys.readouterr().out
