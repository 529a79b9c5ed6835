"""The agent API on its own: leases, heartbeats, logs, idempotent completion, the sweeper, security."""

from __future__ import annotations

import datetime
import hashlib
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import TestCase
from django.utils import timezone
from rest_framework.test import APIClient

from ingest.models import Result
from runners import services
from runners.models import Attempt, ReproductionJob
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, RunFactory, SystemFactory
from tests.people import token_for

pytestmark = pytest.mark.django_db
CPU = {"name": "cpu-box", "accelerators": {"model": "cpu", "count": 0, "memory_gb": None, "indexes": []},
       "free_indexes": [], "cpus": 2, "memory_gb": 24.0, "software": {"python": "3.11"},
       "inventory": "CPU inventory\nAttached GPUs : 0\n"}
GPU8 = {"name": "gpu-box", "accelerators": {"model": "NVIDIA H100-SXM5-80GB", "count": 8, "memory_gb": 80.0,
                                            "indexes": list(range(8))},
        "free_indexes": list(range(8)), "cpus": 16, "memory_gb": 128.0, "software": {},
        "inventory": "Attached GPUs : 8\n" + "GPU 0\n    Product Name : NVIDIA H100 80GB HBM3\n" * 8}


@pytest.fixture
def operator():
    return get_user_model().objects.create_user("ops", is_staff=True)


def _result(accelerators: int = 8, model: str = "NVIDIA H100-SXM5-80GB") -> Result:
    round_ = RoundFactory(ruleset="6.1.0")
    benchmark = BenchmarkFactory(round=round_, key="podium_digits", required_runs=5)
    system = SystemFactory(round=round_, accelerator_count=accelerators, accelerator_model_name=model)
    result = ResultFactory(system=system, benchmark=benchmark, score=0.1, raw_score=0.1)
    for position, minutes in enumerate([0.09, 0.1, 0.1, 0.1, 0.11]):
        RunFactory(result=result, position=position, time_to_train_min=minutes, seeds=[position + 1],
                   hyperparameters={"global_batch_size": 64, "opt_name": "adam", "opt_base_learning_rate": 0.003},
                   eval_curve=[{"epoch": e, "value": 0.9 + e / 100, "minutes": e / 10} for e in range(1, 9)])
    return result


def _agent(operator, name: str = "runner-1", approve: tuple[str, int] | None = None) -> tuple[APIClient, object]:
    """A runner and its API client; `approve` (model, count): the hardware an operator approved it for."""
    runner, token = services.runner_create(name=name, actor=operator)
    if approve is not None:
        services.runner_approve(runner=runner, accelerator_model=approve[0], accelerator_count=approve[1],
                                actor=operator)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client, runner


def _claim(client: APIClient, report: dict) -> dict | None:
    response = client.post("/api/agent/v1/claim", report, format="json")
    assert response.status_code in (200, 204), response.content
    return response.json() if response.status_code == 200 else None


def _beat(client: APIClient, claim: dict, **body):
    return client.post(f"/api/agent/v1/attempts/{claim['attempt']['id']}/heartbeat", body or {"log_lines": []},
                       format="json", HTTP_X_ATTEMPT_SECRET=claim["attempt"]["secret"])


def _complete(client: APIClient, claim: dict, outcome: str = "failed", *, judge: bool = True, **extra):
    """Complete the attempt; with `judge`, the judging task queued on commit runs too (eagerly, as without a
    broker: the test's transaction never commits, so the callbacks are run by hand)."""
    with TestCase.captureOnCommitCallbacks(execute=judge):
        return client.post(f"/api/agent/v1/attempts/{claim['attempt']['id']}/complete",
                           {"outcome": outcome, "exit_code": 1, "output_tail": "boom", **extra}, format="json",
                           HTTP_X_ATTEMPT_SECRET=claim["attempt"]["secret"])


