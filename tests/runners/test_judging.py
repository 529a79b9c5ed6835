"""What the server makes of a completion: logs that are not the job's, cancels that outlive their runner,
a queue longer than one page, badges, and one throttle bucket per runner."""

from __future__ import annotations

import datetime
import hashlib
import json

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.throttling import ScopedRateThrottle

from ingest.models import Result
from runners import judging, services
from runners.models import Attempt, ReproductionJob
from tests.runners.test_agent_api import CPU, GPU8, _agent, _claim, _complete, _read, _result

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return get_user_model().objects.create_user("ops", is_staff=True)


def _line(key: str, value: object, time_ms: int, event: str = "POINT_IN_TIME", **metadata: object) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": event, "key": key,
                                     "value": value, "metadata": {"file": "digits.py", "lineno": 1, **metadata}})


def _log(seed: int, batch: int = 64) -> bytes:
    lines = [_line("seed", seed, 1), _line("global_batch_size", batch, 2), _line("opt_name", "adam", 3),
             _line("opt_base_learning_rate", 0.003, 4), _line("run_start", None, 10, "INTERVAL_START"),
             _line("run_stop", None, 2000, "INTERVAL_END", status="success")]
    return ("\n".join(lines) + "\n").encode()


def _finish(client, claim: dict, data: bytes, *, sha256: str | None = None) -> dict:
    """Upload the log and complete; the judging task runs; the attempt as the agent then reads it."""
    secret = claim["attempt"]["secret"]
    url = f"/api/agent/v1/attempts/{claim['attempt']['id']}"
    digest = hashlib.sha256(data).hexdigest()
    assert client.put(f"{url}/log", data, content_type="text/plain", HTTP_X_ATTEMPT_SECRET=secret,
                      HTTP_X_CONTENT_SHA256=digest).status_code == 200
    done = _complete(client, claim, "finished", exit_code=0, log_sha256=sha256 or digest)
    assert done.status_code == 200, done.content
    read = _read(client, claim)
    assert read.status_code == 200, read.content
    return read.json()


@pytest.mark.parametrize(("data", "sha256", "why"), [
    (b"a" * 10_000, None, "no run_start: it is not the MLLOG record of a training run"),
    (_log(seed=3), None, "it logs seed [3], the job asked for 1"),
    (_log(seed=1, batch=128), None, "global_batch_size is 128, the job asked for 64"),
    (_log(seed=1), "f" * 64, "the completion names another log than the one uploaded"),
])
def test_a_log_that_is_not_this_job_s_run_fails_the_job_without_a_verdict(operator, data, sha256, why) -> None:
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    client, _ = _agent(operator)
    answer = _finish(client, _claim(client, CPU), data, sha256=sha256)
    job.refresh_from_db()
    assert (answer["judgement"], answer["job_state"], answer["verdict"]) == ("judged", "failed", None)
    assert job.state == ReproductionJob.State.FAILED and why in job.failure_reason and why in answer["reason"]


def test_a_cancel_whose_runner_went_silent_ends_cancelled(operator) -> None:
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator, max_attempts=3)
    client, _ = _agent(operator)
    claim = _claim(client, CPU)
    services.job_cancel(job=job, actor=operator)
    Attempt.objects.filter(pk=claim["attempt"]["id"]).update(lease_expires_at=timezone.now())
    assert services.attempts_sweep(now=timezone.now() + datetime.timedelta(seconds=1)) == [job.pk]
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.CANCELLED and job.finished_at is not None
    assert _claim(client, CPU) is None


def test_a_claim_finds_a_fitting_job_behind_a_long_queue_of_others(operator) -> None:
    gpu_result = _result()  # 8 H100s
    for _ in range(services.CLAIM_PAGE + 20):  # timing jobs only an 8-GPU H100 runner can take
        services.job_create(result=gpu_result, kind=ReproductionJob.Kind.TIMING, actor=operator)
    tiny = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                               actor=operator)
    four_a100 = {**GPU8, "accelerators": {**GPU8["accelerators"], "model": "NVIDIA A100-SXM4-80GB"}}
    client, _ = _agent(operator)
    assert _claim(client, four_a100)["job"]["id"] == tiny.pk


def test_a_claim_puts_expired_leases_back_without_celery_beat(operator) -> None:
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    gone, _ = _agent(operator)
    first = _claim(gone, CPU)
    Attempt.objects.filter(pk=first["attempt"]["id"]).update(lease_expires_at=timezone.now())
    other, _ = _agent(operator, "runner-2")
    second = _claim(other, CPU)
    assert (second["job"]["id"], second["attempt"]["number"]) == (job.pk, 2)


def test_nvidia_smi_names_meet_mlperf_names_for_timing(operator) -> None:
    job = services.job_create(result=_result(), kind=ReproductionJob.Kind.TIMING, actor=operator)  # H100-SXM5-80GB
    smi = {**GPU8, "accelerators": {**GPU8["accelerators"], "model": "NVIDIA H100 80GB HBM3"}}
    client, _ = _agent(operator, approve=("NVIDIA H100 80GB HBM3", 8))
    assert _claim(client, smi)["job"]["id"] == job.pk


def test_a_judged_verdict_outranks_later_failures_on_the_badge(operator) -> None:
    result = _result(accelerators=0, model="")
    judged = services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    failed = services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    now = timezone.now()
    ReproductionJob.objects.filter(pk=judged.pk).update(state=ReproductionJob.State.MISMATCH, finished_at=now)
    ReproductionJob.objects.filter(pk=failed.pk).update(state=ReproductionJob.State.FAILED,
                                                        finished_at=now + datetime.timedelta(minutes=1))
    judging.result_badge_update(result_id=result.pk)
    assert Result.objects.get(pk=result.pk).reproduction == "mismatch"
    ReproductionJob.objects.filter(pk=judged.pk).delete()
    judging.result_badge_update(result_id=result.pk)
    assert Result.objects.get(pk=result.pk).reproduction == "failed"


def test_each_runner_has_its_own_throttle_bucket(operator, monkeypatch, settings) -> None:
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"agent": "3/minute"})
    busy, _ = _agent(operator)
    quiet, _ = _agent(operator, "runner-2")
    codes = [busy.post("/api/agent/v1/claim", CPU, format="json").status_code for _ in range(4)]
    assert codes == [204, 204, 204, 429]
    assert quiet.post("/api/agent/v1/claim", CPU, format="json").status_code == 204
