from __future__ import annotations

from pathlib import Path

from mlperf_logging.compliance_checker import mlp_compliance

from ingest.engine import tool


def test_a_crash_inside_the_checker_is_returned_not_raised(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "result_0.txt"
    log.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "key": "submission_benchmark", "value": "resnet"}\n')
    # The official parser reads m['metadata'] without a check: a KeyError escapes the library.
    outcome = tool.check_compliance(log, "4.0.0")
    assert outcome.valid is None
    assert outcome.crash is not None and "KeyError" in outcome.crash


def test_the_rule_queue_is_emptied_after_a_crash(tmp_path: Path, monkeypatch) -> None:
    def explode(self, loglines, config):  # leaves a config queued, as a mid-check exception would
        mlp_compliance.enqueued_configs.append("training_4.0.0/closed_common.yaml")
        raise RuntimeError("boom")

    monkeypatch.setattr(mlp_compliance.ComplianceChecker, "check_loglines", explode)
    log = tmp_path / "result_0.txt"
    log.write_text("")
    assert tool.check_compliance(log, "4.0.0").crash == "RuntimeError: boom"
    assert mlp_compliance.enqueued_configs == []


def test_the_tools_console_output_is_captured(tmp_path: Path, capsys) -> None:
    log = tmp_path / "result_0.txt"
    log.write_text("no mllog lines at all\n")
    outcome = tool.check_compliance(log, "4.0.0")
    assert outcome.valid is False
    assert "No log lines detected" in outcome.errors
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_rule_files_are_parsed_once_and_handed_out_as_copies(tmp_path: Path) -> None:
    cache = mlp_compliance.yaml
    assert isinstance(cache, tool._RuleFileCache)
    path = Path(mlp_compliance.__file__).parent / "training_4.0.0" / "common.yaml"
    with path.open() as first, path.open() as second:
        a = cache.load(first, Loader=cache.BaseLoader)
        b = cache.load(second, Loader=cache.BaseLoader)
    assert a == b and a is not b


def test_a_rule_files_copy_equals_the_file_and_is_the_checkers_own_to_the_last_level() -> None:
    """The copy the checker is handed (read back from a pickle, _RuleFileCache.copy_of) is the file as the library's
    own loader reads it, the same types and key order, and nothing the checker changes in it reaches the next."""
    cache = mlp_compliance.yaml
    path = Path(mlp_compliance.__file__).parent / "training_4.0.0" / "common.yaml"
    with path.open() as handle:
        real = cache._real.load(handle, Loader=cache.BaseLoader)
    with path.open() as handle:
        handed = cache.load(handle, Loader=cache.BaseLoader)
    assert handed == real and repr(handed) == repr(real)  # repr: the types and every dict's key order too
    nested = next(rule for rule in handed if isinstance(rule.get("KEY"), dict))
    nested["KEY"]["NAME"] = "changed by a checker"
    handed.append({"KEY": {"NAME": "added by a checker"}})
    with path.open() as handle:
        assert cache.load(handle, Loader=cache.BaseLoader) == real


def test_a_parsed_rule_file_that_cannot_be_pickled_is_deep_copied(monkeypatch) -> None:
    cache = mlp_compliance.yaml
    key = ("/nowhere/made-up.yaml", "BaseLoader")
    odd = {"CHECK": lambda: None, "list": [1, 2]}  # a function: no pickle of it (a test's own parse)
    monkeypatch.setattr(cache, "_parsed", {key: odd})
    copied = cache.copy_of(key)
    assert copied == odd and copied is not odd and copied["list"] is not odd["list"]
    assert key not in cache._pickled
