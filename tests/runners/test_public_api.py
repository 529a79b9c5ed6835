"""/api/v1/reproductions/: the jobs of the results a caller may see, with the numbers behind each verdict."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from runners import services
from runners.models import ReproductionJob
from tests.runners.test_agent_api import CPU, _agent, _claim, _complete, _result

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return get_user_model().objects.create_user("ops", is_staff=True)


def test_anyone_reads_the_reproductions_of_published_results_only(operator) -> None:
    public = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                                 actor=operator)
    embargoed_result = _result(accelerators=0, model="")
    embargoed_result.round.publication_date = timezone.now() + datetime.timedelta(days=3)
    embargoed_result.round.save()
    embargoed = services.job_create(result=embargoed_result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    client, _ = _agent(operator)
    claim = _claim(client, CPU)
    assert claim["job"]["id"] == public.pk
    assert _complete(client, claim, exit_code=3, output_tail="Traceback\nRuntimeError: boom").status_code == 200

    listed = APIClient().get("/api/v1/reproductions/")
    assert listed.status_code == 200
    [job] = listed.json()
    assert (job["id"], job["result"], job["kind"], job["state"]) == (public.pk, public.result_id, "convergence",
                                                                    "failed")  # the job crashed: no retry
    assert job["failure_reason"]
    assert [(a["number"], a["outcome"], a["exit_code"]) for a in job["attempts"]] == [(1, "failed", 3)]
    assert job["queue"]["position"] is None and job["url"].endswith(f"/reproductions/{public.pk}/")
    assert APIClient().get(f"/api/v1/reproductions/{embargoed.pk}/").status_code == 404
    staff = APIClient()
    staff.force_authenticate(operator)
    assert {j["id"] for j in staff.get("/api/v1/reproductions/").json()} == {public.pk, embargoed.pk}


def test_filters_narrow_the_list_and_bad_ones_say_why(operator) -> None:
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    api = APIClient()
    assert [j["id"] for j in api.get(f"/api/v1/reproductions/?result={job.result_id}&state=queued").json()] == [
        job.pk]
    assert api.get("/api/v1/reproductions/?kind=timing").json() == []
    bad = api.get("/api/v1/reproductions/?result=x&state=done")
    assert bad.status_code == 400
    assert set(bad.json()) == {"result", "state"} and "reproduced" in bad.json()["state"][0]
