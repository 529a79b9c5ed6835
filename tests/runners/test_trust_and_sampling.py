"""Trust in runners (operator approval for timing, the inventory against the declared hardware), datasets
declared by checksum, benchmarks added to a round by a command, and spot-check samples with a seed."""

from __future__ import annotations

import datetime
import random
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import AuditEvent
from catalog.models import Round
from runners import services
from runners.inventory import hardware_problem, parse_inventory
from runners.models import Dataset, ReproductionJob, ReproductionSample
from runners.sampling import sample_draw, samples_due
from runners.tasks import sweep_leases
from tests.runners.test_agent_api import CPU, GPU8, _agent, _claim, _complete, _result

pytestmark = pytest.mark.django_db
H100_SMI = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def operator():
    return get_user_model().objects.create_user("ops", is_staff=True, is_superuser=True)


# --- approval and inventory ------------------------------------------------------------------------------

def test_timing_jobs_go_only_to_runners_approved_for_that_hardware(operator) -> None:
    job = services.job_create(result=_result(), kind=ReproductionJob.Kind.TIMING, actor=operator)
    unapproved, _ = _agent(operator, "unapproved")
    assert _claim(unapproved, GPU8) is None  # right hardware, as it says: not enough without an operator
    other, _ = _agent(operator, "a100-approved", approve=("NVIDIA A100-SXM4-80GB", 8))
    assert _claim(other, GPU8) is None  # approved for other hardware than it now reports
    fewer, _ = _agent(operator, "four-approved", approve=(H100_SMI, 4))
    assert _claim(fewer, GPU8) is None
    trusted, runner = _agent(operator, "trusted", approve=(H100_SMI, 8))
    assert _claim(trusted, GPU8)["job"]["id"] == job.pk
    event = AuditEvent.objects.get(action="runner.approve", subject_id=runner.pk)
    assert event.after == {"model": H100_SMI, "count": 8}


@pytest.mark.parametrize(("model", "count"), [("cpu", 2), ("NVIDIA H100", 0), ("", 1), ("x", -1)])
def test_an_approval_that_makes_no_sense_is_refused(operator, model, count) -> None:
    runner, _ = services.runner_create(name="r", actor=operator)
    with pytest.raises(services.JobError, match="Approve a model and a count"):
        services.runner_approve(runner=runner, accelerator_model=model, accelerator_count=count, actor=operator)


def test_the_approve_command_and_its_revocation(operator) -> None:
    services.runner_create(name="box", actor=operator)
    out = StringIO()
    call_command("approve_runner", "box", "--model", "cpu", "--count", "0", stdout=out)
    assert out.getvalue().strip() == "box: approved for timing on 0 × cpu"
    call_command("approve_runner", "box", "--revoke", stdout=out)
    assert AuditEvent.objects.filter(action="runner.unapprove").count() == 1
    with pytest.raises(CommandError, match="no runner 'nope'"):
        call_command("approve_runner", "nope", "--model", "cpu", "--count", "0")


def test_an_inventory_that_is_not_the_declared_hardware_fails_the_attempt(operator) -> None:
    job = services.job_create(result=_result(), kind=ReproductionJob.Kind.TIMING, actor=operator)
    liar, _ = _agent(operator, "liar", approve=(H100_SMI, 8))
    # Labels of 8 × H100, and an inventory (nvidia-smi -q) of a host without any GPU.
    claim = _claim(liar, {**GPU8, "inventory": CPU["inventory"]})
    assert claim["job"]["id"] == job.pk
    assert _complete(liar, claim, outcome="finished").status_code == 200
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED
    assert job.failure_reason == "hardware: the runner declared 8 accelerator(s), its inventory lists 0 (0 with a " \
                                 "product name)"


def test_the_inventory_is_read_like_nvidia_smi_prints_it() -> None:
    smi = ("==============NVSMI LOG==============\nAttached GPUs                             : 2\n"
           "GPU 00000000:18:00.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n"
           "GPU 00000000:2A:00.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n")
    inventory = parse_inventory(smi)
    assert inventory is not None and inventory.count == 2 and inventory.products == (H100_SMI, H100_SMI)
    assert hardware_problem(declared_model="NVIDIA H100-SXM5-80GB", declared_count=2, inventory_text=smi) == ""
    assert "its inventory lists NVIDIA A100" in hardware_problem(
        declared_model=H100_SMI, declared_count=2, inventory_text=smi.replace("H100 80GB HBM3", "A100-SXM4-80GB"))
    assert "no hardware inventory" in hardware_problem(declared_model="cpu", declared_count=0, inventory_text="")
    assert "no hardware inventory" in hardware_problem(declared_model="cpu", declared_count=0,
                                                       inventory_text="Attached GPUs : lots")
    assert hardware_problem(declared_model="cpu", declared_count=0, inventory_text=CPU["inventory"]) == ""