def _read(client: APIClient, claim: dict):
    return client.get(f"/api/agent/v1/attempts/{claim['attempt']['id']}",
                      HTTP_X_ATTEMPT_SECRET=claim["attempt"]["secret"])


def test_a_claim_leases_a_job_the_runner_can_serve(operator) -> None:
    job = services.job_create(result=_result(), kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    client, _ = _agent(operator)
    claim = _claim(client, CPU)
    assert claim["job"]["id"] == job.pk and claim["job"]["module"] == "podium_reference.digits"
    assert claim["job"]["config"]["opt_base_learning_rate"] == 0.003 and claim["job"]["config"]["seed"] == 1
    assert claim["attempt"]["number"] == 1 and claim["assignment"]["accelerator_indexes"] == []
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.LEASED
    assert _claim(client, CPU) is None  # nothing else queued: 204


def test_timing_jobs_go_only_to_a_runner_like_the_system(operator) -> None:
    services.job_create(result=_result(accelerators=8), kind=ReproductionJob.Kind.TIMING, actor=operator)
    cpu, _ = _agent(operator, "cpu", approve=("cpu", 0))
    assert _claim(cpu, CPU) is None
    small = dict(GPU8, accelerators={**GPU8["accelerators"], "count": 4, "indexes": [0, 1, 2, 3]},
                 free_indexes=[0, 1, 2, 3])
    four, _ = _agent(operator, "four", approve=("NVIDIA H100 80GB HBM3", 4))
    assert _claim(four, small) is None
    gpu, _ = _agent(operator, "eight", approve=("NVIDIA H100 80GB HBM3", 8))
    claim = _claim(gpu, GPU8)
    assert claim is not None and claim["assignment"]["accelerator_indexes"] == list(range(8))


def test_small_jobs_are_packed_onto_free_accelerators_biggest_first(operator) -> None:
    result = _result(accelerators=8)
    one = services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    ReproductionJob.objects.filter(pk=one.pk).update(accelerator_count=1)
    four = services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    ReproductionJob.objects.filter(pk=four.pk).update(accelerator_count=4)
    three = services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    ReproductionJob.objects.filter(pk=three.pk).update(accelerator_count=3)
    client, _ = _agent(operator)
    first = _claim(client, GPU8)
    assert first["job"]["id"] == four.pk and first["assignment"]["accelerator_indexes"] == [0, 1, 2, 3]
    second = _claim(client, dict(GPU8, free_indexes=[4, 5, 6, 7]))
    assert second["job"]["id"] == three.pk and second["assignment"]["accelerator_indexes"] == [4, 5, 6]
    third = _claim(client, dict(GPU8, free_indexes=[7]))
    assert third["job"]["id"] == one.pk and third["assignment"]["accelerator_indexes"] == [7]


def test_heartbeats_extend_the_lease_keep_the_log_tail_and_carry_cancel(operator) -> None:
    job = services.job_create(result=_result(), kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    client, _ = _agent(operator)
    claim = _claim(client, CPU)
    before = Attempt.objects.get().lease_expires_at
    answer = _beat(client, claim, progress=0.5, log_lines=[":::MLLOG {\"key\": \"run_start\"}"])
    assert answer.status_code == 200 and answer.json()["cancel"] is False
    attempt = Attempt.objects.get()
    assert attempt.lease_expires_at >= before and "run_start" in attempt.log_tail and attempt.progress == 0.5
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.RUNNING
    services.job_cancel(job=job, actor=operator)
    assert _beat(client, claim).json()["cancel"] is True


def test_complete_is_idempotent_and_a_late_report_from_an_old_attempt_gets_409(operator) -> None:
    job = services.job_create(result=_result(), kind=ReproductionJob.Kind.CONVERGENCE, actor=operator, max_attempts=3)
    client, _ = _agent(operator)
    first = _claim(client, CPU)
    # Attempt 1 goes silent: its lease expires, the sweeper re-queues the job as attempt 2.
    Attempt.objects.filter(pk=first["attempt"]["id"]).update(lease_expires_at=timezone.now() - datetime.timedelta(1))
    assert services.attempts_sweep() == [job.pk]
    second = _claim(client, CPU)
    assert second["attempt"]["number"] == 2
    assert _beat(client, first).status_code == 409
    assert _complete(client, first).status_code == 409
    done = _complete(client, second)
    again = _complete(client, second, "finished", exit_code=0)  # whatever its body: changes nothing
    assert done.status_code == again.status_code == 200
    assert (done.json()["judgement"], done.json()["job_state"]) == ("awaiting", "judging")
    assert again.json() == _read(client, second).json() == {
        "attempt": second["attempt"]["id"], "outcome": "failed", "judgement": "judged", "job_state": "failed",
        "verdict": None, "reason": "the job failed (exit code 1)"}
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED and job.attempts.count() == 2
    assert job.attempts.get(number=2).judging_tries == 1


def test_expired_leases_give_up_after_the_maximum_attempts(operator) -> None:
    job = services.job_create(result=_result(), kind=ReproductionJob.Kind.CONVERGENCE, actor=operator, max_attempts=2)
    client, _ = _agent(operator)
    for _ in range(2):
        claim = _claim(client, CPU)
        Attempt.objects.filter(pk=claim["attempt"]["id"]).update(lease_expires_at=timezone.now())
        services.attempts_sweep(now=timezone.now() + datetime.timedelta(seconds=1))
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED and "platform" in job.failure_reason
    assert Result.objects.get(pk=job.result_id).reproduction == "failed"


def test_the_log_upload_checks_its_sha256(operator) -> None:
    services.job_create(result=_result(), kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    client, _ = _agent(operator)
    claim = _claim(client, CPU)
    url = f"/api/agent/v1/attempts/{claim['attempt']['id']}/log"
    data = b":::MLLOG {}\n"
    bad = client.put(url, data, content_type="text/plain", HTTP_X_ATTEMPT_SECRET=claim["attempt"]["secret"],
                     HTTP_X_CONTENT_SHA256="0" * 64)
    assert bad.status_code == 400
    good = client.put(url, data, content_type="text/plain", HTTP_X_ATTEMPT_SECRET=claim["attempt"]["secret"],
                      HTTP_X_CONTENT_SHA256=hashlib.sha256(data).hexdigest())
    assert good.status_code == 200 and good.json()["bytes"] == len(data)


def test_an_attempt_secret_is_refused_for_another_attempt(operator) -> None:
    result = _result()
    for _ in range(2):
        services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    client, _ = _agent(operator)
    one, two = _claim(client, CPU), _claim(client, CPU)
    crossed = client.post(f"/api/agent/v1/attempts/{two['attempt']['id']}/heartbeat", {"log_lines": []},
                          format="json", HTTP_X_ATTEMPT_SECRET=one["attempt"]["secret"])
    assert crossed.status_code == 404
    other, _ = _agent(operator, "runner-2")  # another runner cannot report on this runner's attempt
    assert _beat(other, one).status_code == 404


def test_a_runner_token_is_good_only_on_the_agent_api(operator) -> None:
    client, _ = _agent(operator)
    for url in ("/api/v1/results/", "/api/v1/submissions/", "/api/v1/flags/", "/api/v1/rounds/",
                "/api/v1/reproductions/"):
        assert client.get(url).status_code == 401, url
    assert client.get("/operators/runners/").status_code == 302  # the web pages know no runner tokens
    person = APIClient()
    person.credentials(HTTP_AUTHORIZATION=f"Token {token_for(operator)}")
    assert person.post("/api/agent/v1/claim", CPU, format="json").status_code == 401
    assert APIClient().post("/api/agent/v1/claim", CPU, format="json").status_code == 401


@pytest.mark.parametrize("prefix", ["ab\x00cd", "a" * 17, "ab%cd", "ab'cd"],
                         ids=["nul", "too_long", "percent", "quote"])
def test_a_runner_token_whose_prefix_no_token_has_is_refused_not_a_server_error(operator, prefix: str) -> None:
    _, token = services.runner_create(name="runner-1", actor=operator)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer prn_{prefix}_{token.split('_', 2)[2]}")
    # The test client re-raises a server error (before: PostgreSQL refused the NUL in its lookup).
    assert client.post("/api/agent/v1/claim", CPU, format="json").status_code == 401


def test_a_revoked_runner_token_is_refused(operator) -> None:
    client, runner = _agent(operator)
    services.runner_token_revoke(token=runner.tokens.get(), actor=operator)
    assert client.post("/api/agent/v1/claim", CPU, format="json").status_code == 401


def test_only_benchmarks_with_a_runnable_implementation_can_be_reproduced(operator) -> None:
    result = ResultFactory()
    with pytest.raises(services.JobError, match="no runnable implementation"):
        services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)


@pytest.mark.parametrize("field, value", [
    ("software", {"python": "3.11\x00"}),
    ("software", {"py\x00thon": "3.11"}),
    ("software", {"nested": {"deep": ["not", "text"]}}),
    ("software", {f"package-{n}": "1.0" for n in range(1001)}),
    ("software", {"python": "x" * 1001}),
    ("datasets", {"res\x00net": ""}),
    ("datasets", {"res\ud800net": ""}),
    ("software", {"py\udc80": "3.11"}),
    ("name", "box\x00"),
    ("inventory", "GPU\x00"),
])
def test_a_claim_with_hostile_text_is_refused_and_stores_nothing(operator, field: str, value: object) -> None:
    """What a runner reports is stored as text (PostgreSQL's jsonb and text hold no NUL; the operators' page
    prints each software entry as `name version`): a NUL, a nested value or an outsized report is a 400,
    never a 500, and the runner's record keeps what it had."""
    client, runner = _agent(operator)
    before = {"software": runner.software, "datasets": runner.datasets, "last_seen_at": runner.last_seen_at}
    # Sent as JSON escapes (a lone surrogate cannot be written as UTF-8), as a hostile client would.
    response = client.post("/api/agent/v1/claim", json.dumps({**CPU, field: value}), content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    runner.refresh_from_db()
    assert {"software": runner.software, "datasets": runner.datasets, "last_seen_at": runner.last_seen_at} == before


def test_a_job_that_prints_a_nul_keeps_its_heartbeats_and_its_completion(operator) -> None:
    """A job's output is whatever it printed, a NUL byte included: the heartbeat keeps the lines and the
    completion is recorded (the NUL dropped, as the service stores text), where both were refused (400): the
    agent dropped the beat's lines, and a refused completion left the attempt to expire and run again."""
    services.job_create(result=_result(), kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    client, _ = _agent(operator)
    claim = _claim(client, CPU)
    answer = _beat(client, claim, log_lines=["epoch 1\x00 loss 0.5", "\x00"])
    assert answer.status_code == 200, answer.content
    assert "epoch 1 loss 0.5" in Attempt.objects.get().log_tail
    # Undecodable output arrives as lone surrogates (JSON escapes): kept as U+FFFD, not refused.
    beat = client.post(f"/api/agent/v1/attempts/{claim['attempt']['id']}/heartbeat",
                       json.dumps({"log_lines": ["bytes \udcff here"]}), content_type="application/json",
                       HTTP_X_ATTEMPT_SECRET=claim["attempt"]["secret"])
    assert beat.status_code == 200, beat.content
    assert "bytes \ufffd here" in Attempt.objects.get().log_tail
    done = _complete(client, claim, output_tail="Traceback\x00 (most recent call last)")
    assert done.status_code == 200, done.content
    attempt = Attempt.objects.get()
    assert attempt.outcome == "failed" and attempt.output_tail == "Traceback (most recent call last)"
