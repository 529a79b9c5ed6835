from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from ingest.models import Result, System
from tests.factories import (
    BenchmarkFactory,
    FindingFactory,
    OrganizationFactory,
    ResultFactory,
    RoundFactory,
    RunFactory,
    SystemFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def round_with_results():
    round_ = RoundFactory(slug="training-v9.9", name="MLPerf Training v9.9")
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50", position=0)
    bert = BenchmarkFactory(round=round_, key="bert", name="BERT", position=1, required_runs=10)
    acme = OrganizationFactory(name="Acme")
    zeta = OrganizationFactory(name="Zeta")
    closed_cloud = SystemFactory(round=round_, organization=acme, slug="acme-64", name="Acme 64",
                                 accelerator_count=64, number_of_nodes=8, system_type=System.SystemType.CLOUD)
    open_preview = SystemFactory(round=round_, organization=zeta, slug="zeta-8", name="Zeta 8",
                                 division=System.Division.OPEN, category=System.Category.PREVIEW)
    r1 = ResultFactory(system=closed_cloud, benchmark=resnet, score=2.5)
    ResultFactory(system=closed_cloud, benchmark=bert, score=7.25, runs_count=10, runs_required=10)
    r3 = ResultFactory(system=open_preview, benchmark=resnet, score=None, verdict=Result.Verdict.NONCOMPLIANT,
                       no_score_reason="3 of 5 required runs")
    return round_, r1, r3


def test_home_lists_published_rounds_with_results(client: Client, round_with_results) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert b"MLPerf Training v9.9" in response.content


def test_round_table_has_systems_as_rows_and_benchmarks_as_columns(client: Client, round_with_results) -> None:
    response = client.get("/rounds/training-v9.9/")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.index("ResNet-50") < html.index("BERT")
    assert "2.50" in html and "7.25" in html
    assert "Closed division" in html and "Open division" in html
    assert "no score" in html  # the noncompliant open result keeps its cell, without a score
    assert ">64<" in html and "Cloud" in html  # scale and type beside the row


@pytest.mark.parametrize(
    ("query", "present", "absent"),
    [
        ("division=open", "Zeta 8", "Acme 64"),
        ("category=preview", "Zeta 8", "Acme 64"),
        ("system_type=cloud", "Acme 64", "Zeta 8"),
        ("division=closed&system_type=on_premises", "No results match", "Acme 64"),
    ],
)
def test_round_table_filters_through_the_query_string(client: Client, round_with_results, query, present,
                                                      absent) -> None:
    html = client.get(f"/rounds/training-v9.9/?{query}").content.decode()
    assert present in html
    assert absent not in html


def test_unknown_filter_values_are_ignored(client: Client, round_with_results) -> None:
    html = client.get("/rounds/training-v9.9/?division=<script>&category=x").content.decode()
    assert "Acme 64" in html and "Zeta 8" in html
    assert "<script>" not in html


def test_result_page_shows_how_to_recompute_the_score(client: Client, round_with_results) -> None:
    _, result, _ = round_with_results
    for position, minutes in enumerate([9.0, 10.0, 11.0, 12.0, 13.0]):
        dropped = "fastest" if minutes == 9.0 else "slowest" if minutes == 13.0 else ""
        RunFactory(result=result, position=position, time_to_train_min=minutes, dropped=dropped)
    result.raw_score, result.scaling_factor, result.score = 11.0, 1.02, 11.22
    result.save()
    FindingFactory(result=result, severity="info", checker="rcp", rule="resnet", file="x", line=None,
                   message="RCP check passed: RCP found")
    html = client.get(f"/results/{result.pk}/").content.decode()
    assert "(10.0 + 11.0 + 12.0) / 3" in html
    assert "11.0 × 1.02 = <strong>11.22</strong>" in html
    assert "dropped: fastest" in html and "dropped: slowest" in html
    assert "RCP check passed" in html


def test_result_page_lists_run_findings_with_file_and_line(client: Client, round_with_results) -> None:
    _, _, noncompliant = round_with_results
    run = RunFactory(result=noncompliant, position=0, compliant=False, counted=False, dropped="failed",
                     time_to_train_min=None, status="aborted")
    FindingFactory(result=noncompliant, run=run, line=194, excerpt=':::MLLOG {"key": "eval_accuracy"}')
    html = client.get(f"/results/{noncompliant.pk}/").content.decode()
    assert "at line 194" in html and "eval_accuracy" in html
    assert "No official score: 3 of 5 required runs" in html


def test_system_page_shows_every_description_field(client: Client, round_with_results) -> None:
    _, result, _ = round_with_results
    system = result.system
    system.description = {"system_name": "Acme 64", "cooling": "liquid", "other_software_stack": {"cuda": "12.4"}}
    system.save()
    html = client.get(f"/systems/{system.pk}/").content.decode()
    assert "cooling" in html and "liquid" in html and "cuda" in html
    assert "ResNet-50" in html and "BERT" in html


def test_unpublished_rounds_are_hidden_from_visitors_but_not_staff(client: Client, round_with_results) -> None:
    round_, result, _ = round_with_results
    round_.publication_date = timezone.now() + datetime.timedelta(days=3)
    round_.save()
    assert client.get("/rounds/training-v9.9/").status_code == 404
    assert client.get(f"/results/{result.pk}/").status_code == 404
    assert client.get(f"/systems/{result.system.pk}/").status_code == 404
    assert b"v9.9" not in client.get("/").content
    staff = get_user_model().objects.create_user("chair", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get("/rounds/training-v9.9/").status_code == 200
    assert client.get(f"/results/{result.pk}/").status_code == 200


def test_table_page_query_count_does_not_grow_with_rows(client: Client) -> None:
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for slug, rows in (("small", 3), ("big", 30)):
        round_ = RoundFactory(slug=slug)
        bench = BenchmarkFactory(round=round_)
        for _ in range(rows):
            ResultFactory(system=SystemFactory(round=round_), benchmark=bench)
        cache.clear()
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/rounds/{slug}/").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
