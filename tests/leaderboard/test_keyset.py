"""Deep pages of the API's lists by cursor (leaderboard.keyset): walking a list by its `next` links gives every
row once, in the list's order, exactly as walking it by page numbers, whatever the ordering (ties, missing
values, descending keys), on the SQL path and the Python path, signed in or not; a cursor's page is read
without OFFSET; a cursor written by hand is refused with a 404 and changes nothing."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from unittest import mock

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ingest.models import Result
from leaderboard import api, api_sql
from tests.factories import BenchmarkFactory, FindingFactory, ResultFactory, RoundFactory, RunFactory, SystemFactory
from tests.people import People, make_people

pytestmark = pytest.mark.django_db

SCORES = [3.0, None, 1.5, 3.0, None, 2.0, 1.5, 9.0, 3.0, 0.5]  # ties and missing values
SIZES = [8, 16, 8, 64, 8, 16, 1, 8, 16, 64]


@pytest.fixture(autouse=True)
def shallow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Cursors from the third row on (the site's bound, 1,000 rows, would need that many rows)."""
    monkeypatch.setattr(api, "KEYSET_FROM", 3)
    cache.clear()
    yield


@pytest.fixture
def people() -> People:
    """Two published rounds and one under embargo (its results have no publication date: Acme's show only to
    Acme's members), each with results of both organizations."""
    made = make_people()
    for slug, published in [("ks-v1.0", True), ("ks-v2.0", True), ("ks-v3.0", False)]:
        round_ = RoundFactory(slug=slug, **({} if published else {"publication_date": None}))
        for key in ("resnet", "bert"):
            benchmark = BenchmarkFactory(round=round_, key=key)
            for i, (score, size) in enumerate(zip(SCORES, SIZES, strict=True)):
                organization = made.acme if i % 2 else made.zeta
                system = SystemFactory(round=round_, organization=organization, accelerator_count=size)
                result = ResultFactory(system=system, benchmark=benchmark, score=score,
                                       energy_kwh=None if i % 3 else float(i), accelerator_count=size)
                if i == 0 and key == "resnet":
                    for position in range(3):
                        RunFactory(result=result, position=position)
                    FindingFactory(result=result)
                    FindingFactory(result=None, submission=result.submission)  # about the whole submission
    return made


def walk_by_links(client: Client, url: str) -> tuple[list[int], int]:
    ids: list[int] = []
    cursors = 0
    while url:
        response = client.get(url)
        assert response.status_code == 200, (url, response.content[:300])
        body = response.json()
        ids += [row["id"] for row in body["results"]]
        url = (body["next"] or "").replace("http://testserver", "")
        cursors += "cursor=" in url
    return ids, cursors


def walk_by_numbers(client: Client, url: str) -> list[int]:
    ids: list[int] = []
    number = 1
    while True:
        body = client.get(f"{url}&page={number}").json()
        ids += [row["id"] for row in body["results"]]
        if not body["next"]:
            return ids
        number += 1


def client_for(people: People, who: str) -> Client:
    client = Client()
    if who == "member":
        client.force_login(people.alice)
    return client


@pytest.mark.parametrize("path", ["sql", "python"])
@pytest.mark.parametrize("who", ["anonymous", "member"])
@pytest.mark.parametrize("ordering", ["", "score", "-score", "-accelerators,score", "energy_kwh,-hosts",
                                      "-raw_score"])
def test_a_walk_by_next_links_gives_every_row_once_in_order(people: People, path: str, who: str,
                                                              ordering: str) -> None:
    client = client_for(people, who)
    url = f"/api/v1/results/?page_size=4{f'&ordering={ordering}' if ordering else ''}"
    with mock.patch.object(api_sql, "usable", return_value=False) if path == "python" else mock.MagicMock():
        by_links, cursors = walk_by_links(client, url)
        by_numbers = walk_by_numbers(client, url)
    assert by_links == by_numbers
    assert len(by_links) == len(set(by_links)) == client.get(url).json()["count"]
    assert cursors >= 5  # not vacuous: most of the walk went by cursor
    if who == "member":  # the embargoed round's own results, whose publication date is missing, are in it
        assert len(by_links) == 50
    else:
        assert len(by_links) == 40


@pytest.mark.parametrize(("path", "count"), [("/api/v1/runs/?page_size=1", 9), ("/api/v1/findings/?page_size=1", 6)])
def test_runs_and_findings_lists_walk_by_cursor_too(people: People, path: str, count: int) -> None:
    client = Client()
    client.force_login(people.staff)  # findings about a whole submission (no result) are staff's alone
    by_links, cursors = walk_by_links(client, path)
    assert by_links == walk_by_numbers(client, path) and len(by_links) == count
    assert cursors > 0


