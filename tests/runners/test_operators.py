"""The operators' page: runners with their controls, the queue, and the job page's details."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from accounts.models import AuditEvent
from runners import services
from runners.models import Attempt, ReproductionJob, Runner
from tests.runners.test_agent_api import CPU, _agent, _claim, _complete, _result

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return get_user_model().objects.create_user("ops", is_staff=True)


@pytest.fixture
def web(operator) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def test_only_staff_open_the_operators_page(operator) -> None:
    assert Client().get("/operators/runners/").status_code == 302
    person = Client()
    person.force_login(get_user_model().objects.create_user("alice"))
    assert person.get("/operators/runners/").status_code == 302
    assert person.post("/operators/runners/new/", {"name": "sneaky"}).status_code == 302
    assert not Runner.objects.filter(name="sneaky").exists()


def test_disabling_a_runner_refuses_its_token_until_enabled_again(operator, web) -> None:
    client, runner = _agent(operator)
    assert web.post(f"/operators/runners/{runner.pk}/enabled/", {"enabled": "0"}).status_code == 302
    assert client.post("/api/agent/v1/claim", CPU, format="json").status_code == 401
    page = web.get("/operators/runners/").content.decode()
    assert "disabled" in page and ">Enable<" in page
    web.post(f"/operators/runners/{runner.pk}/enabled/", {"enabled": "1"})
    assert client.post("/api/agent/v1/claim", CPU, format="json").status_code == 204
    actions = list(AuditEvent.objects.filter(subject_id=runner.pk, action__startswith="runner.")
                   .values_list("action", flat=True).order_by("pk"))
    assert actions[-2:] == ["runner.disable", "runner.enable"]


def test_a_new_token_replaces_the_old_and_is_shown_once(operator, web) -> None:
    old, runner = _agent(operator)
    web.post(f"/operators/runners/{runner.pk}/token/")
    page = web.get("/operators/runners/").content.decode()
    assert "shown this once" in page
    assert "shown this once" not in web.get("/operators/runners/").content.decode()
    assert old.post("/api/agent/v1/claim", CPU, format="json").status_code == 401
    assert runner.tokens.filter(revoked_at__isnull=True).count() == 1


def test_cancel_goes_back_only_to_a_page_of_this_site(operator, web) -> None:
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    response = web.post(f"/operators/jobs/{job.pk}/cancel/", {"next": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == job.get_absolute_url()
    retried = web.post(f"/operators/jobs/{job.pk}/retry/", {"next": "/operators/runners/"})
    assert retried["Location"] == "/operators/runners/"


def test_the_job_page_shows_why_an_attempt_failed(operator, web) -> None:
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.TIMING,
                              actor=operator)
    client, _ = _agent(operator, approve=("cpu", 0))
    _complete(client, _claim(client, CPU), exit_code=1, output_tail="Traceback\nRuntimeError: CUDA out of memory")
    page = web.get(job.get_absolute_url()).content.decode()
    assert "RuntimeError: CUDA out of memory" in page
    assert "a CPU-only runner, as the system had no accelerators" in page
    assert Attempt.objects.get().outcome == "failed"


def test_create_runner_names_a_missing_creator(operator) -> None:
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("create_runner", "r1", "--by", "nobody")
    assert not Runner.objects.filter(name="r1").exists()


def test_an_operator_approves_what_a_runner_reports_and_withdraws_it(operator, web) -> None:
    client, runner = _agent(operator, "box")
    _claim(client, CPU)  # seen: it reported a CPU-only host
    page = web.get("/operators/runners/").content.decode()
    assert "Approve CPU only" in page
    assert web.post(f"/operators/runners/{runner.pk}/approval/").status_code == 302
    runner.refresh_from_db()
    assert (runner.approved_accelerator_model, runner.approved_accelerator_count) == ("cpu", 0)
    assert "0 × cpu" in web.get("/operators/runners/").content.decode()
    web.post(f"/operators/runners/{runner.pk}/approval/", {"revoke": "1"})
    runner.refresh_from_db()
    assert runner.approved_at is None
    assert Client().post(f"/operators/runners/{runner.pk}/approval/").status_code == 302  # to the admin login
    runner.refresh_from_db()
    assert runner.approved_at is None


@pytest.mark.parametrize(("limit", "attempts", "made"), [
    ("120", "2", (120, 2)), ("", "", (600, 3)), ("0", "3", None), ("-5", "3", None), ("9" * 30, "3", None),
    ("60", "11", None), ("sixty", "3", None),
])
def test_the_result_page_form_takes_a_time_limit_and_attempts(operator, web, limit, attempts, made) -> None:
    result = _result(accelerators=0, model="")
    response = web.post(f"/results/{result.pk}/reproduce/", {"kind": "convergence", "time_limit_seconds": limit,
                                                            "max_attempts": attempts})
    assert response.status_code == 302
    job = ReproductionJob.objects.filter(result=result).first()
    if made is None:
        assert job is None and response["Location"] == result.get_absolute_url()
    else:
        assert job is not None and (job.time_limit_seconds, job.max_attempts) == made


@pytest.mark.parametrize("name", ["box\x00", "tab\there", "x" * 121, "   "])
def test_a_runner_name_that_cannot_be_stored_is_refused_with_a_message(web, name: str) -> None:
    """Checked before any query: a NUL reaching PostgreSQL's lookup answered 500, an overlong name too."""
    response = web.post("/operators/runners/new/", {"name": name}, follow=True)
    assert response.status_code == 200
    assert "at most 120 characters" in response.content.decode()
    assert not Runner.objects.exists()


@pytest.mark.parametrize("limit", ["²", "١٢٠", "9" * 12, "-5", "1e3"])
def test_a_request_with_a_time_limit_that_is_no_whole_number_is_refused(operator, web, limit: str) -> None:
    result = _result()
    response = web.post(f"/results/{result.pk}/reproduce/", {"kind": "convergence", "time_limit_seconds": limit},
                        follow=True)
    assert response.status_code == 200
    assert "time limit must be between" in response.content.decode()
    assert not ReproductionJob.objects.exists()
