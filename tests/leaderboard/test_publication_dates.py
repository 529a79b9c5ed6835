"""Result.round_publication_date, the copy of its round's date that the embargo reads, follows every way a
round's publication date changes (ingest.publication's triggers): a new result, a saved round, a phase moved,
the catalog, and the writes no signal sees (a bare update, raw SQL, a round inserted after its results)."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection, transaction
from django.utils import timezone

from catalog.models import Round
from catalog.services import round_create
from ingest import publication
from ingest.models import Result
from ingest.services.rounds import round_phase_set
from ingest.visibility import visible_results
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db


def _copies(round_: Round) -> set[datetime.datetime | None]:
    # No ordering: Result's default one joins the round, which one test deletes for a while.
    return set(Result.objects.filter(round_id=round_.pk).order_by().values_list("round_publication_date", flat=True))


@pytest.fixture
def round_() -> Round:
    round_ = RoundFactory(slug="dates-v1.0", is_demo=True)
    bench = BenchmarkFactory(round=round_)
    for _ in range(3):
        ResultFactory(system=SystemFactory(round=round_), benchmark=bench)
    return round_


def test_a_new_result_copies_its_round_s_date(round_: Round) -> None:
    assert _copies(round_) == {round_.publication_date}


def test_saving_a_round_updates_its_results(round_: Round) -> None:
    later = timezone.now() + datetime.timedelta(days=9)
    round_.publication_date = later
    round_.save()
    assert _copies(round_) == {later}
    round_.publication_date = None
    round_.save()
    assert _copies(round_) == {None}


def test_moving_a_round_s_phase_updates_its_results(round_: Round) -> None:
    round_phase_set(round=round_, phase=Round.Phase.REVIEW, actor="test")
    round_.refresh_from_db()
    assert _copies(round_) == {round_.publication_date} and round_.publication_date > timezone.now()


def test_the_catalog_s_round_service_updates_its_results(round_: Round) -> None:
    moved = timezone.now() - datetime.timedelta(days=400)
    round_create(slug=round_.slug, name=round_.name, ruleset=round_.ruleset, publication_date=moved)
    assert _copies(round_) == {moved}


def test_a_save_of_other_fields_leaves_the_results_alone(round_: Round, django_assert_num_queries) -> None:
    round_.name = "Renamed"
    with django_assert_num_queries(1):  # the round's own UPDATE, nothing on its results
        round_.save(update_fields=["name"])


def test_other_rounds_are_untouched(round_: Round) -> None:
    other = RoundFactory()
    ResultFactory(system=SystemFactory(round=other), benchmark=BenchmarkFactory(round=other))
    round_.publication_date = None
    round_.save()
    assert _copies(other) == {other.publication_date}


def test_a_bare_update_of_the_round_updates_its_results(round_: Round) -> None:
    later = timezone.now() + datetime.timedelta(days=9)
    Round.objects.filter(pk=round_.pk).update(publication_date=later)
    assert _copies(round_) == {later}


def test_raw_sql_on_the_round_updates_its_results(round_: Round) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE catalog_round SET publication_date = NULL WHERE id = %s", [round_.pk])
    assert _copies(round_) == {None}


def test_a_result_cannot_be_given_another_date_than_its_round_s(round_: Round) -> None:
    Result.objects.filter(round=round_).update(round_publication_date=timezone.now() - datetime.timedelta(days=9))
    assert _copies(round_) == {round_.publication_date}
    bench = Result.objects.filter(round=round_).first().benchmark
    wrong = timezone.now() - datetime.timedelta(days=3)
    result = ResultFactory(system=SystemFactory(round=round_), benchmark=bench, round_publication_date=wrong)
    assert Result.objects.get(pk=result.pk).round_publication_date == round_.publication_date


@pytest.mark.django_db(transaction=True)
def test_a_round_inserted_after_its_results_gives_them_its_date() -> None:
    # A restore may write the rows in any order: the foreign keys are checked at commit.
    round_ = RoundFactory(slug="late-v1.0", publication_date=timezone.now() - datetime.timedelta(days=2))
    ResultFactory(system=SystemFactory(round=round_), benchmark=BenchmarkFactory(round=round_))
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM catalog_round WHERE id = %s", [round_.pk])
        columns = [column[0] for column in cursor.description]
        values = cursor.fetchone()
    with transaction.atomic(), connection.cursor() as cursor:
        postgres = connection.vendor == "postgresql"
        cursor.execute("SET CONSTRAINTS ALL DEFERRED" if postgres else "PRAGMA defer_foreign_keys = ON")
        cursor.execute("DELETE FROM catalog_round WHERE id = %s", [round_.pk])
        Result.objects.filter(round_id=round_.pk).update(round_publication_date=None)
        assert _copies(round_) == {None}  # no round: nothing to copy
        cursor.execute(f"INSERT INTO catalog_round ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
                       list(values))
    assert _copies(round_) == {round_.publication_date}


def test_the_embargo_follows_a_date_moved_by_a_bare_update(round_: Round) -> None:
    """The trust property: a round's publication moved later, by any write, hides its results again."""
    public = visible_results(AnonymousUser()).filter(round=round_)
    assert public.count() == 3
    Round.objects.filter(pk=round_.pk).update(publication_date=timezone.now() + datetime.timedelta(days=1))
    assert visible_results(AnonymousUser()).filter(round=round_).count() == 0


