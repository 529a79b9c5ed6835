"""import_results over official trees of rounds judged by the rules of their time: the published record,
and one summary line per round on stderr (items, scored, warnings by class), with stdout left to JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from ingest.engine import history
from ingest.importer import import_tree
from ingest.models import Result
from tests.ingest.corpus_items import NVIDIA_SSD_V40, TINYBOX_RED_V40, copy_item, edit_system, logs, set_value

pytestmark = [pytest.mark.django_db, pytest.mark.corpus]

SUMMARY = re.compile(r"^(?P<root>\S+): (?P<round>\S+) \(ruleset (?P<ruleset>[\d.]+)\): (?P<items>\d+) items \(.*\), "
                     r"(?P<scored>\d+) scored, (?P<verified>\d+) verified, (?P<failed>\d+) not imported; "
                     r"warnings by class: (?P<classes>.*)$")


def _v31_tree(corpus: Path, target: Path) -> Path:
    """Two v3.1 items: RetinaNet at batch size 320 with no scaling.json (today's RCP point 74132ed came
    after the round), and a system whose status is spelled as v3.1 results spell it."""
    ssd = copy_item(corpus, target, NVIDIA_SSD_V40, "3.1.0", scaling=False)
    for log in logs(ssd):
        set_value(log, "global_batch_size", 320)
    edit_system(ssd, status="Available on premise")
    resnet = copy_item(corpus, target, TINYBOX_RED_V40, "3.1.0")
    edit_system(resnet, status="Available in cloud")
    return target / "training_results_v3.1"


def _summaries(err: str) -> dict[str, tuple[dict[str, str], dict[str, int]]]:
    """Round slug -> (the line's fields, warnings by class)."""
    found = {}
    for line in err.splitlines():
        if match := SUMMARY.match(line):
            classes = {name: int(n) for name, n in (part.rsplit(" ", 1) for part in match["classes"].split(", "))}
            found[match["round"]] = (match.groupdict(), classes)
    return found


def test_an_official_tree_keeps_its_published_scores(corpus_dir: Path, tmp_path: Path) -> None:
    summary = import_tree(_v31_tree(corpus_dir, tmp_path), jobs=1)
    assert summary.errors == 0 and summary.scored == 2
    ssd = Result.objects.current().get(benchmark_key="ssd")
    assert ssd.verdict == Result.Verdict.VERIFIED and ssd.score == ssd.raw_score and ssd.scaling_factor == 1.0
    assert ssd.findings.filter(checker=history.LATER_RCP, rule="74132ed", severity="warning").exists()
    assert ssd.findings.filter(checker=history.PUBLISHED_RECORD, rule="rcp", severity="warning").exists()
    categories = {r.benchmark_key: (r.system.category, r.system.system_type) for r in Result.objects.current()}
    assert categories == {"ssd": ("available", "on_premises"), "resnet": ("available", "cloud")}


def test_import_results_prints_one_summary_line_per_round_and_json_on_stdout(corpus_dir: Path, tmp_path: Path,
                                                                             capsys) -> None:
    v31 = _v31_tree(corpus_dir, tmp_path / "a")
    v40 = copy_item(corpus_dir, tmp_path / "b", TINYBOX_RED_V40, "4.0.0").parents[3]
    call_command("import_results", str(v31), str(v40), "--jobs", "1")
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 3 and {r["round"] for r in rows} == {"training-v3.1", "training-v4.0"}
    summaries = _summaries(err)
    assert set(summaries) == {"training-v3.1", "training-v4.0"}
    v31_line, v31_classes = summaries["training-v3.1"]
    assert (v31_line["items"], v31_line["scored"], v31_line["failed"]) == ("2", "2", "0")
    assert list(v31_classes) == [*history.CLASSES, history.OTHER]
    assert v31_classes["later_rcp"] == 1 and v31_classes["published_record"] >= 1
    v40_line, v40_classes = summaries["training-v4.0"]
    assert (v40_line["items"], v40_line["scored"]) == ("1", "1")
    # tinycorp's "available" was a v4.0 spelling; today's checker refuses it (191ed2c).
    assert v40_classes["later_rule"] >= 1
