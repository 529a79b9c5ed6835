"""The round table's view from the query string: facets, columns, derived metrics, sorting, exports."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from ingest.models import System
from tests.factories import BenchmarkFactory, OrganizationFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def table():
    """Three systems in a published round: a big cloud one, a small one, and an open-division one."""
    round_ = RoundFactory(slug="training-v9.9", name="MLPerf Training v9.9")
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50", position=0)
    bert = BenchmarkFactory(round=round_, key="bert", name="BERT", position=1, required_runs=10)
    acme, zeta, beta = (OrganizationFactory(name=n, slug=n.lower()) for n in ("Acme", "Zeta", "Beta"))
    big = SystemFactory(round=round_, organization=acme, slug="acme-512", name="Acme 512", accelerator_count=512,
                        number_of_nodes=64, system_type=System.SystemType.CLOUD, accelerator_model_name="X200",
                        framework="PyTorch 2.3")
    small = SystemFactory(round=round_, organization=zeta, slug="zeta-8", name="Zeta 8", accelerator_count=8,
                          number_of_nodes=1, accelerator_model_name="X100", framework="JAX 0.4")
    opened = SystemFactory(round=round_, organization=beta, slug="beta-16", name="Beta 16", accelerator_count=16,
                           division=System.Division.OPEN, category=System.Category.RESEARCH)
    # Big system: fastest, but the most accelerator-minutes; small system: slow, but the fewest.
    ResultFactory(system=big, benchmark=resnet, score=1.0, accelerator_minutes=512.0, host_minutes=64.0)
    ResultFactory(system=big, benchmark=bert, score=2.0, accelerator_minutes=1024.0, runs_count=10)
    ResultFactory(system=small, benchmark=resnet, score=20.0, accelerator_minutes=160.0, host_minutes=20.0)
    ResultFactory(system=opened, benchmark=resnet, score=5.0, accelerator_minutes=80.0)
    return round_


def _order(html: str, *names: str) -> list[str]:
    return sorted(names, key=html.index)


def _body(response) -> str:
    """An export's body: exports stream."""
    return b"".join(response.streaming_content).decode()


def test_sorting_by_a_benchmark_ranks_by_the_official_score(client: Client, table) -> None:
    html = client.get("/rounds/training-v9.9/?sort=resnet").content.decode()
    assert _order(html, "Acme 512", "Zeta 8") == ["Acme 512", "Zeta 8"]


def test_switching_to_a_derived_metric_reranks_and_says_it_is_derived(client: Client, table) -> None:
    html = client.get("/rounds/training-v9.9/?sort=resnet&metric=accelerator_minutes").content.decode()
    assert _order(html, "Acme 512", "Zeta 8") == ["Zeta 8", "Acme 512"]
    assert "derived — not an official score" in html
    assert "512.00" in html and "160.00" in html


def test_a_second_click_reverses_the_order(client: Client, table) -> None:
    html = client.get("/rounds/training-v9.9/?sort=resnet&order=desc").content.decode()
    assert _order(html, "Acme 512", "Zeta 8") == ["Zeta 8", "Acme 512"]


def test_rows_without_the_sorted_benchmark_sink_to_the_bottom(client: Client, table) -> None:
    html = client.get("/rounds/training-v9.9/?sort=bert").content.decode()
    assert _order(html, "Acme 512", "Zeta 8") == ["Acme 512", "Zeta 8"]


def test_closed_and_open_are_ranked_separately(client: Client, table) -> None:
    html = client.get("/rounds/training-v9.9/?sort=resnet").content.decode()
    closed, opened = html.index("Closed division"), html.index("Open division")
    assert closed < html.index("Acme 512") < opened < html.index("Beta 16")


@pytest.mark.parametrize(
    ("query", "present", "absent"),
    [
        ("submitter=zeta", ["Zeta 8"], ["Acme 512", "Beta 16"]),
        ("submitter=zeta&submitter=beta", ["Zeta 8", "Beta 16"], ["Acme 512"]),
        ("accelerator_model=X200", ["Acme 512"], ["Zeta 8"]),
        ("framework=jax", ["Zeta 8"], ["Acme 512"]),
        ("acc_min=10&acc_max=100", ["Beta 16"], ["Acme 512", "Zeta 8"]),
        ("benchmark=bert", ["Acme 512"], ["Zeta 8", "Beta 16"]),
        ("category=research", ["Beta 16"], ["Acme 512"]),
        ("system_type=cloud", ["Acme 512"], ["Zeta 8"]),
        ("acc_min=oops&division=bogus", ["Acme 512", "Zeta 8", "Beta 16"], []),
    ],
)
def test_facets_filter_rows(client: Client, table, query, present, absent) -> None:
    html = client.get(f"/rounds/training-v9.9/?{query}").content.decode()
    body = html[html.index("</form>", html.index('id="view-form"')):]  # the filter form lists every choice
    for name in present:
        assert name in body, (query, name)
    for name in absent:
        assert name not in body, (query, name)


