"""core.compiled: a read built once, run again with other values, gives what the ORM gives."""

from __future__ import annotations

import datetime
import threading

import pytest
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Membership, Organization
from accounts.viewer import _compute
from catalog.models import Round
from core import compiled
from ingest.models import Submission
from ingest.visibility import _reviewed_rounds, _submitted_to_rounds_in_review
from tests.factories import OrganizationFactory, SubmissionFactory
from tests.people import make_people, open_round, set_phase

pytestmark = pytest.mark.django_db


def test_each_run_puts_its_own_values_where_the_placeholders_were() -> None:
    people = make_people()
    built: list[int] = []

    def build() -> QuerySet:
        built.append(1)
        return Membership.objects.filter(user_id=compiled.USER).order_by("organization_id", "role").values_list(
            "organization_id", "role")

    for user in (people.alice, people.bob, people.carol, people.dave):
        expected = list(Membership.objects.filter(user=user).order_by("organization_id", "role").values_list(
            "organization_id", "role"))
        assert compiled.rows("test.memberships", build, {compiled.USER: user.pk}) == expected
    assert built == [1]  # built and compiled once


def test_a_placeholder_left_without_a_value_fails_loudly() -> None:
    with pytest.raises(KeyError):
        compiled.rows("test.missing", lambda: Membership.objects.filter(user_id=compiled.USER).values_list("id"), {})


@pytest.mark.parametrize("phase", ["open", "review", "published"])
def test_the_rounds_in_review_read_once_built_match_the_orm_at_every_date(phase: str) -> None:
    people = make_people()
    round_, other = open_round(), open_round(slug="other-v4.0")
    set_phase(round_, phase)
    set_phase(other, "review")
    SubmissionFactory(round=round_, organization=people.acme, state=Submission.State.VERIFIED)
    SubmissionFactory(round=other, organization=people.zeta, state=Submission.State.NONCOMPLIANT)
    SubmissionFactory(round=round_, organization=people.omega, state=Submission.State.ERROR)  # refused: no review

    found = set()
    for now in (timezone.now(), round_.submission_deadline, round_.publication_date,
                round_.submission_deadline - datetime.timedelta(seconds=1)):
        for orgs in (frozenset({people.acme.pk}), frozenset({people.acme.pk, people.zeta.pk}),
                     frozenset({people.omega.pk}), frozenset({people.zeta.pk, people.omega.pk, people.acme.pk})):
            reviewed = _reviewed_rounds(orgs, now)
            assert reviewed == set(_submitted_to_rounds_in_review(orgs, now))
            found |= reviewed
    assert other.pk in found  # the comparison saw rounds, not only empty answers
    if connection.vendor == "postgresql":  # every signed-in request asks: parsed and planned once per connection
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            assert any('"ingest_submission"' in statement for (statement,) in cursor.fetchall())


def test_a_viewer_read_once_built_has_the_memberships_and_chairs_of_the_orm() -> None:
    people = make_people()
    round_ = open_round()
    round_.chairs.add(people.chair)
    chair = _compute(people.chair)
    assert chair.chaired_round_ids == frozenset({round_.pk})
    alice = _compute(people.alice)
    assert alice.roles == {people.acme.pk: frozenset({Membership.Role.SUBMITTER, Membership.Role.ADMIN})}
    assert Round.objects.filter(pk__in=chair.chaired_round_ids).exists()


def test_texts_stand_for_any_text_compared_as_it_is() -> None:
    people = make_people()
    text = compiled.texts(1)[0]

    def build() -> QuerySet:
        return Organization.objects.filter(name=text).order_by("pk").values_list("pk")

    OrganizationFactory(name="O'Brien % _ \\ \"quoted\"")
    for name in ("Acme", "Zeta", "O'Brien % _ \\ \"quoted\"", "O'Brien %", ""):
        expected = list(Organization.objects.filter(name=name).values_list("pk"))
        assert compiled.rows("test.organization_by_name", build, {text: name}) == expected
    assert compiled.rows("test.organization_by_name", lambda: None, {compiled.texts(1)[0]: people.acme.name}) == [
        (people.acme.pk,)]  # built once: the builder is not called again
    with pytest.raises(ValueError):
        compiled.texts(len(compiled.PLACEHOLDER_TEXTS) + 1)


