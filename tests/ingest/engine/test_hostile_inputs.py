"""Hostile bytes read without the checker: JSON that parses but lies (duplicate keys, NaN, numbers no
column holds), system descriptions, and the upload screen's bound on line length."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from ingest.bundles import BundleRejected, Limits, LooseFile, extract_bundle, pack_loose_files
from ingest.bundles.layout import check_log_text, check_system_json
from ingest.engine import jsonscan
from ingest.engine.logparse import MAX_FINDINGS_PER_RULE, MAX_LINE_BYTES, parse_log
from ingest.engine.system_desc import MAX_COUNT, REQUIRED_FIELDS, read_system_desc

LOG = "org/results/sys/resnet/result_0.txt"


def mllog(key: str, value: str = "null", t: str = "1000", metadata: str = "{}") -> str:
    return f':::MLLOG {{"namespace": "", "time_ms": {t}, "key": "{key}", "value": {value}, "metadata": {metadata}}}'


# --- jsonscan --------------------------------------------------------------------------------------------


def test_duplicate_keys_are_reported_with_their_path_and_the_last_is_kept() -> None:
    value, anomalies = jsonscan.loads('{"a": 1, "a": 2, "m": {"s": "x", "s": "y", "s": "z"}}')
    assert value == {"a": 2, "m": {"s": "z"}}
    assert [(a.kind, a.where) for a in anomalies] == [("duplicate-key", "a"), ("duplicate-key", "m.s")]
    assert "3 times" in anomalies[1].detail


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
def test_non_finite_numbers_become_null(literal: str) -> None:
    value, anomalies = jsonscan.loads(f'{{"v": [1, {literal}]}}')
    assert value == {"v": [1, None]}
    assert [(a.kind, a.where) for a in anomalies] == [("non-finite", "v[1]")]


@pytest.mark.parametrize(("digits", "kept"), [(19, False), (18, True), (4300, False), (5001, False), (100_000, False)])
def test_integers_outside_64_bits_become_null_without_an_exception(digits: int, kept: bool) -> None:
    value, anomalies = jsonscan.loads(f'{{"v": {"9" * digits}}}')
    assert (value["v"] is not None) is kept
    assert bool(anomalies) is not kept


def test_the_64_bit_bounds_are_inclusive() -> None:
    value, anomalies = jsonscan.loads(f"[{2**63 - 1}, {-(2**63)}, {2**63}, {-(2**63) - 1}]")
    assert value == [2**63 - 1, -(2**63), None, None] and len(anomalies) == 2


def test_nesting_is_cut_at_the_depth_limit() -> None:
    depth = jsonscan.MAX_DEPTH + 5
    value, anomalies = jsonscan.loads("[" * depth + "]" * depth)
    assert [a.kind for a in anomalies] == ["too-deep"]
    assert json.dumps(value).count("[") == jsonscan.MAX_DEPTH


def test_nesting_past_the_decoders_limit_raises_the_usual_error() -> None:
    with pytest.raises(RecursionError):
        jsonscan.loads("[" * 100_000)


def test_clean_values_come_back_equal() -> None:
    text = '{"a": [1, 2.5, "x", null, true, {"b": -3}], "c": 1e-300}'
    assert jsonscan.loads(text) == (json.loads(text), [])


# --- the MLLOG reader ------------------------------------------------------------------------------------


def test_a_duplicate_time_ms_is_an_error_and_rejects_the_run() -> None:
    data = mllog("run_start", t="0") + "\n" + mllog("run_stop", t='60000, "time_ms": -1e12') + "\n"
    parsed = parse_log(data.encode(), LOG)
    (finding,) = parsed.findings
    assert (finding.severity, finding.checker, finding.rule, finding.line) == ("error", "sanity", "duplicate-key", 2)
    assert parsed.rejected_lines == [2]
    assert parsed.time_to_train_minutes() < 0  # what JSON reads; verify_item does not count it


def test_a_duplicate_key_field_is_an_error_whatever_the_line() -> None:
    parsed = parse_log((mllog("opt_lr", value="1").replace('"key": "opt_lr"', '"key": "opt_lr", "key": "run_stop"')
                        ).encode(), LOG)
    assert [f.severity for f in parsed.findings] == ["error"]
    assert parsed.events[0].key == "run_stop"


@pytest.mark.parametrize(("key", "severity"), [("opt_base_learning_rate", "warning"), ("eval_accuracy", "error"),
                                               ("global_batch_size", "error"), ("run_stop", "error")])
def test_a_nan_value_is_an_error_only_where_it_can_change_the_score(key: str, severity: str) -> None:
    parsed = parse_log(mllog(key, value="NaN").encode(), LOG)
    (finding,) = parsed.findings
    assert finding.severity == severity and finding.rule == "non-finite"
    assert parsed.events[0].value is None
    assert bool(parsed.rejected_lines) is (severity == "error")


@pytest.mark.parametrize("t", ["NaN", "Infinity", "-Infinity", "1e400", "9" * 5001, "1e300", str(2**53 + 2)])
def test_an_unusable_time_ms_drops_the_line(t: str) -> None:
    parsed = parse_log(mllog("run_stop", t=t).encode(), LOG)
    assert parsed.events == [] and parsed.rejected_lines == [1]
    assert [f.severity for f in parsed.findings] == ["error"]


def test_negative_and_zero_times_parse_and_are_judged_later() -> None:
    data = "\n".join([mllog("run_start", t="0"), mllog("run_stop", t="-60000")])
    parsed = parse_log(data.encode(), LOG)
    assert parsed.findings == [] and parsed.time_to_train_minutes() == -1.0


def test_a_million_bad_lines_give_a_bounded_number_of_findings() -> None:
    parsed = parse_log(b":::MLLOG not json\n" * 20_000, LOG)
    assert len(parsed.findings) == MAX_FINDINGS_PER_RULE + 1
    assert "19950 more line(s)" in parsed.findings[-1].message


def test_long_token_lines_are_noted_for_the_checker_but_still_read() -> None:
    long_value = '"' + "x" * MAX_LINE_BYTES + '"'
    data = "\n".join([mllog("run_start", t="0"), "chatter " + "y" * (2 * MAX_LINE_BYTES), mllog("opt_x", long_value)])
    parsed = parse_log(data.encode(), LOG)
    assert [line for line, _ in parsed.long_lines] == [3]  # the chatter has no token: the checker skips it
    assert parsed.events[-1].key == "opt_x"


# --- system descriptions ---------------------------------------------------------------------------------


def system(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {key: "n/a" for key in REQUIRED_FIELDS}
    base.update(division="closed", status="Available on-premise", number_of_nodes=2, accelerators_per_node=8,
                host_processors_per_node=2)
    base.update(overrides)
    return base


def read(text: str):  # -> SystemFacts
    return read_system_desc(text.encode(), "org/systems/sys.json", "4.0.0")


def test_a_duplicate_count_in_a_system_description_is_an_error() -> None:
    text = json.dumps(system())[:-1] + ', "number_of_nodes": 1000}'
    facts = read(text)
    (finding,) = [f for f in facts.findings if f.rule == "duplicate-key"]
    assert finding.severity == "error" and "number_of_nodes" in finding.message
    assert facts.accelerator_count == 8000


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e400", "9" * 5001])
def test_unstorable_numbers_in_a_system_description_are_findings_and_become_null(literal: str) -> None:
    text = json.dumps(system(hw_notes=0)).replace('"hw_notes": 0', f'"hw_notes": {literal}')
    facts = read(text)
    assert facts.parsed and facts.description["hw_notes"] is None
    assert [f.severity for f in facts.findings if f.checker == "sanity"] == ["warning"]
    assert jsonscan.clean(facts.description)[1] == []


@pytest.mark.parametrize("nodes", [MAX_COUNT + 1, 10**18, "9" * 5001])
def test_implausible_counts_are_errors_and_not_kept(nodes: object) -> None:
    text = json.dumps(system(number_of_nodes=0)).replace('"number_of_nodes": 0', f'"number_of_nodes": {nodes}')
    facts = read(text)
    assert facts.number_of_nodes is None and facts.accelerator_count is None
    assert any(f.severity == "error" for f in facts.findings)


def test_a_product_of_plausible_counts_can_still_be_implausible() -> None:
    facts = read(json.dumps(system(number_of_nodes=100_000, accelerators_per_node=1000)))
    assert facts.number_of_nodes == 100_000 and facts.accelerator_count is None
    assert any("more than" in f.message for f in facts.findings)


def test_the_largest_plausible_system_is_kept() -> None:
    facts = read(json.dumps(system(number_of_nodes=MAX_COUNT // 8, accelerators_per_node=8)))
    assert facts.accelerator_count == MAX_COUNT and not facts.findings


# --- the upload screen --------------------------------------------------------------------------------------


def log_with_line(length: int, *, at: int = 3, newline: str = "\n") -> bytes:
    lines = [mllog("submission_benchmark", '"resnet"')] * (at - 1) + ["x" * length, mllog("run_start")]
    return newline.join(lines).encode()


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_line_at_the_limit_passes_the_screen(newline: str) -> None:
    check_log_text("org/results/sys/resnet/result_0.txt", io.BytesIO(log_with_line(MAX_LINE_BYTES, newline=newline)))


@pytest.mark.parametrize("length", [MAX_LINE_BYTES + 1, 10_000_000])
def test_a_longer_line_is_refused_naming_file_and_line(length: int) -> None:
    with pytest.raises(BundleRejected) as refused:
        check_log_text("org/results/sys/resnet/result_4.txt", io.BytesIO(log_with_line(length, at=7)))
    message = str(refused.value)
    assert "org/results/sys/resnet/result_4.txt line 7" in message and "64.0 KiB" in message


def test_the_line_limit_is_a_setting_of_the_limits() -> None:
    with pytest.raises(BundleRejected, match="line 3"):
        check_log_text("f", io.BytesIO(log_with_line(2000)), Limits(max_line_bytes=1000).max_line_bytes)


def test_a_form_upload_with_a_long_line_is_refused(tmp_path: Path) -> None:
    description = LooseFile("sys.json", json.dumps(system()).encode())
    good = LooseFile("result_0.txt", log_with_line(10))
    bad = LooseFile("result_1.txt", log_with_line(MAX_LINE_BYTES + 1, at=2))
    with pytest.raises(BundleRejected, match=r"result_1\.txt line 2"):
        pack_loose_files(organization="org", system_json=description, result_files=[good, bad], benchmark="resnet",
                         limits=Limits())


def test_an_archive_with_a_long_line_is_refused_and_nothing_stays(tmp_path: Path) -> None:
    members = {
        "org/systems/sys.json": json.dumps(system()).encode(),
        "org/results/sys/resnet/result_0.txt": log_with_line(MAX_LINE_BYTES + 1, at=5),
    }
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "out"
    with pytest.raises(BundleRejected, match=r"org/results/sys/resnet/result_0\.txt line 5"):
        extract_bundle(archive, dest, limits=Limits())
    assert list(dest.iterdir()) == []


def test_a_system_description_with_a_huge_number_passes_the_screen() -> None:
    # Not a refusal: verification reports it as a finding, with the rest of the description.
    check_system_json("org/systems/sys.json", json.dumps(system(hw_notes=0)).replace("0", "9" * 5001, 1).encode())


def test_an_oversized_system_description_is_refused() -> None:
    big = json.dumps(system(hw_notes="x" * (Limits().max_system_json_bytes + 1))).encode()
    with pytest.raises(BundleRejected, match=r"at most 256\.0 KiB"):
        check_system_json("org/systems/sys.json", big)


def _passes_line_by_line(data: bytes, max_line_bytes: int) -> bool:
    """The screen's own loop alone (a stream that cannot seek skips the whole-log pass)."""

    class Unseekable(io.BytesIO):
        def seekable(self) -> bool:
            return False

    try:
        check_log_text("f", Unseekable(data), max_line_bytes)
    except BundleRejected:
        return False
    return True