def test_the_triggers_are_installed_again_after_a_migrate_that_dropped_them(round_: Round) -> None:
    # What SQLite does to a table's triggers when a migration rebuilds the table.
    expected = publication.expected_triggers(connection.vendor)
    assert publication.installed_triggers(connection) == expected
    with connection.cursor() as cursor:
        for statement in publication._drop_statements(connection.vendor):
            cursor.execute(statement)
    assert publication.installed_triggers(connection) == set()
    Result.objects.filter(round=round_).update(round_publication_date=None)  # written while they were away
    publication.ensure_triggers(using=connection.alias)
    assert publication.installed_triggers(connection) == expected
    assert _copies(round_) == {round_.publication_date}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite runs one writer at a time")
@pytest.mark.django_db(transaction=True)
def test_a_date_moved_while_a_result_is_written_reaches_that_result() -> None:
    """A verification writes a result while a chair moves its round's publication later, in two transactions:
    whichever commits first, the result ends with the round's later date (not the one it read first)."""
    import threading

    import psycopg

    round_ = RoundFactory(slug="race-v1.0", publication_date=timezone.now() - datetime.timedelta(days=1))
    bench, system = BenchmarkFactory(round=round_), SystemFactory(round=round_)
    later = timezone.now() + datetime.timedelta(days=30)
    settings_dict = connection.settings_dict
    url = (f"postgresql://{settings_dict['USER'] or 'postgres'}@{settings_dict['HOST'] or '127.0.0.1'}:"
           f"{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}")
    moved: dict[str, int] = {}

    def move() -> None:
        with psycopg.connect(url, autocommit=True) as other:
            moved["pid"] = other.info.backend_pid
            other.execute("UPDATE catalog_round SET publication_date = %s WHERE id = %s", [later, round_.pk])
            moved["done"] = 1

    with transaction.atomic():
        result = ResultFactory(system=system, benchmark=bench)  # its copy read now, the round's row locked
        mover = threading.Thread(target=move)
        mover.start()
        with connection.cursor() as cursor:  # until the move waits for this transaction, or is done
            for _ in range(6_000):
                # A transaction reads the activity statistics once unless told to read them again.
                cursor.execute("SELECT pg_stat_clear_snapshot()")
                cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [moved.get("pid", 0)])
                row = cursor.fetchone()
                if moved.get("done") or (row is not None and row[0] == "Lock"):
                    break
                threading.Event().wait(0.01)
    mover.join(60)
    assert moved.get("done") == 1
    assert Result.objects.get(pk=result.pk).round_publication_date == later
