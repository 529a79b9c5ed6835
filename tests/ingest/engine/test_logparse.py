from __future__ import annotations

import json

from ingest.engine.logparse import parse_log


def line(key: str, value: object = None, t: int = 1000, **metadata: object) -> str:
    record = {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value,
              "metadata": metadata}
    return ":::MLLOG " + json.dumps(record)


def test_findings_use_the_files_own_line_numbers() -> None:
    data = "\n".join(
        [
            "booting the job",
            line("run_start", t=1000),
            "some framework chatter",
            ':::MLLOG {"namespace": "", "time_ms": 12, "key": "eval_accur',
            line("run_stop", t=61000, status="success"),
        ]
    ).encode()
    parsed = parse_log(data, "org/results/sys/resnet/result_0.txt")
    assert parsed.token_lines == [2, 4, 5]
    assert [f.line for f in parsed.findings] == [4]
    assert parsed.findings[0].rule == "mllog-line"
    assert "eval_accur" in parsed.findings[0].excerpt
    assert parsed.time_to_train_minutes() == 1.0


def test_text_before_the_token_is_ignored_like_the_official_parser() -> None:
    parsed = parse_log(("0: " + line("run_start", t=5)).encode(), "f")
    assert parsed.events[0].key == "run_start"
    assert parsed.texts[1].startswith(":::MLLOG ")


def test_missing_fields_and_non_objects_are_findings_not_crashes() -> None:
    data = "\n".join(
        [
            ':::MLLOG {"time_ms": 1, "key": "x", "value": 1}',
            ":::MLLOG [1, 2, 3]",
            ':::MLLOG {"time_ms": "soon", "key": "x", "value": 1, "metadata": {}}',
            ':::MLLOG {"time_ms": 1, "key": 7, "value": 1, "metadata": {}}',
        ]
    ).encode()
    parsed = parse_log(data, "f")
    assert parsed.events == []
    messages = [f.message for f in parsed.findings]
    assert "missing field(s) 'metadata'" in messages[0]
    assert "found list" in messages[1]
    assert "not a number" in messages[2]
    assert "not a string" in messages[3]


def test_non_utf8_bytes_are_reported_with_their_line() -> None:
    data = (line("run_start") + "\n").encode() + b":::MLLOG {\"time_ms\": 1, \"key\": \"caf\xe9\", " \
        b"\"value\": null, \"metadata\": {}}\n"
    parsed = parse_log(data, "f")
    utf8 = [f for f in parsed.findings if f.rule == "utf-8"]
    assert len(utf8) == 1 and utf8[0].line == 2 and utf8[0].severity == "warning"
    assert parsed.events[1].key == "café"  # read as Latin-1, as mlperf-logging does


def test_crlf_and_cr_line_endings_count_like_universal_newlines() -> None:
    data = (line("run_start", t=0) + "\r\n" + "noise\r" + line("run_stop", t=120000, status="success")).encode()
    parsed = parse_log(data, "f")
    assert parsed.token_lines == [1, 3]
    assert parsed.time_to_train_minutes() == 2.0


def test_run_bounds_follow_the_summarizer() -> None:
    # Two run_start lines before the first run_stop: the summarizer keeps the later one.
    data = "\n".join([line("run_start", t=0), line("run_start", t=60000), line("run_stop", t=120000, status="success"),
                      line("run_stop", t=999999, status="success")]).encode()
    parsed = parse_log(data, "f")
    assert parsed.time_to_train_minutes() == 1.0
    assert parsed.stop_status() == "success"


def test_hyperparameters_seeds_and_eval_curve() -> None:
    data = "\n".join(
        [
            line("global_batch_size", 3264),
            line("opt_base_learning_rate", 10.5),
            line("seed", 42),
            line("train_samples", 1281167),
            line("run_start", t=0),
            line("eval_accuracy", 0.5, t=60000, epoch_num=2),
            line("eval_accuracy", 0.76, t=120000, epoch_num=4),
            line("run_stop", t=130000, status="success"),
        ]
    ).encode()
    parsed = parse_log(data, "f")
    assert parsed.hyperparameters() == {"global_batch_size": 3264, "opt_base_learning_rate": 10.5}
    assert parsed.seeds() == [42]
    curve = parsed.eval_curve()
    assert [(p.minutes, p.epoch, p.value) for p in curve] == [(1.0, 2.0, 0.5), (2.0, 4.0, 0.76)]


def test_empty_and_binary_files_parse_to_nothing() -> None:
    assert parse_log(b"", "f").events == []
    parsed = parse_log(bytes(range(256)) * 4, "f")
    assert parsed.events == [] and parsed.line_count > 0