@pytest.mark.parametrize("slice_bytes", [1, 2, 3, 5, 2**20])
def test_the_whole_log_pass_decides_as_the_line_by_line_screen(slice_bytes: int, monkeypatch) -> None:
    """Logs made of the pieces that matter (each newline, valid and broken UTF-8, a surrogate, NUL), random
    but seeded, read in slices of every size (a line, a CR LF or a UTF-8 sequence cut between two): the fast
    pass passes exactly the logs the loop passes."""
    import random

    from ingest.bundles import layout

    monkeypatch.setattr(layout, "_SLICE_BYTES", slice_bytes)

    def _passes_whole(data: bytes, limit: int) -> bool:
        return layout._passes_whole(io.BytesIO(data), limit)

    pieces = [b"a", b"xyz", b"\n", b"\r", b"\r\n", b"\xc3\xa9", b"\xc3", b"\xa9", b"\x80", b"\xed\xa0\x80",
              b"\xf0\x9f\x9a\x80", b"\xf0\x9f", b"\x00", b"\xff", b"\x0b", b"\x0c", b"\x1c", b"\x1e", b"\x85",
              b"\xc2\x85", b"\xe2\x80\xa8"]
    chooser = random.Random(20261205)
    passed = refused = 0
    for _ in range(3000):
        data = b"".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 14)))
        limit = chooser.randint(0, 8)
        expected = _passes_line_by_line(data, limit)
        assert _passes_whole(data, limit) == expected, (data, limit)
        passed, refused = passed + expected, refused + (not expected)
    assert passed > 300 and refused > 300  # both kinds were tried


def test_a_log_refused_by_the_whole_pass_is_named_by_its_first_line_at_fault() -> None:
    data = b"ok\r\n" + b"x" * 20 + b"\nfine\n\xc3 broken\n"
    with pytest.raises(BundleRejected, match="line 2 is"):
        check_log_text("f", io.BytesIO(data), 10)
    with pytest.raises(BundleRejected, match="line 4 is not valid UTF-8"):
        check_log_text("f", io.BytesIO(data), 100)
