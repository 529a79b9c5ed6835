"""Official rounds get their public dates from the catalog; what is not public stays for an admin."""

from __future__ import annotations

import datetime

import pytest

from catalog.models import Round
from catalog.services import catalog_sync, round_for_ruleset

pytestmark = pytest.mark.django_db


def test_sync_sets_deadlines_at_1pm_pacific_and_publication_at_midnight_utc() -> None:
    catalog_sync(rulesets=["4.0.0", "1.1.0"])
    v40 = Round.objects.get(slug="training-v4.0")
    assert v40.submission_deadline == datetime.datetime(2024, 5, 10, 20, 0, tzinfo=datetime.UTC)  # 13:00 PDT
    assert v40.publication_date == datetime.datetime(2024, 6, 12, tzinfo=datetime.UTC)
    assert "Submission Deadline May 10, 2024" in v40.deadline_source
    assert v40.phase(now=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)) == Round.Phase.PUBLISHED
    v11 = Round.objects.get(slug="training-v1.1")
    assert v11.submission_deadline is None and v11.deadline_source == ""


def test_deadlines_follow_pacific_daylight_time_and_an_unpublished_round_has_none() -> None:
    v06 = round_for_ruleset("0.6.0")
    assert v06.submission_deadline == datetime.datetime(2019, 5, 24, 20, 0, tzinfo=datetime.UTC)
    v61 = round_for_ruleset("6.1.0")
    assert v61.submission_deadline == datetime.datetime(2026, 10, 16, 20, 0, tzinfo=datetime.UTC)
    assert v61.publication_date is None


def test_dates_an_admin_set_are_kept_and_missing_ones_filled() -> None:
    admin_deadline = datetime.datetime(2021, 10, 22, 20, 0, tzinfo=datetime.UTC)
    catalog_sync(rulesets=["1.1.0", "4.1.0"])
    Round.objects.filter(slug="training-v1.1").update(submission_deadline=admin_deadline, deadline_source="admin")
    Round.objects.filter(slug="training-v4.1").update(submission_deadline=None, deadline_source="")
    catalog_sync(rulesets=["1.1.0", "4.1.0"])
    v11 = Round.objects.get(slug="training-v1.1")
    assert (v11.submission_deadline, v11.deadline_source) == (admin_deadline, "admin")
    v41 = Round.objects.get(slug="training-v4.1")
    assert v41.submission_deadline == datetime.datetime(2024, 10, 11, 20, 0, tzinfo=datetime.UTC)
