from __future__ import annotations

import json

from ingest.engine.system_desc import REQUIRED_FIELDS, judge_tool_verdict, read_system_desc


def description(**overrides: object) -> bytes:
    base = {key: "" for key in REQUIRED_FIELDS}
    base.update(submitter="Acme", division="closed", status="Available cloud", system_name="acme-8x",
                number_of_nodes="2", accelerators_per_node="8", host_processors_per_node="2")
    base.update(overrides)
    return json.dumps(base).encode()


def test_derives_scale_category_and_type() -> None:
    facts = read_system_desc(description(), "Acme/systems/acme.json", "4.1.0")
    assert (facts.accelerator_count, facts.host_processor_count, facts.number_of_nodes) == (16, 4, 2)
    assert (facts.category, facts.system_type, facts.division) == ("available", "cloud", "closed")
    assert facts.findings == []


def test_cpu_only_system_has_zero_accelerators() -> None:
    facts = read_system_desc(description(accelerators_per_node="0", accelerator_model_name="N/A"), "f", "4.1.0")
    assert facts.accelerator_count == 0


def test_values_the_rules_do_not_allow_are_findings() -> None:
    facts = read_system_desc(description(division="closedish", status="soon", number_of_nodes="two"), "f", "4.1.0")
    rules = {f.rule: f.severity for f in facts.findings}
    assert rules == {"division": "error", "status": "error", "number_of_nodes": "error"}
    assert facts.division == "" and facts.category == "" and facts.accelerator_count is None


def test_unparsable_json_points_at_the_line() -> None:
    facts = read_system_desc(b'{\n  "submitter": "Acme",\n  "division": closed\n}', "Acme/systems/x.json", "4.0.0")
    assert not facts.parsed
    assert facts.findings[0].rule == "json" and facts.findings[0].line == 3


def test_non_object_non_utf8_and_missing_files() -> None:
    assert read_system_desc(b"[1]", "f", "4.0.0").findings[0].message.startswith("must be a JSON object")
    assert "UTF-8" in read_system_desc(b'{"a": "\xff"}', "f", "4.0.0").findings[0].message
    assert "missing" in read_system_desc(None, "Acme/systems/x.json", "4.0.0").findings[0].message


def test_status_quirk_of_the_tool_is_a_warning_for_4_0_and_an_error_later() -> None:
    reason = "Field status contains a non valid value: onprem, must be one of [...]"
    old = read_system_desc(description(status="onprem"), "f", "4.0.0")
    judge_tool_verdict(old, False, [reason], None, "4.0.0")
    # The v4.0 checker accepted "onprem"; the strict list came later (191ed2c), so a warning naming it.
    assert [(f.checker, f.rule, f.severity) for f in old.findings] == [("later_rule", "191ed2c", "warning")]
    new = read_system_desc(description(status="onprem"), "f", "4.1.0")
    judge_tool_verdict(new, False, [reason], None, "4.1.0")
    assert [(f.checker, f.severity) for f in new.findings] == [("system_desc", "error")]


def test_missing_fields_reported_by_the_tool_name_the_field() -> None:
    facts = read_system_desc(description(), "f", "4.1.0")
    judge_tool_verdict(facts, False, ["Missing field cooling"], None, "4.1.0")
    assert [(f.rule, f.severity) for f in facts.findings] == [("cooling", "error")]
