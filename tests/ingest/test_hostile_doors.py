"""Hostile bundles through every door a submitter has — the REST API, the web page and the command-line
client — end in a clear refusal or a final verdict with findings, never in a half-stored submission and
never in an official score that is not positive and at least a second (issue 10). The engine-level
cases and their neighbours are in tests/ingest/engine/test_hostile*.py; these check the doors."""

from __future__ import annotations

import io
import json
import math
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from django.test import Client
from rest_framework.test import APIClient

from ingest.cli.main import main as cli_main
from ingest.models import Result, Submission
from tests.people import PASSWORD, make_people, open_round, tar_gz_of, token_for

TOKEN = ":::MLLOG "


def _records(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def _edit_key(path: Path, key: str, rewrite: Callable[[dict], str]) -> None:
    lines = _records(path)
    for i, line in enumerate(lines):
        if TOKEN in line and f'"key": "{key}"' in line:
            head, body = line.split(TOKEN, 1)
            lines[i] = head + TOKEN + rewrite(json.loads(body)) + "\n"
            path.write_text("".join(lines))
            return
    raise AssertionError(f"{path} logs no {key}")


def _every_log(folder: Path) -> list[Path]:
    return sorted((folder / "results").glob("*/*/result_*.txt"))


def duplicate_time_ms(folder: Path) -> None:
    # JSON keeps the last key: run_stop at 1 ms would make every run millions of minutes negative.
    for log in _every_log(folder):
        _edit_key(log, "run_stop", lambda r: json.dumps(r)[:-1] + ', "time_ms": 1}')


def nan_time(folder: Path) -> None:
    for log in _every_log(folder):
        _edit_key(log, "run_stop", lambda r: json.dumps({**r, "time_ms": "X"}).replace('"X"', "NaN"))


def huge_integer(folder: Path) -> None:
    for log in _every_log(folder):
        _edit_key(log, "run_stop", lambda r: json.dumps({**r, "time_ms": "X"}).replace('"X"', "9" * 5001))


def sub_second(folder: Path) -> None:
    for log in _every_log(folder):
        start = next(json.loads(line.split(TOKEN, 1)[1])["time_ms"] for line in _records(log)
                     if '"key": "run_start"' in line)
        _edit_key(log, "run_stop", lambda r, start=start: json.dumps({**r, "time_ms": start + 400}))


def scaling(factor: str) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        for bench in {log.parent for log in _every_log(folder)}:
            (bench / "scaling.json").write_text(f'{{"scaling_factor": {factor}}}')
    return write


def long_line(folder: Path) -> None:
    log = _every_log(folder)[0]
    # Random text: a run of one letter compresses so well that the archive-bomb check refuses it first.
    log.write_text(log.read_text() + TOKEN + '{"key": "x", "value": "' + secrets.token_hex(2**20) + '"}\n')


CASES = {
    "a second time_ms on run_stop": duplicate_time_ms,
    "NaN as a time": nan_time,
    "a 5,001-digit time": huge_integer,
    "sub-second runs": sub_second,
    "scaling.json 1e-9": scaling("1e-9"),
    "scaling.json 1e308": scaling("1e308"),
    "scaling.json 0.5": scaling("0.5"),
    "scaling.json malformed": scaling('"fast"'),
    "a 2 MB line": long_line,
}


def hostile_bundle(demo_tree, tmp_path: Path, case: str) -> bytes:
    root, manifest = demo_tree
    source = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    folder = tmp_path / case.replace(" ", "_") / "Larkspur_Compute"
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(source / "systems/atlas_lx4_n1.json", folder / "systems/atlas_lx4_n1.json")
    shutil.copytree(source / "results/atlas_lx4_n1/bert", folder / "results/atlas_lx4_n1/bert")
    CASES[case](folder)
    return tar_gz_of(folder)


def assert_ended_well(status: int, body: str) -> None:
    """A refusal that says why, or a final verdict; never a platform error, never an implausible score."""
    assert status in (200, 201, 302, 400), (status, body[:500])
    for submission in Submission.objects.all():
        assert submission.is_final and submission.state != Submission.State.ERROR, submission.error_detail
        assert submission.findings.filter(severity="error").exists()
    for result in Result.objects.all():
        assert not result.is_official, (result.score, list(result.findings.values_list("message", flat=True)))
        assert result.score is None or (math.isfinite(result.score) and result.score >= 1 / 60)
    if status == 400:
        assert not Submission.objects.exists() and body.strip()


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(CASES))
def test_the_api_refuses_or_judges_a_hostile_bundle(case, demo_tree, tmp_path, django_capture_on_commit_callbacks):
    people = make_people()
    open_round()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(people.alice)}")
    handle = io.BytesIO(hostile_bundle(demo_tree, tmp_path, case))
    handle.name = "bundle.tar.gz"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/v1/submissions/", {"round": "open-v4.0", "bundle": handle}, format="multipart")
    assert_ended_well(response.status_code, response.content.decode())
    if case == "a 2 MB line":
        assert response.status_code == 400 and "result_" in response.json()["detail"] and "line" in \
            response.json()["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(CASES))
def test_the_web_page_refuses_or_judges_a_hostile_bundle(case, demo_tree, tmp_path,
                                                         django_capture_on_commit_callbacks):
    make_people()
    open_round()
    web = Client()
    web.login(username="alice", password=PASSWORD)
    handle = io.BytesIO(hostile_bundle(demo_tree, tmp_path, case))
    handle.name = "bundle.tar.gz"
    with django_capture_on_commit_callbacks(execute=True):
        response = web.post("/submit/", {"round": "open-v4.0", "bundle": handle})
    assert_ended_well(response.status_code, response.content.decode())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", ["a second time_ms on run_stop", "scaling.json 1e308", "a 2 MB line"])
def test_the_command_line_client_refuses_or_judges_a_hostile_bundle(case, demo_tree, tmp_path, live_server,
                                                                    monkeypatch, capsys):
    people = make_people()
    open_round()
    bundle = tmp_path / "hostile.tar.gz"
    bundle.write_bytes(hostile_bundle(demo_tree, tmp_path, case))
    monkeypatch.setenv("PODIUM_TOKEN", token_for(people.alice))
    code = cli_main(["submit", "--server", live_server.url, "--round", "open-v4.0", "--timeout", "120", str(bundle)])
    captured = capsys.readouterr()
    if case == "a 2 MB line":
        assert code not in (0, 1) and "line" in captured.err and not Submission.objects.exists()
    else:
        assert code == 1, captured  # a final verdict: noncompliant, with findings printed
    assert_ended_well(400 if case == "a 2 MB line" else 201, captured.err + captured.out)
