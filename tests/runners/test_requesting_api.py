"""POST /api/v1/reproductions/, …/cancel/, …/retry/: staff and the round's chairs only, every input checked."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import AuditEvent
from runners.models import ReproductionJob
from tests.people import token_for
from tests.runners.test_agent_api import _result

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return get_user_model().objects.create_user("ops", is_staff=True)


def _as(user=None, token: str | None = None) -> APIClient:
    client = APIClient()
    if token is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    elif user is not None:
        client.force_authenticate(user)
    return client


def test_staff_request_a_reproduction_with_their_own_run_limit_and_attempts(operator) -> None:
    result = _result(accelerators=0, model="")
    answer = _as(operator).post("/api/v1/reproductions/", {"result": result.pk, "kind": "timing", "run": 2,
                                                            "time_limit_seconds": 120, "max_attempts": 5},
                                format="json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    job = ReproductionJob.objects.get(pk=body["id"])
    assert (body["state"], body["kind"], body["run"], body["time_limit_seconds"], body["max_attempts"]) == (
        "queued", "timing", 2, 120, 5)
    assert job.run.position == 2 and job.created_by == operator
    assert AuditEvent.objects.filter(action="job.create", subject_id=str(job.pk)).exists()


def test_a_chair_requests_through_a_token_and_others_are_refused(operator) -> None:
    result = _result(accelerators=0, model="")  # a published round
    users = get_user_model().objects
    chair = users.create_user("chair")
    result.round.chairs.add(chair)
    made = _as(token=token_for(chair)).post("/api/v1/reproductions/", {"result": result.pk}, format="json")
    assert made.status_code == 201 and made.json()["kind"] == "convergence"
    stranger = users.create_user("stranger")
    refused = _as(stranger).post("/api/v1/reproductions/", {"result": result.pk}, format="json")
    assert refused.status_code == 403 and "chairs request reproductions" in refused.json()["detail"]
    assert _as().post("/api/v1/reproductions/", {"result": result.pk}, format="json").status_code in (401, 403)
    read_only = _as(token=token_for(chair, scope="read")).post("/api/v1/reproductions/", {"result": result.pk},
                                                               format="json")
    assert read_only.status_code == 403
    assert ReproductionJob.objects.count() == 1


@pytest.mark.parametrize(("body", "field"), [
    ({"result": "1; drop table"}, "result"),
    ({"kind": "fastest"}, "kind"),
    ({"time_limit_seconds": 0}, "time_limit_seconds"),
    ({"time_limit_seconds": 10**9}, "time_limit_seconds"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": 1000}, "max_attempts"),
    ({"run": -1}, "run"),
])
def test_bad_input_is_refused_with_the_field_named(operator, body, field) -> None:
    result = _result(accelerators=0, model="")
    answer = _as(operator).post("/api/v1/reproductions/", {"result": result.pk, **body}, format="json")
    assert answer.status_code == 400 and field in answer.json()
    assert not ReproductionJob.objects.exists()


def test_a_run_that_does_not_exist_and_an_unseen_result_are_refused(operator) -> None:
    result = _result(accelerators=0, model="")
    missing_run = _as(operator).post("/api/v1/reproductions/", {"result": result.pk, "run": 99}, format="json")
    assert missing_run.status_code == 400 and missing_run.json()["detail"] == "The result has no run to reproduce."
    embargoed = _result(accelerators=0, model="")
    embargoed.round.publication_date = timezone.now() + datetime.timedelta(days=3)
    embargoed.round.save()
    chair = get_user_model().objects.create_user("chair")  # a chair of another round sees nothing of this one
    _result(accelerators=0, model="").round.chairs.add(chair)
    assert _as(chair).post("/api/v1/reproductions/", {"result": embargoed.pk}, format="json").status_code == 404
    assert _as(operator).post("/api/v1/reproductions/", {"result": 10**9}, format="json").status_code == 404


def test_cancel_and_retry_through_the_api(operator) -> None:
    result = _result(accelerators=0, model="")
    staff = _as(operator)
    job_id = staff.post("/api/v1/reproductions/", {"result": result.pk}, format="json").json()["id"]
    stranger = _as(get_user_model().objects.create_user("stranger"))
    assert stranger.post(f"/api/v1/reproductions/{job_id}/cancel/").status_code == 403
    cancelled = staff.post(f"/api/v1/reproductions/{job_id}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    again = staff.post(f"/api/v1/reproductions/{job_id}/cancel/")
    assert again.status_code == 400 and again.json()["detail"] == "The job has ended already."
    retried = staff.post(f"/api/v1/reproductions/{job_id}/retry/")
    assert retried.status_code == 200 and retried.json()["state"] == "queued"
    queued = staff.post(f"/api/v1/reproductions/{job_id}/retry/")
    assert queued.status_code == 400 and "Only a failed or cancelled job" in queued.json()["detail"]
    assert staff.post("/api/v1/reproductions/999999/retry/").status_code == 404
    actions = list(AuditEvent.objects.filter(subject_id=str(job_id)).values_list("action", flat=True))
    assert actions.count("job.cancel") == 1 and actions.count("job.retry") == 1


@pytest.mark.parametrize("value", ["²", "١٢", "abc", "-1"])
def test_the_list_refuses_a_result_that_is_no_whole_number(operator, value: str) -> None:
    """'²' and '١٢' pass str.isdigit(); the filter then failed in the ORM (a 500), now a 400 like 'abc'."""
    answer = _as(operator).get("/api/v1/reproductions/", {"result": value})
    assert answer.status_code == 400, answer.content
    assert "result" in answer.json()
