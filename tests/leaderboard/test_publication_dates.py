"""Result.round_publication_date, the indexable copy of its round's date, follows every way a round's
publication date changes (ingest.publication): a new result, a saved round, a phase moved, the catalog."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from catalog.models import Round
from catalog.services import round_create
from ingest.models import Result
from ingest.services.rounds import round_phase_set
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db


def _copies(round_: Round) -> set[datetime.datetime | None]:
    return set(Result.objects.filter(round=round_).values_list("round_publication_date", flat=True))


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
