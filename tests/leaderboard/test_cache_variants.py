"""Answers keyed on what a visitor writes (any query string, any scale) are kept only up to a bound per
results generation (leaderboard.cache.room_for_variant): past it they are made for each request and not
kept, so nobody can fill the cache (in production Redis, whose memory the task queue shares) with answers
nobody asks for twice. The bound counts afresh after a change."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.cache import cache
from django.test import Client

from core.cache import bump_generation
from leaderboard import api, chart_views, table, views
from leaderboard import cache as keys
from tests.leaderboard.test_query_counts import Data, signed_in

pytestmark = pytest.mark.django_db


def _kept(name: str) -> int:
    """Entries of `name` kept in the per-process cache for longer than the few seconds an answer past its
    bound is kept (CROWD_S), its counters left out."""
    from leaderboard.cache import CROWD_S

    return sum(1 for key, expiry in cache._expire_info.items()
               if f":podium:{name}:" in key and ":variants:" not in key and expiry - time.time() > CROWD_S)


@pytest.fixture
def data() -> Data:
    made = Data()
    cache.clear()
    return made


def test_a_rounds_page_keeps_no_more_variants_than_the_bound(monkeypatch, data: Data,
                                                             django_capture_on_commit_callbacks) -> None:
    monkeypatch.setattr(views, "ROUND_PAGE_VARIANTS", 2)
    client = Client()
    name = data.shown.system_name
    for n in range(5):
        response = client.get(f"/rounds/{data.newest.slug}/?utm_campaign={n}")
        assert response.status_code == 200 and name in response.content.decode()
    assert _kept("round-page") == 2
    # A kept variant is still served; one past the bound is made again, each time, correctly.
    assert name in client.get(f"/rounds/{data.newest.slug}/?utm_campaign=0").content.decode()
    assert _kept("round-page") == 2
    with django_capture_on_commit_callbacks(execute=True):
        bump_generation(round_id=data.newest.pk)
    client.get(f"/rounds/{data.newest.slug}/?utm_campaign=9")
    assert _kept("round-page") == 3  # the bound counts afresh for the new data


def test_the_apis_anonymous_bodies_keep_no_more_variants_than_the_bound(monkeypatch, data: Data) -> None:
    monkeypatch.setattr(api, "API_BODY_VARIANTS", 2)
    client = Client()
    for _ in range(3):  # answers that are not kept take no room
        assert client.get("/api/v1/results/999999999/").status_code == 404
        assert client.get("/api/v1/results/?round=no-such-round").status_code in (200, 400, 404)
    for size in range(1, 6):
        body = client.get(f"/api/v1/results/?page_size={size}").json()
        assert len(body["results"]) == size
    assert _kept("api-body") == 2


def test_history_figures_keep_no_more_scales_than_the_bound(monkeypatch, data: Data) -> None:
    monkeypatch.setattr(chart_views, "HISTORY_VARIANTS", 2)
    monkeypatch.setattr(chart_views, "CHARTS_PAGE_VARIANTS", 2)
    client = Client()
    for scale in (8, 16, 64, 999, 123456):
        response = client.get(f"/benchmarks/resnet/history.json?scale={scale}")
        assert response.status_code == 200 and response.json()["figure"]["data"]
        page = client.get(f"/rounds/{data.newest.slug}/charts/?benchmark=resnet&scale={scale}")
        assert page.status_code == 200 and f"on {scale} accelerators" in page.content.decode()
    assert _kept("chart-history-json") == 2
    assert _kept("chart-history") == 2
    assert _kept("chart-history-part") == 2
    assert _kept(f"charts-page-{data.newest.pk}") == 2


def test_a_round_tables_rows_keep_no_more_views_than_the_bound(monkeypatch, data: Data) -> None:
    """Signed in (no page is kept whole): the table's rows, kept per view, whose filters hold free text."""
    monkeypatch.setattr(table, "TABLE_ROWS_VARIANTS", 2)
    client = signed_in(data.people)
    for n in range(5):
        response = client.get(f"/rounds/{data.newest.slug}/?framework=x{n}")
        assert response.status_code == 200 and f"x{n}" in response.content.decode()
    assert _kept("table-rows") == 2


def _crowd(monkeypatch, name: str, parts: tuple[str, ...], waiters: int = 3) -> tuple[list[str], list[str]]:
    """One visitor fills `name`/`parts` (bound: one variant) slowly while `waiters` others ask for it; the
    answers they got, and who made one. Threads meet on Events, never sleeps."""
    started, release, waiting = threading.Event(), threading.Event(), threading.Event()
    real_pause = keys._pause

    def pause(seconds: float) -> None:
        waiting.set()
        real_pause(seconds)

    made: list[str] = []

    def slow() -> str:
        made.append("filler")
        started.set()
        assert release.wait(60)
        return "answer"

    def again() -> str:
        made.append("waiter")
        return "again"

    monkeypatch.setattr(keys, "_pause", pause)
    monkeypatch.setattr(keys, "WAIT_S", 60.0)
    keys.freshness()  # the rounds' dates read here, so the threads never need the database
    results: list[str] = []

    def ask(produce) -> threading.Thread:
        thread = threading.Thread(target=lambda: results.append(
            keys.cached_public(name, parts, produce, variants=1)))
        thread.start()
        return thread

    first = ask(slow)
    assert started.wait(60)
    others = [ask(again) for _ in range(waiters)]
    assert waiting.wait(60)
    release.set()
    for thread in (first, *others):
        thread.join(60)
    return results, made


def test_a_crowd_on_one_cold_answer_counts_once(monkeypatch) -> None:
    """Counted as stored: a visitor who waits for another's answer to the same key takes no room."""
    results, made = _crowd(monkeypatch, "crowded", ("key",))
    assert results == ["answer"] * 4 and made == ["filler"]
    assert cache.get(f"podium:crowded:variants:{keys.freshness()}") == 1
    # Room for one was taken by it: the next cold answer is made and not kept.
    assert keys.cached_public("crowded", ("other",), lambda: "made") == "made"
    assert keys.cached_public("crowded", ("another",), lambda: "made", variants=1) == "made"
    assert _kept("crowded") == 2  # "key", and "other" (no bound asked); "another" was not kept


def test_a_crowd_past_the_bound_still_waits_for_one_answer(monkeypatch) -> None:
    """Past the bound the filler keeps its answer a few seconds for those waiting on it: they do not each
    make it again."""
    keys.freshness()
    assert keys.cached_public("full", ("taken",), lambda: "first", variants=1) == "first"
    results, made = _crowd(monkeypatch, "full", ("crowded",))
    assert results == ["answer"] * 4 and made == ["filler"]
    assert cache._expire_info[cache.make_key(keys.public_key("full", "crowded"))] - time.time() <= keys.CROWD_S


def test_out_of_range_scales_share_one_charts_page(data: Data) -> None:
    client = Client()
    for scale in ("0", "99999999", "x", ""):
        assert client.get(f"/rounds/{data.newest.slug}/charts/?benchmark=resnet&scale={scale}").status_code == 200
    assert _kept(f"charts-page-{data.newest.pk}") == 1
