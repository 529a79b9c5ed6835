"""A change confined to one round (a result stored there, its submission finished: what every upload and
import writes) leaves the cached answers about any other round alone standing, and is seen at once on its
own round's pages and on answers about several rounds; every other change invalidates every answer."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import core.cache
from catalog.models import Round
from core.cache import bump_generation, generation, generations
from ingest.models import Submission
from ingest.services import submissions
from leaderboard.cache import freshness, freshness_by_round
from tests.factories import BenchmarkFactory, OrganizationFactory, ResultFactory, RoundFactory, SystemFactory
from tests.ingest.test_run_logs import bundle  # noqa: F401  (a fixture: one demo item, five runs)
from tests.people import make_people, open_round

pytestmark = pytest.mark.django_db


def _bumped(capture: Any, round_id: int | None = None) -> None:
    with capture(execute=True):
        bump_generation(round_id=round_id)


def test_a_change_confined_to_a_round_moves_its_number_and_the_one_of_every_change(
        django_capture_on_commit_callbacks: Any) -> None:
    cache.clear()
    every, shared, first = generations(1)
    _bumped(django_capture_on_commit_callbacks, round_id=1)
    assert generations(1) == (every + 1, shared, first + 1)
    assert generations(2)[1:] == generations(2)[1:]  # (read twice: the number of a round never read is made once)
    second = generations(2)[2]
    _bumped(django_capture_on_commit_callbacks, round_id=1)
    assert generations(2) == (every + 2, shared, second)
    _bumped(django_capture_on_commit_callbacks)  # not confined: the shared number moves, every key holds it
    assert generations(1) == (every + 3, shared + 1, first + 2)
    assert generation() == every + 3


def test_a_bump_inside_a_transaction_that_rolls_back_moves_nothing(django_capture_on_commit_callbacks: Any) -> None:
    cache.clear()
    before = generations(1)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        bump_generation(round_id=1)
    assert len(callbacks) == 1 and generations(1) == before  # it waits for the commit


def test_freshness_of_a_round_moves_with_its_own_changes_and_the_shared_ones(
        django_capture_on_commit_callbacks: Any) -> None:
    cache.clear()
    one, two, everything = freshness(1), freshness(2), freshness()
    _bumped(django_capture_on_commit_callbacks, round_id=1)
    assert freshness(1) != one and freshness() != everything
    assert freshness(2) == two
    one, everything = freshness(1), freshness()
    _bumped(django_capture_on_commit_callbacks)
    assert freshness(1) != one and freshness(2) != two and freshness() != everything


def _queries(client: Client, url: str) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode(), [q["sql"] for q in captured.captured_queries]


def _reads_results(queries: list[str]) -> bool:
    return any('FROM "ingest_result"' in q for q in queries)


def _published_round() -> Any:
    round_ = RoundFactory(slug="past-v3.1", publication_date=timezone.now() - datetime.timedelta(days=30))
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50", position=0)
    organization = OrganizationFactory(name="Quill", slug="quill")
    system = SystemFactory(round=round_, organization=organization, slug="quill-box", name="Quill Box")
    ResultFactory(system=system, benchmark=resnet, score=10.0)
    return round_


def test_an_upload_verified_in_an_open_round_leaves_a_published_rounds_cached_pages_standing(
        bundle: tuple[Path, Path], django_capture_on_commit_callbacks: Any) -> None:  # noqa: F811
    people, round_open, past = make_people(), open_round(), _published_round()
    cache.clear()
    visitor = Client()
    member = Client()  # staff: it sees the open round, embargoed, before anything is uploaded to it
    member.force_login(get_user_model().objects.create_user("operator", is_staff=True))
    past_page = f"/rounds/{past.slug}/"
    scale_chart = f"/rounds/{past.slug}/charts/scale.json?benchmark=resnet"
    open_page = f"/rounds/{round_open.slug}/"
    page, _ = _queries(visitor, past_page)
    assert "Quill Box" in page
    _queries(visitor, scale_chart)
    shown, queries = _queries(member, open_page)
    assert _reads_results(queries) and "atlas" not in shown.lower()  # nothing uploaded yet
    every = generation()

    with django_capture_on_commit_callbacks(execute=False):  # stored; the queued task is run below, here
        outcome = submissions.submission_upload(actor=people.alice, organization=people.acme, round=round_open,
                                                archive=bundle[0], original_name="bundle.tar.gz")
    with django_capture_on_commit_callbacks(execute=True):
        assert submissions.submission_verify(submission_id=outcome.submission.pk) == Submission.State.VERIFIED

    # The other round's page and chart come from the cache: no result is read for them.
    again, queries = _queries(visitor, past_page)
    assert again == page and not _reads_results(queries)
    _, queries = _queries(visitor, scale_chart)
    assert not _reads_results(queries)
    # Its own round's table (here the staff's view of it, embargoed) shows the new result at once ...
    shown, queries = _queries(member, open_page)
    assert _reads_results(queries) and "atlas" in shown.lower()
    # ... and answers about several rounds (the results API, the history chart) are keyed on every change.
    assert generation() != every


def test_a_change_confined_to_a_round_is_seen_at_once_on_that_rounds_cached_page(
        django_capture_on_commit_callbacks: Any) -> None:
    past = _published_round()
    cache.clear()
    visitor = Client()
    url = f"/rounds/{past.slug}/"
    page, _ = _queries(visitor, url)
    assert "Nova Box" not in page
    organization = OrganizationFactory(name="Nova", slug="nova")
    system = SystemFactory(round=past, organization=organization, slug="nova-box", name="Nova Box")
    ResultFactory(system=system, benchmark=past.benchmarks.get(key="resnet"), score=5.0)
    _bumped(django_capture_on_commit_callbacks, round_id=past.pk + 1)  # another round's change: still cached
    assert "Nova Box" not in _queries(visitor, url)[0]
    _bumped(django_capture_on_commit_callbacks, round_id=past.pk)  # what result_store does for this round
    page, queries = _queries(visitor, url)
    assert "Nova Box" in page and _reads_results(queries)


def test_with_a_per_process_cache_a_round_another_process_published_counts_at_once() -> None:
    """The publication dates each process keeps are read again after another process's change of them (the
    stamp it leaves), though this process's own numbers did not move: a round passing its date shows."""
    assert isinstance(caches["default"], LocMemCache)  # the embedded default, which the tests run with
    soon = RoundFactory(slug="soon-v1.0", publication_date=timezone.now() + datetime.timedelta(days=1))
    cache.clear()

    def passed() -> int:
        return int(freshness(soon.pk).split(":")[1])

    before, numbers = passed(), generations(soon.pk)
    # Another process (manage.py round_phase) moves the date and bumps: its stamp, not this process's numbers.
    Round.objects.filter(pk=soon.pk).update(publication_date=timezone.now() - datetime.timedelta(minutes=1))
    core.cache._stamp()
    assert generations(soon.pk) == numbers
    assert passed() == before + 1


