"""Reproduction end to end: a real server process, real runner agents, the real reference benchmark."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Organization
from catalog.services import extension_benchmark_add
from ingest.models import Result, Round
from ingest.services.submissions import submission_upload
from runners import services
from runners.models import Attempt, ReproductionJob
from tests.people import make_people, open_round, set_phase, tar_gz_of
from tests.runners.conftest import Agent

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# How long a test waits for something that must happen: far longer than it takes even with every core
# busy, so that only a thing that never happens fails a test; a test that passes never waits this long.
PATIENCE_S = 900
# The time the "claimed" logs say each run took: a week, far from anything a training run here can take,
# so that the timing reproduction's mismatch never depends on how fast this machine is today.
CLAIMED_MS = 7 * 24 * 3600 * 1000


def _wait(predicate: Callable[[], object], what: str, *, agent: Agent | None = None,
          timeout: float = PATIENCE_S) -> None:
    """Poll until `predicate` holds; fail only if it never does (see PATIENCE_S)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    said = f"; the agent said:\n{agent.output()[-3000:]}" if agent is not None else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what}{said}")


@pytest.fixture(scope="session")
def reference_bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Five real runs of the reference benchmark, and a copy whose logs claim a week each."""
    try:
        from podium_reference.bundle import write_bundle
    except ImportError:
        return {}
    root = tmp_path_factory.mktemp("reference")
    honest = write_bundle(root / "honest", org="Acme", system="cpu-box", seeds=[1, 2, 3, 4, 5])
    slow = write_bundle(root / "claimed", org="Zeta", system="cpu-box", seeds=[6, 7, 8, 9, 10])
    for log in (slow / "results/cpu-box/podium_digits").glob("result_*.txt"):
        lines = log.read_text().splitlines(keepends=True)
        start = next(json.loads(ln.split(":::MLLOG ", 1)[1])["time_ms"] for ln in lines if '"run_start"' in ln)
        fixed = []
        for line in lines:
            if '"run_stop"' in line:  # the claim: run_stop a week after run_start
                line = re.sub(r'"time_ms": \d+', f'"time_ms": {start + CLAIMED_MS}', line)
            fixed.append(line)
        log.write_text("".join(fixed))
    return {"honest": honest, "claimed": slow}


@pytest.fixture
def setup(reference_bundles, tmp_path, reference_available):
    people = make_people()
    round_ = open_round(slug="ref-v6.1", ruleset="6.1.0")
    extension_benchmark_add(round=round_, key="podium_digits")
    operator = get_user_model().objects.create_user("operator", is_staff=True)

    def submit(kind: str, organization: Organization) -> Result:
        archive = tmp_path / f"{kind}.tar.gz"
        archive.write_bytes(tar_gz_of(reference_bundles[kind]))
        submission_upload(actor=people.alice, organization=organization, round=round_, archive=archive,
                          original_name=archive.name)
        return Result.objects.current().get(organization=organization, benchmark_key="podium_digits")

    return people, operator, submit


def test_an_agent_reproduces_a_result_and_a_far_off_claim_is_a_mismatch(setup, server, start_agent) -> None:
    people, operator, submit = setup
    honest = submit("honest", people.acme)
    claimed = submit("claimed", people.zeta)
    assert honest.verdict == claimed.verdict == "verified"
    assert claimed.score == pytest.approx(CLAIMED_MS / 60_000)  # what the logs claim, not a measured time
    converge = services.job_create(result=honest, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    timing = services.job_create(result=claimed, kind=ReproductionJob.Kind.TIMING, actor=operator)
    runner, token = services.runner_create(name="cpu-runner", actor=operator)
    # Timing verdicts come only from hardware an operator vouched for: this runner, CPU-only.
    services.runner_approve(runner=runner, accelerator_model="cpu", accelerator_count=0, actor=operator)
    agent = start_agent(token, "cpu-runner")

    def both_done() -> bool:
        return all(ReproductionJob.objects.get(pk=j.pk).is_final for j in (converge, timing))

    _wait(both_done, "both jobs to end", agent=agent)
    converge.refresh_from_db()
    timing.refresh_from_db()
    assert converge.state == ReproductionJob.State.REPRODUCED, converge.verdict_detail
    assert converge.verdict_detail["epochs"] <= converge.verdict_detail["allowed_epochs"]
    assert timing.state == ReproductionJob.State.MISMATCH, timing.verdict_detail
    # Minutes on this machine against a week: off by far more than the tolerance, however loaded it is.
    assert timing.verdict_detail["score"] == pytest.approx(claimed.score)
    detail = timing.verdict_detail
    assert detail["minutes"] < detail["score"] - detail["tolerance_minutes"]
    assert Result.objects.get(pk=honest.pk).reproduction == "reproduced"
    assert Result.objects.get(pk=claimed.pk).reproduction == "mismatch"
    attempt = converge.attempts.get()
    assert attempt.outcome == Attempt.Outcome.FINISHED and attempt.log_sha256 and ":::MLLOG" in attempt.log_tail
    job_url = f"{server.url}/reproductions/{timing.pk}/"
    with pytest.raises(urllib.error.HTTPError) as embargoed:  # the round is not published yet
        urllib.request.urlopen(job_url)
    assert embargoed.value.code == 404
    set_phase(honest.round, Round.Phase.PUBLISHED)
    page = urllib.request.urlopen(job_url).read().decode()
    assert "Mismatch" in page and "tolerance" in page


def test_a_killed_agent_loses_its_lease_and_another_finishes_as_attempt_2(setup, server, start_agent) -> None:
    people, operator, submit = setup
    job = services.job_create(result=submit("honest", people.acme), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    ReproductionJob.objects.filter(pk=job.pk).update(module="tests.runner_fixtures.slow_job",
                                                    config={**job.config, "sleep_seconds": 3})
    _, token = services.runner_create(name="doomed", actor=operator)
    doomed = start_agent(token, "doomed")
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).state == ReproductionJob.State.RUNNING, "the first agent")
    doomed.kill()
    # Its lease runs out; the sweeper hands the job on as attempt 2.
    from tests.runners.conftest import expire_leases

    assert services.attempts_sweep(now=expire_leases()) == [job.pk]
    _, token2 = services.runner_create(name="survivor", actor=operator)
    start_agent(token2, "survivor", "--once")
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).is_final, "the second agent")
    job.refresh_from_db()
    first, second = job.attempts.order_by("number")
    assert (first.outcome, second.outcome) == (Attempt.Outcome.EXPIRED, Attempt.Outcome.FINISHED)
    assert (first.runner.name, second.runner.name) == ("doomed", "survivor")
    assert job.state == ReproductionJob.State.REPRODUCED


def test_a_late_report_from_an_expired_attempt_gets_409(setup, server, start_agent) -> None:
    people, operator, submit = setup
    job = services.job_create(result=submit("honest", people.acme), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    _, silent_token = services.runner_create(name="silent", actor=operator)

    def call(path: str, body: dict, secret: str = "") -> int:
        request = urllib.request.Request(f"{server.url}/api/agent/v1/{path}", data=json.dumps(body).encode(),
                                         method="POST", headers={"Authorization": f"Bearer {silent_token}",
                                                                 "Content-Type": "application/json",
                                                                 "X-Attempt-Secret": secret})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status if response.status != 200 else json.loads(response.read()) or 200
        except urllib.error.HTTPError as exc:
            return exc.code

    claim = call("claim", {"accelerators": {"model": "cpu", "count": 0}, "free_indexes": []})
    attempt = claim["attempt"]
    from tests.runners.conftest import expire_leases

    services.attempts_sweep(now=expire_leases())
    _, token = services.runner_create(name="next", actor=operator)
    start_agent(token, "next", "--once")
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).is_final, "attempt 2")
    late = call(f"attempts/{attempt['id']}/complete", {"outcome": "finished", "exit_code": 0}, attempt["secret"])
    assert late == 409
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.REPRODUCED and job.current_attempt.number == 2


def test_the_agent_rides_out_a_server_restart(setup, server, start_agent) -> None:
    people, operator, submit = setup
    job = services.job_create(result=submit("honest", people.acme), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    ReproductionJob.objects.filter(pk=job.pk).update(module="tests.runner_fixtures.slow_job",
                                                    config={**job.config, "sleep_seconds": 4})
    # A lease far longer than any restart, however loaded the machine: what is tested is that the agent
    # rides out an outage shorter than its lease, not how fast Django starts (a restart took 9 s once).
    server.stop()
    server.env["PODIUM_RUNNER_LEASE"] = "300"
    server.start()
    _, token = services.runner_create(name="patient", actor=operator)
    agent = start_agent(token, "patient", "--once")
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).state == ReproductionJob.State.RUNNING, "the job to run")
    server.stop()

    def outage_seen() -> bool:  # a heartbeat (or, had the job ended, its report) failed and will be retried
        output = agent.output()
        return "trying again at the next beat" in output or "retrying in" in output

    _wait(outage_seen, "the agent to meet the stopped server", agent=agent)
    server.start()
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).is_final, "the job to end after the restart", agent=agent)
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.REPRODUCED and job.attempts.count() == 1


def test_a_job_past_its_time_limit_is_stopped_and_marked(setup, server, start_agent) -> None:
    people, operator, submit = setup
    job = services.job_create(result=submit("honest", people.acme), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    ReproductionJob.objects.filter(pk=job.pk).update(module="tests.runner_fixtures.slow_job", time_limit_seconds=2,
                                                    config={**job.config, "sleep_seconds": 60})
    _, token = services.runner_create(name="strict", actor=operator)
    start_agent(token, "strict", "--once")
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).is_final, "the time limit")
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED and "time limit" in job.failure_reason
    assert job.attempts.get().outcome == Attempt.Outcome.TIMEOUT


def test_two_agents_never_run_the_same_attempt(setup, server, start_agent) -> None:
    people, operator, submit = setup
    result = submit("honest", people.acme)
    jobs = [services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator) for _ in range(6)]
    for name in ("left", "right"):
        _, token = services.runner_create(name=name, actor=operator)
        start_agent(token, name)
    _wait(lambda: all(ReproductionJob.objects.get(pk=j.pk).is_final for j in jobs), "six jobs on two agents")
    attempts = Attempt.objects.filter(job__in=jobs)
    assert attempts.count() == 6  # one attempt per job: no job was leased twice
    assert all(a.outcome == Attempt.Outcome.FINISHED for a in attempts)
    assert {a.runner.name for a in attempts} <= {"left", "right"}
