"""A benchmark's and an organization's page keep their part about each round (leaderboard.pages.round_sections):
a kept part is served without reading a result again, never to a visitor who may see something else, never
under another address prefix, and never after a change to what it shows (the services' bumps move its key).

The cache behaves here as a shared one (Redis in production), as in test_invalidation: only the services'
own bumps can move a key."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import clear_script_prefix, set_script_prefix

from accounts.models import Organization
from catalog.services import round_create
from core.cache import bump_generation
from ingest.models import Result, System
from ingest.services.results import result_withdraw
from tests.factories import ResultFactory, SubmissionFactory, SystemFactory
from tests.leaderboard.test_query_counts import Data

pytestmark = pytest.mark.django_db

PAGES = ["/benchmarks/resnet/", "/organizations/acme/"]


@pytest.fixture(autouse=True)
def _shared_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from leaderboard import cache

    monkeypatch.setattr(cache, "_process_local", lambda: False)


def _client(user: object | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _shown(client: Client, path: str) -> set[int]:
    response = client.get(path)
    assert response.status_code == 200
    return {int(pk) for pk in re.findall(r'href="/results/(\d+)/"', response.content.decode())}


def _parts(html: bytes) -> list[str]:
    return re.findall(r'<section class="round-results".*?</section>', html.decode(), re.S)


def _expected(data: Data, path: str, organizations: list[Organization]) -> set[int]:
    """The results the page shows to a visitor who may see the published rounds and, under embargo, the
    results of `organizations` (each round has fewer than a page's rows)."""
    results = Result.objects.filter(is_current=True)
    results = results.filter(benchmark_key="resnet") if "benchmarks" in path else results.filter(
        organization=data.people.acme)
    public = set(results.exclude(round=data.secret).values_list("pk", flat=True))
    return public | set(results.filter(round=data.secret, organization__in=organizations).values_list("pk", flat=True))


@pytest.mark.parametrize("path", PAGES)
def test_a_kept_part_is_never_served_to_a_visitor_who_may_see_something_else(path: str) -> None:
    data = Data()
    people = data.people
    # Alice (Acme) first: her parts hold Acme's results under embargo; then each other visitor, then Alice again.
    visitors = [(people.alice, [people.acme]), (None, []), (people.carol, [people.zeta]), (people.dave, []),
                (people.bob, [people.acme]), (people.alice, [people.acme])]
    for user, organizations in visitors:
        assert _shown(_client(user), path) == _expected(data, path, organizations), user
    secret = set(Result.objects.filter(round=data.secret).values_list("pk", flat=True))
    assert _expected(data, path, [people.acme]) & secret  # not vacuous: Alice's parts hold embargoed results


@pytest.mark.parametrize("path", PAGES)
def test_a_kept_part_reads_no_result_again(path: str) -> None:
    data = Data()
    client = _client(data.people.alice)
    with CaptureQueriesContext(connection) as made:
        first = _parts(client.get(path).content)
    assert len(first) == 3
    with CaptureQueriesContext(connection) as again:
        assert _parts(client.get(path).content) == first

    def result_reads(captured: CaptureQueriesContext) -> list[str]:
        # The numbering of each round's results, and the shown rows' columns (the systems' table above the
        # parts asks whether a result exists, which is not this).
        return [q["sql"] for q in captured.captured_queries
                if 'PARTITION BY "ingest_result"."round_id"' in q["sql"] or '"ingest_result"."verdict"' in q["sql"]]

    assert len(result_reads(made)) == 2
    assert result_reads(again) == []


@pytest.mark.parametrize("path", PAGES)
def test_a_kept_part_carries_the_address_prefix_it_was_made_under(path: str) -> None:
    data = Data()
    client = _client(data.people.alice)
    plain = "".join(_parts(client.get(path).content))
    try:
        set_script_prefix("/podium/")
        prefixed = "".join(_parts(client.get(path).content))
    finally:
        clear_script_prefix()
    assert 'href="/podium/results/' in prefixed and 'href="/results/' not in prefixed
    assert "".join(_parts(client.get(path).content)) == plain
    assert 'href="/results/' in plain and 'href="/podium/' not in plain


@pytest.mark.parametrize("path", PAGES)
def test_a_withdrawn_result_leaves_the_kept_part(path: str, django_capture_on_commit_callbacks) -> None:
    data = Data()
    data.newest.chairs.add(data.people.chair)
    client = _client(data.people.alice)
    gone = Result.objects.filter(round=data.newest, benchmark_key="resnet", organization=data.people.acme).first()
    assert gone is not None and gone.pk in _shown(client, path)
    with django_capture_on_commit_callbacks(execute=True):
        result_withdraw(result=gone, actor=data.people.chair, reason="flag upheld")
    assert gone.pk not in _shown(client, path)
    assert gone.pk not in _shown(Client(), path)


@pytest.mark.parametrize("path", PAGES)
def test_renamed_rounds_and_organizations_show_in_the_kept_parts(path: str, django_capture_on_commit_callbacks) -> None:
    data = Data()
    client = _client(data.people.alice)
    before = client.get(path).content.decode()
    assert data.newest.name in before
    with django_capture_on_commit_callbacks(execute=True):
        round_create(slug=data.newest.slug, name="Renamed round", ruleset=data.newest.ruleset,
                     publication_date=data.newest.publication_date)
    assert "Renamed round" in client.get(path).content.decode()
    if "benchmarks" in path:  # the organizations' names show on a benchmark's page
        zeta = data.people.zeta
        zeta.name = "Renamed in the admin"
        with django_capture_on_commit_callbacks(execute=True):
            admin.site._registry[Organization].save_model(RequestFactory().post("/admin/"), zeta, form=None,
                                                          change=True)
        assert "Renamed in the admin" in client.get(path).content.decode()


def test_a_benchmark_no_round_defines_is_answered_without_numbering_any_round() -> None:
    data = Data()
    for client in (Client(), _client(data.people.alice)):
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/benchmarks/no-such-benchmark/").status_code == 404
        assert not [q for q in captured.captured_queries if "ROW_NUMBER()" in q["sql"]]


def test_a_key_only_results_name_has_its_page() -> None:
    """A result whose folder names no benchmark of its round keeps the name it had: its page lists it."""
    data = Data()
    system = SystemFactory(round=data.newest, organization=data.people.zeta)
    odd = ResultFactory(system=system, benchmark=None, benchmark_key="oddkey", verdict=Result.Verdict.NONCOMPLIANT,
                        score=None)
    assert _shown(Client(), "/benchmarks/oddkey/") == {odd.pk}


def test_a_round_a_member_may_open_since_an_upload_began_shows_at_once(django_capture_on_commit_callbacks) -> None:
    """A round opens to a member once their organization has a submission in it (visible_rounds), which moves
    no generation: the page must not keep showing it without that round."""
    data = Data()
    with django_capture_on_commit_callbacks(execute=True):
        opened = round_create(slug="opened-v9.0", name="Round opened by an upload", ruleset="4.0.0",
                              publication_date=None)
    client = _client(data.people.alice)
    assert "Round opened by an upload" not in client.get("/benchmarks/resnet/").content.decode()
    SubmissionFactory(round=opened, organization=data.people.acme)
    assert "Round opened by an upload" in client.get("/benchmarks/resnet/").content.decode()
    assert "Round opened by an upload" not in _client(data.people.carol).get("/benchmarks/resnet/").content.decode()


def test_the_kept_systems_table_reaches_only_visitors_granted_as_much(django_capture_on_commit_callbacks) -> None:
    data = Data()
    people = data.people
    secret = {f'href="/systems/{pk}/"' for pk in
              System.objects.filter(round=data.secret, organization=people.acme).values_list("pk", flat=True)}
    assert secret

    def systems(user: object | None) -> str:
        html = _client(user).get("/organizations/acme/").content.decode()
        return html.split('id="systems"')[1].split("</table>")[0]

    assert all(link in systems(people.alice) for link in secret)  # Alice first: her table is kept
    for user in (None, people.carol, people.dave):
        assert not any(link in systems(user) for link in secret), user
    assert all(link in systems(people.bob) for link in secret)
    # A new system shows at once: storing its result moves the generation.
    with django_capture_on_commit_callbacks(execute=True):
        added = SystemFactory(round=data.newest, organization=people.acme, name="Brand new system")
        ResultFactory(system=added, benchmark=data.newest.benchmarks.get(key="resnet"), score=1.0)
        bump_generation(round_id=data.newest.pk)
    assert "Brand new system" in systems(None)


def test_the_kept_home_page_reaches_only_visitors_granted_as_much() -> None:
    data = Data()
    people = data.people

    def rounds(user: object | None) -> set[str]:
        html = _client(user).get("/").content.decode()
        return set(re.findall(r'href="/rounds/([^/]+)/"', html.split('id="rounds"')[1].split("</table>")[0]))

    assert data.secret.slug in rounds(people.alice)  # Alice first: her content is kept
    for user in (None, people.dave):  # Omega has nothing in the round under embargo
        assert data.secret.slug not in rounds(user), user
    assert data.secret.slug in rounds(people.bob) and data.secret.slug in rounds(people.carol)


def test_the_kept_home_page_follows_the_rounds_a_member_may_open() -> None:
    """A member's organization's first submission to a round opens it to them (visible_rounds) and moves no
    generation: the benchmarks' count of rounds must follow at once."""
    data = Data()
    client = _client(data.people.alice)

    def rounds_of_resnet() -> int:
        table = client.get("/").content.decode().split('id="benchmarks"')[1]
        row = table.split('href="/benchmarks/resnet/"')[1].split("</tr>")[0]
        return int(re.findall(r'<td class="num">(\d+)</td>', row)[0])

    before = rounds_of_resnet()
    opened = round_create(slug="opened-v9.0", name="Round opened by an upload", ruleset="4.0.0",
                          publication_date=None)
    assert rounds_of_resnet() == before  # not theirs to open yet
    SubmissionFactory(round=opened, organization=data.people.acme)
    assert rounds_of_resnet() == before + 1


def test_a_round_tables_kept_rows_reach_only_visitors_granted_as_much() -> None:
    """Signed in, the table (not the page around it, which names the visitor) is kept per grant."""
    data = Data()
    people = data.people
    path = f"/rounds/{data.secret.slug}/"

    def organizations(user: object) -> set[str]:
        html = _client(user).get(path).content.decode()
        shown = {int(pk) for pk in re.findall(r'href="/results/(\d+)/"', html.split('id="round-table"')[1])}
        return set(Result.objects.filter(pk__in=shown).values_list("organization__slug", flat=True))

    assert organizations(people.alice) == {"acme"}  # Alice first: her table is kept
    assert organizations(people.carol) == {"zeta"}
    assert organizations(people.bob) == {"acme"}
    assert _client(people.dave).get(path).status_code == 404
    page = _client(people.bob).get(path).content.decode()
    assert "bob" in page and "alice" not in page  # the page around the kept table is Bob's own


def test_a_round_pages_content_is_built_once_per_grant_and_the_page_around_it_per_visitor() -> None:
    """Signed in, the filter bar and the table are kept per grant (and chair or not); the page around them
    (the visitor's name) is rendered for each visitor."""
    from leaderboard import views

    data = Data()
    people = data.people
    data.newest.chairs.add(people.chair)
    path = f"/rounds/{data.newest.slug}/?division=closed"

    def content(html: str) -> str:
        return html.split("<h1>", 1)[1].split('id="badge-legend"', 1)[0]

    with (mock.patch.object(views, "build_choices", wraps=views.build_choices) as choices,
          mock.patch.object(views, "build_table", wraps=views.build_table) as table):
        alice, alice_again, bob = (_client(user).get(path).content.decode()
                                   for user in (people.alice, people.alice, people.bob))
        assert choices.call_count == table.call_count == 1  # Bob is granted what Alice is
        chair = _client(people.chair).get(path).content.decode()
        assert choices.call_count == table.call_count == 2  # the chair's grant is another
    assert content(alice) == content(alice_again) == content(bob)
    assert "alice" in alice and "alice" not in bob and "bob" in bob
    assert "Review dashboard" in chair and "Review dashboard" not in alice
    assert 'value="closed" selected' in content(bob)  # the visitor's filters are in the kept content
