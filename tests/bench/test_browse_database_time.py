"""The browse bench's lower bound (its floor plus the database's own time for a page's reads) counts every
read of the page: on PostgreSQL the results page's rows come from one statement starting with WITH, which
an earlier version left out, so the bound it printed lacked the page's main query."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from bench.browse import database_time, page_reads
from tests.factories import ResultFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the database writes the page on PostgreSQL only"),
]


def test_the_page_s_reads_include_the_statement_that_writes_its_rows() -> None:
    ResultFactory(benchmark_key="resnet", division="closed", score=12.5)
    user = get_user_model().objects.create_user("reader", password="x")
    visitor = Client()
    visitor.force_login(user)
    cookie = f"sessionid={visitor.cookies['sessionid'].value}"
    path = "/api/v1/results/?benchmark=resnet&division=closed&ordering=score&page_size=100"
    body = visitor.get(path).json()
    assert [row["score"] for row in body["results"]] == [12.5]

    reads = page_reads(path, cookie)
    assert any(sql.startswith("WITH podium_page") for sql in reads), reads
    assert database_time(path, cookie, repeat=1)[0] == len(reads)
