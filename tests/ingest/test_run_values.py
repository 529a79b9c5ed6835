"""What a run's values read from its log are stored as: a NUL character, which PostgreSQL's text and jsonb refuse, and
a lone surrogate, which has no UTF-8, kept as the text of their escapes wherever they occur; everything else as it
was read, with no copy made of a value that needs no change."""

from __future__ import annotations

import pytest

from ingest.engine.logparse import parse_log
from ingest.models import Run, Submission
from ingest.services import results as results_service
from ingest.services import submissions
from tests.ingest.test_trust import api, item_folder, upload
from tests.people import tar_gz_of

pytestmark = pytest.mark.django_db

NUL_ESCAPE = "\\u0000"  # the six characters of JSON's escape, as a log holds them


def _line(key: str, value: str) -> str:
    return f':::MLLOG {{"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "{key}", ' \
           f'"value": {value}, "metadata": {{"file": "train.py", "lineno": 1}}}}\n'


def test_a_log_may_hold_a_nul_or_a_lone_surrogate_only_where_its_text_escapes_one() -> None:
    assert parse_log(_line("opt_name", '"sgd \\u00e9"').encode(), "r.txt").unsafe_escapes is False
    escaped = parse_log(_line("opt_name", f'"sgd{NUL_ESCAPE}x"').encode(), "r.txt")
    assert escaped.unsafe_escapes is True
    assert escaped.events[0].value == "sgd\x00x"
    for surrogate in ("\\ud800", "\\uDFFF", "\\udbff\\udc00"):  # lone, lone, a pair (not lone, still counted)
        assert parse_log(_line("opt_name", f'"{surrogate}"').encode(), "r.txt").unsafe_escapes is True
    # An escaped backslash before "u0000" holds no NUL; it is only looked at as if it might.
    assert parse_log(_line("opt_name", '"sgd\\\\u0000"').encode(), "r.txt").unsafe_escapes is True


def test_a_nul_in_a_runs_values_is_stored_escaped_and_the_other_runs_as_read(
        people, round_open, demo_tree, tmp_path, django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    logs = sorted((folder / "results").glob("*/*/result_*.txt"))
    with logs[0].open("a") as log:
        log.write(_line("opt_podium_note", f'{{"text": "a{NUL_ESCAPE}b", "list": ["c{NUL_ESCAPE}"]}}'))
    with django_capture_on_commit_callbacks(execute=False):
        pk = upload(api(people.alice), tar_gz_of(folder)).json()["id"]
    assert submissions.submission_verify(submission_id=pk) in (Submission.State.VERIFIED,
                                                               Submission.State.NONCOMPLIANT)
    runs = {run.file.rsplit("/", 1)[-1]: run for run in Run.objects.filter(result__submission_id=pk)}
    assert len(runs) == len(logs)
    assert runs[logs[0].name].hyperparameters["opt_podium_note"] == {"text": "a\\x00b", "list": ["c\\x00"]}
    other = runs[logs[1].name]
    read = parse_log(logs[1].read_bytes(), logs[1].name)
    assert other.hyperparameters == read.hyperparameters() and other.hyperparameters


def test_a_lone_surrogate_in_a_log_is_stored_as_its_escape_and_the_upload_gets_its_verdict(
        people, round_open, demo_tree, tmp_path, django_capture_on_commit_callbacks):
    folder = item_folder(demo_tree, tmp_path)
    logs = sorted((folder / "results").glob("*/*/result_*.txt"))
    with logs[0].open("a") as log:
        log.write(_line("opt_podium_note", '{"text": "a\\ud800b", "\\udfff": ["\\ud83d\\ude00"]}'))
    with django_capture_on_commit_callbacks(execute=False):
        pk = upload(api(people.alice), tar_gz_of(folder)).json()["id"]
    # Not an error of Podium's: the text had no UTF-8 to be stored as.
    assert submissions.submission_verify(submission_id=pk) in (Submission.State.VERIFIED,
                                                               Submission.State.NONCOMPLIANT)
    run = Run.objects.get(result__submission_id=pk, file__endswith=logs[0].name)
    assert run.hyperparameters["opt_podium_note"] == {"text": "a\\ud800b", "\\udfff": ["\U0001f600"]}


def test_a_value_from_a_log_without_a_nul_is_stored_as_it_is_unless_it_needs_cleaning() -> None:
    clean = {"opt_name": "sgd", "steps": [1, 2.5, None, True], "nested": {"k": "v"}}
    assert results_service._log_json(clean, False) is clean  # no copy made
    assert results_service._log_json(clean, True) == clean
    assert results_service._log_json(clean, True) is not clean  # db_safe's copy
    # Where the log may hold a NUL, or a value is not what storable vouches for, db_safe decides.
    assert results_service._log_json({"t": "a\x00b"}, True) == {"t": "a\\x00b"}
    assert results_service._log_json({"t\udc80": ["\ud800é"]}, True) == {"t\\udc80": ["\\ud800é"]}
    assert results_service._log_json({"v": float("nan"), "t": ("x",)}, False) == {"v": "nan", "t": ["x"]}


def test_text_the_database_cannot_hold_in_a_system_description_is_stored_as_its_escape(
        people, round_open, demo_tree, tmp_path, django_capture_on_commit_callbacks):
    import json

    from ingest.models import System

    folder = item_folder(demo_tree, tmp_path)
    (description,) = (folder / "systems").glob("*.json")
    text = description.read_text()
    described = json.loads(text)
    for key in ("system_name", "accelerator_model_name", "host_processor_model_name", "framework"):
        described[key] = f"{described.get(key, '')} a\x00b \ud800"
    description.write_text(json.dumps(described))  # the standard encoder writes both as escapes
    assert "\\u0000" in description.read_text() and "\\ud800" in description.read_text()
    with django_capture_on_commit_callbacks(execute=False):
        pk = upload(api(people.alice), tar_gz_of(folder)).json()["id"]
    assert submissions.submission_verify(submission_id=pk) in (Submission.State.VERIFIED,
                                                               Submission.State.NONCOMPLIANT)
    system = System.objects.get(results__submission_id=pk)
    for stored in (system.name, system.accelerator_model_name, system.host_processor_model_name, system.framework):
        assert stored.endswith(" a\\x00b \\ud800")
    assert system.description["system_name"].endswith(" a\\x00b \\ud800")