def test_a_cursor_s_page_is_read_without_offset_and_links_back_by_number(people: People) -> None:
    client = Client()
    second = client.get("/api/v1/results/?page_size=4&ordering=score").json()["next"]
    third = client.get(second).json()["next"]
    assert "cursor=" in third and "page=" not in third
    with CaptureQueriesContext(connection) as captured:
        body = client.get(third).json()
    assert not any("OFFSET" in query["sql"].upper() for query in captured.captured_queries)
    # The count was kept when page 1 was read: a cursor is no filter, it counts nothing again.
    assert not any("COUNT(" in query["sql"].upper() for query in captured.captured_queries)
    assert body["previous"].endswith("?ordering=score&page=2&page_size=4") or "page=2" in body["previous"]
    assert "cursor=" not in body["previous"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the SQL path (leaderboard.api_sql)")
def test_a_cursor_s_page_reads_its_ids_once(people: People) -> None:
    """The cursor's parts read the page's ids in order: its rows are read by those ids, with no query of the
    ids again (there was one: the ids in an IN list, filtered and sorted again)."""
    client = Client()
    second = client.get("/api/v1/results/?page_size=4&ordering=score").json()["next"]
    third = client.get(second).json()["next"]
    by_number = client.get("/api/v1/results/?page_size=4&ordering=score&page=3").json()
    with CaptureQueriesContext(connection) as captured:
        body = client.get(third).json()
    assert [row["id"] for row in body["results"]] == [row["id"] for row in by_number["results"]]
    assert len(body["results"]) == 4
    reads = [query["sql"] for query in captured.captured_queries]
    assert not [sql for sql in reads if sql.startswith('SELECT "ingest_result"."id" AS "pk"')], reads
    assert sum(sql.startswith("WITH podium_page") for sql in reads) == 1, reads


def test_a_row_moved_between_two_parts_reads_is_listed_once(people: People) -> None:
    """A cursor's page is read part after part: a row whose score changes between two of those reads (here
    the one tied with the cursor's row, moved just past it) is read twice, and listed once."""
    client = Client()
    first = client.get("/api/v1/results/?page_size=3&ordering=score").json()
    cursor = first["next"].split("cursor=", 1)[1].split("&", 1)[0]
    score, last_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))["v"]
    tied = Result.objects.filter(score=score, pk__gt=last_id, is_current=True, round__slug__in=["ks-v1.0", "ks-v2.0"])
    assert tied.exists()  # the cursor's first part (equal score, greater id) reads it
    moved: list[str] = []

    def move_after_the_first_part(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        done = execute(sql, params, many, context)
        if not moved and sql.startswith('SELECT "ingest_result"."score"'):
            moved.append(sql)
            tied.update(score=score + 0.01)  # the next part (a greater score) reads it again
        return done

    with connection.execute_wrapper(move_after_the_first_part):
        body = client.get(first["next"]).json()
    assert moved
    ids = [row["id"] for row in body["results"]]
    assert len(ids) == len(set(ids)), ids


def token(body: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")


GOOD = {"o": ["score", "id"], "v": [1.5, 1], "p": 3}


@pytest.mark.parametrize("cursor", [
    "not base64 at all!",
    token("a string"),
    base64.urlsafe_b64encode(b"\xff\xfe not json").decode(),
    token({"o": ["score", "id"], "v": [1.5], "p": 3}),  # too few values
    token({**GOOD, "o": ["-score", "id"]}),  # another ordering
    token({**GOOD, "v": ["fast", 1]}),  # not a number
    token({**GOOD, "v": [[1], 1]}),
    token({**GOOD, "v": [True, 1]}),
    token({**GOOD, "v": [1.5, None]}),  # the id is never missing
    token({**GOOD, "p": 1}),
    token({**GOOD, "p": "3"}),
    token({"v": [1.5, 1], "p": 3}),
    "A" * 5000,
    base64.urlsafe_b64encode(b"[" * 3000).decode(),  # nested deeper than the parser goes
    base64.urlsafe_b64encode(json.dumps({**GOOD, "v": [1, 1]}).replace("[1, 1]", "[1" + "0" * 400 + ", 1]")
                             .encode()).decode(),  # a number no float holds
    token({**GOOD, "v": [1.5, 2**70]}),  # an id no column holds
])
def test_a_cursor_written_by_hand_is_refused(people: People, cursor: str) -> None:
    response = Client().get(f"/api/v1/results/?ordering=score&page_size=4&cursor={cursor}")
    assert response.status_code == 404
    assert "cursor" in response.json()["detail"].lower()


def test_a_hand_made_cursor_names_only_a_position_among_what_the_caller_may_see(people: People) -> None:
    """A member sees the embargoed round's results of their organization; a cursor made by someone else
    cannot open the others' (each page is still filtered by what the caller may see)."""
    client = Client()
    rows, _ = walk_by_links(client, f"/api/v1/results/?ordering=score&page_size=4&cursor={token(GOOD)}")
    visible = set(walk_by_numbers(client, "/api/v1/results/?ordering=score&page_size=4"))
    assert rows and set(rows) <= visible


DEFAULT = ["-round_publication_date", "benchmark_key", "score", "id"]


@pytest.mark.parametrize("values", [
    ["0001-01-01T00:00:00+05:00", "resnet", 1.5, 1],  # a date no time zone can move within range
    ["2026-01-01T00:00:00", "resnet", 1.5, 1],  # no time zone
    ["2026-01-01T00:00:00+00:00", "res\u0000net", 1.5, 1],  # NUL, which PostgreSQL's text cannot hold
    ["2026-01-01T00:00:00+00:00", "\ud800", 1.5, 1],  # a lone surrogate: valid JSON, not UTF-8
    ["yesterday", "resnet", 1.5, 1],
])
def test_hand_made_values_the_database_would_refuse_are_refused_first(people: People, values: list) -> None:
    cursor = token({"o": DEFAULT, "v": values, "p": 3})
    response = Client().get(f"/api/v1/results/?page_size=4&cursor={cursor}")
    assert response.status_code == 404 and "cursor" in response.json()["detail"].lower()


def test_a_walk_gives_every_row_that_stays_once_while_rows_come_and_go(people: People) -> None:
    client = Client()
    url = "/api/v1/results/?page_size=4&ordering=score"
    seen: list[int] = []
    for _ in range(4):  # past the third row: the next link is a cursor
        body = client.get(url).json()
        seen += [row["id"] for row in body["results"]]
        url = body["next"]
    assert "cursor=" in url
    before = set(walk_by_numbers(client, "/api/v1/results/?page_size=4&ordering=score"))
    # Rows already read go (fewer pages than the cursor's number says), rows come before and after the cursor.
    gone = seen[:6]
    Result.objects.filter(pk__in=gone).update(is_current=False)
    shown = Result.objects.filter(pk=seen[0]).get()
    made = [ResultFactory(system=SystemFactory(round=shown.round, organization=shown.organization),
                          benchmark=shown.benchmark, score=score).pk for score in (0.1, 99.0)]
    cache.clear()
    while url:
        body = client.get(url).json()
        seen += [row["id"] for row in body["results"]]
        url = body["next"]
    assert len(seen) == len(set(seen))  # nothing twice
    assert before - set(gone) <= set(seen)  # nothing that stayed was skipped
    assert made[1] in seen and made[0] not in seen  # added after the cursor: read; before it: not


def test_a_cursor_on_the_last_row_ends_the_walk_whatever_page_it_names(people: People) -> None:
    client = Client()
    rows = walk_by_numbers(client, "/api/v1/results/?page_size=4&ordering=score")
    last = Result.objects.get(pk=rows[-1])
    for page in (2, 5, 10):
        cursor = token({"o": ["score", "id"], "v": [last.score, last.pk], "p": page})
        body = client.get(f"/api/v1/results/?page_size=4&ordering=score&cursor={cursor}").json()
        assert body["results"] == [] and body["next"] is None
    first = Result.objects.get(pk=rows[3])  # the end of page 1, with a page number far too high
    cursor = token({"o": ["score", "id"], "v": [first.score, first.pk], "p": 10})
    walked, _ = walk_by_links(client, f"/api/v1/results/?page_size=4&ordering=score&cursor={cursor}")
    assert walked == rows[4:]


def test_the_browsable_api_s_page_links_drop_the_cursor(people: People) -> None:
    client = Client()
    third = client.get(client.get("/api/v1/results/?page_size=4&ordering=score").json()["next"]).json()["next"]
    assert "cursor=" in third
    html = client.get(third.replace("http://testserver", ""), HTTP_ACCEPT="text/html").content.decode()
    numbered = [line for line in html.splitlines() if "page=" in line and "href" in line]
    assert numbered and not any("cursor=" in line and "page=" in line for line in numbered)