def test_the_api_list_of_one_round_keeps_its_etag_through_a_change_in_another(
        django_capture_on_commit_callbacks: Any) -> None:
    past = _published_round()
    cache.clear()
    visitor = Client()

    def etag(url: str) -> str:
        response = visitor.get(url)
        assert response.status_code == 200 and response.json()["results"], url
        return str(response["ETag"])

    def still(url: str, tag: str) -> bool:
        return visitor.get(url, HTTP_IF_NONE_MATCH=tag).status_code == 304

    one, every, unknown = (f"/api/v1/results/?round={past.slug}", "/api/v1/results/",
                           "/api/v1/results/?round=no-such-round&all_versions=1")
    tags = {url: etag(url) for url in (one, every)}
    tags[unknown] = str(visitor.get(unknown)["ETag"])
    _bumped(django_capture_on_commit_callbacks, round_id=past.pk + 1)  # an upload verified in another round
    assert still(one, tags[one])
    assert not still(every, tags[every]) and not still(unknown, tags[unknown])  # about every round, or none
    _bumped(django_capture_on_commit_callbacks, round_id=past.pk)
    assert not still(one, tags[one])


def test_with_a_per_process_cache_another_process_s_change_in_one_round_renews_that_round_s_parts_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer about several rounds is kept round by round, each part under its round's stamp; a request
    reads one stamp file while no other process has bumped (the one every bump moves), not two per round."""
    assert isinstance(caches["default"], LocMemCache)
    first, second, third = (RoundFactory(slug=f"r{n}-v1.0") for n in range(3))
    cache.clear()
    before = freshness_by_round()
    read: list[str] = []
    reading = core.cache._read_stamp
    monkeypatch.setattr(core.cache, "_read_stamp", lambda scope: read.append(scope) or reading(scope))
    assert freshness_by_round() == before
    assert read and set(read) == {""}  # no round's own stamp

    core.cache._stamp(second.pk)  # another process's upload to the second round: its stamp, not our numbers
    read.clear()
    after = freshness_by_round()
    assert after[second.pk] != before[second.pk]
    assert {pk: after[pk] for pk in (first.pk, third.pk)} == {pk: before[pk] for pk in (first.pk, third.pk)}
    assert read[0] == "" and f".round-{second.pk}" in read

    core.cache._stamp()  # a change not confined to a round (a name, a badge): every round's part
    renewed = freshness_by_round()
    assert all(renewed[pk] != after[pk] for pk in (first.pk, second.pk, third.pk))


def test_a_bump_leaves_its_round_s_stamp_before_the_one_every_bump_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The order a reader's kept stamps rely on (core.cache._stamps): one that sees the last-written stamp
    unchanged has seen every stamp a bump wrote before it."""
    assert isinstance(caches["default"], LocMemCache)
    written: list[str] = []
    opening = open

    def recording(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode:
            written.append(Path(path).name)
        return opening(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", recording)
    core.cache._stamp(7)
    core.cache._stamp()
    assert written == ["results-generation.round-7.stamp", "results-generation.stamp",
                       "results-generation.shared.stamp", "results-generation.stamp"]