def test_the_column_chooser_limits_benchmark_columns(client: Client, table) -> None:
    html = client.get("/rounds/training-v9.9/?cols=bert").content.decode()
    assert 'data-benchmark="bert"' in html and 'th class="num bench-col" data-benchmark="resnet"' not in html


def test_csv_export_of_the_filtered_view_has_its_rows(client: Client, table) -> None:
    response = client.get("/rounds/training-v9.9/export.csv?division=closed&cols=resnet")
    assert response["Content-Disposition"] == 'attachment; filename="podium-training-v9.9-filtered.csv"'
    rows = list(csv.DictReader(io.StringIO(_body(response))))
    assert {(r["system"], r["benchmark"]) for r in rows} == {("acme-512", "resnet"), ("zeta-8", "resnet")}
    assert {r["division"] for r in rows} == {"closed"}
    assert rows[0]["score"] and rows[0]["accelerator_minutes"] and rows[0]["url"].startswith("http://testserver/")


def test_json_export_of_the_whole_round(client: Client, table) -> None:
    data = json.loads(_body(client.get("/rounds/training-v9.9/export.json")))
    assert len(data["results"]) == 4 and "not official scores" in data["derived_note"]


def test_exports_follow_the_embargo(client: Client, table) -> None:
    table.publication_date = None
    table.save()
    assert client.get("/rounds/training-v9.9/export.csv").status_code == 404


def test_anonymous_tables_are_cached_until_a_result_changes(client: Client, table,
                                                           django_capture_on_commit_callbacks) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from core.cache import bump_generation

    with CaptureQueriesContext(connection) as first:
        client.get("/rounds/training-v9.9/?sort=resnet")
    with CaptureQueriesContext(connection) as second:
        cached = client.get("/rounds/training-v9.9/?sort=resnet").content.decode()
    # A hit costs the round's lookup only: its key reads the generation from the cache, not the database.
    assert len(second) == 1 < len(first)
    assert "Zeta 8" in cached
    with django_capture_on_commit_callbacks(execute=True):
        ResultFactory(system=SystemFactory(round=table, organization=OrganizationFactory(name="New", slug="new"),
                                           name="Newcomer 4"), benchmark=table.benchmarks.get(key="resnet"))
        bump_generation()  # what every service that stores a result does (test_invalidation.py)
    assert "Newcomer 4" in client.get("/rounds/training-v9.9/?sort=resnet").content.decode()


def test_a_bump_in_another_process_reaches_a_per_process_cache(client: Client, table) -> None:
    """The embedded default cache is per process: another process's bump (an import) leaves a stamp
    that this one reads (a file, not a query)."""
    from core import cache as generations

    client.get("/rounds/training-v9.9/")
    ResultFactory(system=SystemFactory(round=table, organization=OrganizationFactory(name="New", slug="new"),
                                       name="Newcomer 4"), benchmark=table.benchmarks.get(key="resnet"))
    assert "Newcomer 4" not in client.get("/rounds/training-v9.9/").content.decode()  # this process: no bump
    generations._stamp()  # what _bump_now does in the importing process, besides its own cache
    assert "Newcomer 4" in client.get("/rounds/training-v9.9/").content.decode()


def test_table_query_count_does_not_grow_with_rows(client: Client) -> None:
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(get_user_model().objects.create_user("u"))  # signed in: no cache, every query is real
    counts = []
    for slug, rows in (("small", 4), ("big", 40)):
        round_ = RoundFactory(slug=slug)
        bench = BenchmarkFactory(round=round_)
        for _ in range(rows):
            ResultFactory(system=SystemFactory(round=round_), benchmark=bench)
        cache.clear()  # both cold: the cache keys' per-generation reads count in both
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/rounds/{slug}/?sort=resnet&metric=accelerator_minutes").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