@pytest.mark.parametrize("later", [-1, 0, 1])
def test_the_entrys_current_version_says_whether_a_newer_upload_holds_it(later: int) -> None:
    """results._current_version compares upload times in the statement (and ids within one clock tick), as
    Submission.upload_order does."""
    from types import SimpleNamespace

    from ingest.services.results import _current_version
    from tests.factories import ResultFactory

    current = ResultFactory(is_current=True)
    held_by = current.submission
    uploaded_at = held_by.uploaded_at + datetime.timedelta(microseconds=later)
    other = SubmissionFactory(round=current.round, organization=current.organization, uploaded_at=uploaded_at)
    Submission.objects.filter(pk=other.pk).update(uploaded_at=uploaded_at)  # as given, whatever auto_now_add does
    other.refresh_from_db()
    entry = SimpleNamespace(system=current.system_slug, benchmark=current.benchmark_key)

    found = _current_version(other, entry)  # type: ignore[arg-type]

    assert found is not None and found[:3] == (current.pk, current.score, current.verdict)
    assert found[3] is (held_by.upload_order > other.upload_order)
    assert found[3] is (later < 0 or (later == 0 and held_by.pk > other.pk))
    assert _current_version(other, SimpleNamespace(system=current.system_slug, benchmark="other")) is None


def _fields(instance: object) -> dict[str, object]:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}  # type: ignore[attr-defined]


def test_objects_are_what_the_orm_makes_each_column_converted_and_related_rows_set() -> None:
    people = make_people()
    finished = SubmissionFactory(organization=people.acme, state=Submission.State.VERIFIED,
                                 finished_at=timezone.now(), label="O'Brien % \\ \"quoted\"")
    received = SubmissionFactory(organization=people.zeta)  # no finish time: a NULL column
    built: list[int] = []

    def build() -> QuerySet:
        built.append(1)
        return Submission.objects.select_related("round", "organization").filter(pk=compiled.USER).order_by()

    for submission in (finished, received):
        expected = Submission.objects.select_related("round", "organization").get(pk=submission.pk)
        (made,) = compiled.objects("test.submission", build, {compiled.USER: submission.pk})
        assert type(made) is Submission and not made._state.adding and made._state.db == "default"
        assert _fields(made) == _fields(expected)
        assert _fields(made.round) == _fields(expected.round)  # set without another query
        assert _fields(made.organization) == _fields(expected.organization)
    assert isinstance(made.created_at, datetime.datetime) and made.created_at.tzinfo is not None
    assert compiled.objects("test.submission", build, {compiled.USER: -1}) == []
    assert built == [1]  # built and compiled once (per process)


@pytest.mark.django_db(transaction=True)  # committed: another thread's connection sees the rows
def test_objects_built_on_one_connection_serve_another_thread_s_connection() -> None:
    submission = SubmissionFactory(state=Submission.State.VERIFIED, finished_at=timezone.now())
    built: list[int] = []

    def build() -> QuerySet:
        built.append(1)
        return Submission.objects.select_related("round").filter(pk=compiled.USER).order_by()

    (here,) = compiled.objects("test.submission_threads", build, {compiled.USER: submission.pk})
    seen: dict[str, object] = {}

    def elsewhere() -> None:
        from django.db import connections

        try:
            seen["connection"] = connections["default"]
            (seen["made"],) = compiled.objects("test.submission_threads", build, {compiled.USER: submission.pk})
            seen["orm"] = Submission.objects.select_related("round").get(pk=submission.pk)
        finally:
            connections.close_all()

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen["connection"] is not connection  # a connection of its own, which never built the read
    made, orm = seen["made"], seen["orm"]
    assert built == [1]
    assert _fields(made) == _fields(orm) == _fields(here)
    assert _fields(made.round) == _fields(orm.round)  # type: ignore[attr-defined]
    assert made.finished_at.tzinfo is not None  # type: ignore[attr-defined]  # converted on that connection


def test_objects_read_with_select_related_add_no_query(django_assert_num_queries) -> None:
    submission = SubmissionFactory()
    build = lambda: Submission.objects.select_related("round", "organization").filter(pk=compiled.USER)  # noqa: E731
    with django_assert_num_queries(1):
        (made,) = compiled.objects("test.submission_related", build, {compiled.USER: submission.pk})
        assert (made.round.slug, made.organization.slug) == (submission.round.slug, submission.organization.slug)


def test_objects_refuse_a_queryset_that_gives_no_plain_instances() -> None:
    from django.db.models import Count

    for name, build in (("values", lambda: Submission.objects.values("pk")),
                        ("annotated", lambda: Submission.objects.annotate(n=Count("results"))),
                        ("prefetched", lambda: Submission.objects.prefetch_related("results"))):
        with pytest.raises(ValueError):
            compiled.objects(("test.refused", name), build, {})