# --- datasets ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sha256", ["", "abc", "g" * 64, "0" * 65])
def test_a_dataset_checksum_must_be_a_sha256(operator, sha256) -> None:
    with pytest.raises(services.JobError, match="sha256"):
        services.dataset_declare(benchmark_key="podium_digits", sha256=sha256, actor=operator)
    assert not Dataset.objects.exists()


def test_a_declared_dataset_goes_with_the_claim_and_the_command_changes_it(operator) -> None:
    out = StringIO()
    call_command("declare_dataset", "podium_digits", "A" * 64, stdout=out)
    assert out.getvalue().strip() == f"podium_digits: sha256 {'a' * 64}"
    call_command("declare_dataset", "podium_digits", "b" * 64, stdout=out)
    assert Dataset.objects.get().sha256 == "b" * 64
    assert [e.after["sha256"] for e in AuditEvent.objects.filter(action="dataset.declare").order_by("pk")] == [
        "a" * 64, "b" * 64]


# --- benchmarks added to a round ------------------------------------------------------------------------

def test_benchmarks_are_added_from_the_catalog_by_a_command(operator) -> None:
    round_ = Round.objects.create(slug="v4-test", name="v4 test", ruleset="4.0.0")
    out = StringIO()
    call_command("add_benchmarks", "v4-test", "bert", "podium_digits", stdout=out)
    assert sorted(round_.benchmarks.values_list("key", flat=True)) == ["bert", "podium_digits"]
    assert "v4-test: bert" in out.getvalue()
    event = AuditEvent.objects.get(action="round.benchmarks_add")
    assert event.after["benchmarks"] == ["bert", "podium_digits"] and event.before == {"benchmarks": []}
    with pytest.raises(CommandError, match=r"no benchmark 'warp_drive' for ruleset 4\.0\.0: the catalog has .*bert"):
        call_command("add_benchmarks", "v4-test", "resnet", "warp_drive")
    assert sorted(round_.benchmarks.values_list("key", flat=True)) == ["bert", "podium_digits"]  # all or nothing
    with pytest.raises(CommandError, match="no round 'nope'"):
        call_command("add_benchmarks", "nope", "bert")


# --- spot-check samples ---------------------------------------------------------------------------------

def _round_of_results(count: int) -> tuple[Round, list[int]]:
    first = _result(accelerators=0, model="")
    ids = [first.pk]
    from tests.factories import ResultFactory, RunFactory, SystemFactory

    for index in range(count - 1):
        system = SystemFactory(round=first.round, accelerator_count=0, accelerator_model_name="")
        result = ResultFactory(system=system, benchmark=first.benchmark, score=0.1, raw_score=0.1,
                               system_slug=f"box-{index}")
        RunFactory(result=result, position=0, seeds=[1], hyperparameters={"global_batch_size": 32})
        ids.append(result.pk)
    return first.round, ids


def test_a_sample_with_a_fixed_seed_is_the_same_sample_and_is_recorded(operator) -> None:
    round_, ids = _round_of_results(6)
    sample = sample_draw(round=round_, size=3, seed=20261123, actor=operator)
    expected = sorted(random.Random(20261123).sample(sorted(ids), 3))
    assert sample.result_ids == expected and sample.population == sorted(ids)
    jobs = ReproductionJob.objects.filter(pk__in=sample.job_ids)
    assert sorted(jobs.values_list("result_id", flat=True)) == expected
    event = AuditEvent.objects.get(action="reproduction.sample")
    assert (event.after["seed"], event.after["results"]) == (20261123, expected)
    out = StringIO()
    call_command("sample_reproductions", round_.slug, "--size", "3", "--seed", "20261123", stdout=out)
    assert out.getvalue().startswith(f"seed 20261123: results {expected} of 6")
    with pytest.raises(CommandError, match="at least one"):
        call_command("sample_reproductions", round_.slug, "--size", "0")


def test_a_round_that_asks_for_a_sample_gets_one_once_its_deadline_passed(operator) -> None:
    round_, ids = _round_of_results(4)
    round_.reproduction_sample_size = 2
    round_.submission_deadline = timezone.now() + datetime.timedelta(days=1)
    round_.save()
    assert samples_due() == []  # not before the deadline
    round_.submission_deadline = timezone.now() - datetime.timedelta(minutes=1)
    round_.save()
    drawn = sweep_leases()["samples"]
    sample = ReproductionSample.objects.get()
    assert drawn == [sample.pk] and len(sample.result_ids) == 2 and set(sample.result_ids) <= set(ids)
    assert sample.result_ids == sorted(random.Random(sample.seed).sample(sorted(ids), 2))
    assert samples_due() == []  # once
    assert ReproductionJob.objects.count() == 2