def test_an_update_built_once_changes_what_the_orm_would_and_counts_it() -> None:
    from django.db.models import F

    at, until = compiled.PLACEHOLDER_DATES[:2]
    received = [SubmissionFactory(state=Submission.State.RECEIVED) for _ in range(2)]
    verified = SubmissionFactory(state=Submission.State.VERIFIED)
    built: list[int] = []

    def build() -> tuple[QuerySet, dict]:
        built.append(1)
        return (Submission.objects.filter(pk=compiled.USER, state=Submission.State.RECEIVED),
                {"state": Submission.State.VERIFYING, "started_at": at, "attempts": F("attempts") + 1,
                 "lease_expires_at": until})

    now = timezone.now()
    for submission, expected in ((received[0], 1), (received[1], 1), (received[0], 0), (verified, 0)):
        lease = now + datetime.timedelta(minutes=submission.pk)
        assert compiled.update("test.claim", build, {compiled.USER: submission.pk, at: now, until: lease}) == expected
    assert built == [1]
    for submission in received:
        submission.refresh_from_db()
        assert (submission.state, submission.attempts, submission.started_at) == (Submission.State.VERIFYING, 1, now)
        assert submission.lease_expires_at == now + datetime.timedelta(minutes=submission.pk)  # its own value
    verified.refresh_from_db()
    assert (verified.state, verified.attempts, verified.started_at) == (Submission.State.VERIFIED, 0, None)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_on_postgresql_an_update_is_prepared_once_per_connection_unless_told_otherwise() -> None:
    received = [SubmissionFactory(state=Submission.State.RECEIVED) for _ in range(3)]
    for submission in received:
        compiled.update("test.prepared", lambda: (Submission.objects.filter(pk=compiled.USER), {"label": "prepared"}),
                        {compiled.USER: submission.pk})
        compiled.update("test.unprepared", lambda: (Submission.objects.filter(pk=compiled.USER),
                                                    {"error_detail": "plain"}), {compiled.USER: submission.pk},
                        prepare=False)
    assert {(s.label, s.error_detail) for s in Submission.objects.filter(pk__in=[s.pk for s in received])} == {
        ("prepared", "plain")}

    def prepared_count(column: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                           [f'UPDATE "ingest_submission" SET "{column}"%'])
            return cursor.fetchone()[0]

    assert (prepared_count("label"), prepared_count("error_detail")) == (1, 0)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a data-modifying WITH query: PostgreSQL's")
def test_objects_after_a_change_read_what_it_changed_with_the_rows_it_joins() -> None:
    from django.test.utils import CaptureQueriesContext

    changed, other = SubmissionFactory(label="before"), SubmissionFactory(label="before")

    def build() -> QuerySet:
        return Submission.objects.filter(pk=compiled.USER).select_related("round").order_by()

    with CaptureQueriesContext(connection) as queries:
        (read,) = compiled.objects_after(
            "test.after", build, {compiled.USER: changed.pk},
            with_sql='"changed" AS (UPDATE "ingest_submission" SET "label" = %s WHERE "id" = %s RETURNING *)',
            with_params=["after", changed.pk], source="changed", prepare=True)
    assert len(queries.captured_queries) == 1
    assert (read.pk, read.label) == (changed.pk, "after")  # as changed, though the table was read before it
    with CaptureQueriesContext(connection) as joined:
        assert read.round.slug == changed.round.slug
    assert joined.captured_queries == []
    assert [s.label for s in Submission.objects.filter(pk__in=[changed.pk, other.pk]).order_by("pk")] == [
        "after", "before"]
    none = compiled.objects_after(
        "test.after", build, {compiled.USER: other.pk},
        with_sql='"changed" AS (UPDATE "ingest_submission" SET "label" = %s WHERE "id" = %s RETURNING *)',
        with_params=["after", changed.pk], source="changed")
    assert none == []  # the row asked for was not changed: nothing read


def test_objects_after_refuses_a_query_that_does_not_read_its_table_once() -> None:
    from django.db.models import Exists, OuterRef

    def build() -> QuerySet:  # the table is read twice: in FROM and in the subquery
        return Submission.objects.filter(pk=compiled.USER).filter(
            Exists(Submission.objects.filter(pk=OuterRef("pk")))).order_by()

    with pytest.raises(ValueError, match="is not read once"):
        compiled.objects_after("test.after.twice", build, {compiled.USER: 1}, with_sql='"x" AS (SELECT 1)',
                               with_params=[], source="x")
