"""The generic job end to end: a real server, real agents, the MLCommons-layout podium_digits implementation
shipped in a bundle and run by its run_and_time.sh on this machine's CPU, with a dataset the runner holds."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import AuditEvent
from catalog.services import extension_benchmark_add
from ingest.implementations import implementation_for
from ingest.models import Implementation, Result
from ingest.services.submissions import submission_upload
from runners import services
from runners.models import ReproductionJob, Runner
from tests.people import make_people, open_round, tar_gz_of
from tests.runners.test_reproduction import _wait

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="session")
def shipped_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """Five real runs of podium_digits and the code that made them, in one submitter folder."""
    try:
        from podium_reference.bundle import write_bundle
    except ImportError:
        return None
    return write_bundle(tmp_path_factory.mktemp("shipped"), org="Acme", system="cpu-box", seeds=[1, 2, 3, 4, 5],
                        implementation=True)


@pytest.fixture
def dataset(tmp_path: Path, reference_available: None) -> tuple[Path, str]:
    from podium_reference.digits import write_dataset
    from runner_agent.datasets import tree_digest

    folder = tmp_path / "data" / "podium_digits"
    write_dataset(folder)
    return folder, tree_digest(folder)


def _upload(shipped_bundle: Path, tmp_path: Path) -> Result:
    people = make_people()
    round_ = open_round(slug="impl-v6.1", ruleset="6.1.0")
    extension_benchmark_add(round=round_, key="podium_digits")
    archive = tmp_path / "acme.tar.gz"
    archive.write_bytes(tar_gz_of(shipped_bundle))
    submission_upload(actor=people.alice, organization=people.acme, round=round_, archive=archive,
                      original_name=archive.name)
    return Result.objects.current().get(organization=people.acme, benchmark_key="podium_digits")


def test_the_shipped_implementation_is_reproduced_by_its_run_and_time_sh(
        shipped_bundle, dataset, tmp_path, server, start_agent) -> None:
    result = _upload(shipped_bundle, tmp_path)
    assert result.verdict == "verified"
    implementation = implementation_for(result)
    assert implementation is not None and implementation.systems == ["cpu-box"]
    assert implementation.path == "benchmarks/podium_digits/implementations/pytorch"
    assert {f["path"] for f in implementation.files} == {"Dockerfile", "README.md", "config_cpu-box.sh",
                                                          "digits.py", "run_and_time.sh"}
    operator = get_user_model().objects.create_user("operator", is_staff=True)
    folder, digest = dataset
    services.dataset_declare(benchmark_key="podium_digits", sha256=digest, actor=operator)
    job = services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    assert (job.implementation_id, job.system_config, job.module) == (implementation.pk, "config_cpu-box.sh", "")

    # A runner that holds no copy of the dataset asks for work and is never given the job.
    _, token = services.runner_create(name="no-data", actor=operator)
    bare = start_agent(token, "no-data", "--run-implementations")
    _wait(lambda: Runner.objects.filter(name="no-data", last_seen_at__isnull=False).exists(), "a claim", agent=bare)
    seen = Runner.objects.get(name="no-data").last_seen_at
    _wait(lambda: Runner.objects.get(name="no-data").last_seen_at > seen, "a second claim", agent=bare)
    bare.kill()
    assert ReproductionJob.objects.get(pk=job.pk).state == ReproductionJob.State.QUEUED
    assert not job.attempts.exists()

    # A runner whose copy does not have the checksum its operator declared fails the attempt, and says so.
    _, token = services.runner_create(name="stale-data", actor=operator)
    stale = start_agent(token, "stale-data", "--run-implementations", "--once",
                        "--dataset", f"podium_digits={folder},sha256={'0' * 64}")
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).is_final, "the stale runner's attempt", agent=stale)
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED
    assert f"dataset checksum mismatch for podium_digits: {folder.resolve()} has sha256 {digest}" in job.failure_reason

    # Retried, on a runner with the right copy: run_and_time.sh trains, its :::MLLOG output is the log.
    services.job_retry(job=job, actor=operator)
    _, token = services.runner_create(name="cpu-runner", actor=operator)
    agent = start_agent(token, "cpu-runner", "--run-implementations", "--dataset",
                        f"podium_digits={folder},sha256={digest}")
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).is_final, "the reproduction", agent=agent)
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.REPRODUCED, (job.failure_reason, job.verdict_detail,
                                                           job.attempts.last().output_tail)
    attempt = job.attempts.order_by("number").last()
    assert attempt.runner.name == "cpu-runner" and attempt.outcome == "finished"
    assert "STARTING TIMING RUN" in attempt.output_tail and "RESULT,PODIUM_DIGITS,1," in attempt.output_tail
    assert attempt.inventory.count("Attached GPUs") == 1 and "Attached GPUs                             : 0" \
        in attempt.inventory
    assert Result.objects.get(pk=result.pk).reproduction == "reproduced"
    staff = Client()
    staff.force_login(operator)
    page = staff.get(job.get_absolute_url()).content.decode()
    assert "Hardware inventory the runner reported" in page and "CPU inventory (no NVIDIA GPU)" in page
    assert f'href="{implementation.get_absolute_url()}"' in page and "config_cpu-box.sh" in page
    assert AuditEvent.objects.filter(action="implementation.create").count() == 1
    assert Implementation.objects.count() == 1


def test_the_implementation_is_browsable_under_the_results_embargo_and_linked_from_the_result(
        shipped_bundle, tmp_path, server, reference_available) -> None:
    from ingest.models import Round
    from tests.people import set_phase

    result = _upload(shipped_bundle, tmp_path)
    implementation = implementation_for(result)
    assert implementation is not None
    page_url = f"{server.url}{implementation.get_absolute_url()}"
    with pytest.raises(urllib.error.HTTPError) as embargoed:  # under the result's embargo, like its logs
        urllib.request.urlopen(page_url)
    assert embargoed.value.code == 404
    set_phase(result.round, Round.Phase.PUBLISHED)
    page = urllib.request.urlopen(page_url).read().decode()
    assert "config_cpu-box.sh" in page and implementation.digest in page
    result_page = urllib.request.urlopen(f"{server.url}{result.get_absolute_url()}").read().decode()
    assert f'href="{implementation.get_absolute_url()}"' in result_page  # the result links the code behind it
    script = urllib.request.urlopen(f"{page_url}files/run_and_time.sh").read().decode()
    assert "set -euo pipefail" in script and "digits.py" in script
    for hostile in ("files/../../etc/passwd", "files/%2e%2e/secret", "files/nope.sh"):
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{page_url}{hostile}")
        assert missing.value.code == 404


# A stand-in `docker` (no engine runs here): it records each call; `build` does nothing more, `run` becomes
# the container the way an engine would run it, mapping the mounts back to the host's folders and giving
# the command only the variables the agent passed with --env (and the "image's" interpreter, PYTHON).
FAKE_ENGINE = '''#!{python}
import json, os, sys
argv = sys.argv[1:]
with open({calls!r}, "a") as f:
    f.write(json.dumps(argv) + "\\n")
if argv[0] != "run":
    sys.exit(0)
mounts, env, workdir, i = [], {{}}, "/", 1
while i < len(argv) and argv[i].startswith("-"):
    flag = argv[i]
    if flag in ("--volume", "--env", "--workdir", "--name", "--user", "--gpus", "--device"):
        value = argv[i + 1]
        if flag == "--volume":
            host, inside = value.split(":")[:2]
            mounts.append((inside, host))
        elif flag == "--env":
            key, _, val = value.partition("=")
            env[key] = val
        elif flag == "--workdir":
            workdir = value
        i += 2
    else:
        i += 1
command = argv[i + 1:]  # after the image

def host(path):
    for inside, outside in sorted(mounts, key=lambda m: -len(m[0])):
        if path == inside or path.startswith(inside + "/"):
            return outside + path[len(inside):]
    return path

env = {{key: host(value) for key, value in env.items()}}
env.update(PATH=os.environ["PATH"], PYTHON={python!r}, PYTHONUNBUFFERED="1")
os.chdir(host(workdir))
os.execvpe(command[0], command, env)
'''


def test_the_container_path_builds_the_image_and_runs_run_and_time_sh_in_it(
        shipped_bundle, dataset, tmp_path, server, start_agent) -> None:
    import json
    import sys

    result = _upload(shipped_bundle, tmp_path)
    operator = get_user_model().objects.create_user("operator", is_staff=True)
    folder, digest = dataset
    job = services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    engine, calls = tmp_path / "docker", tmp_path / "engine-calls.jsonl"
    engine.write_text(FAKE_ENGINE.format(python=sys.executable, calls=str(calls)))
    engine.chmod(0o755)
    _, token = services.runner_create(name="boxed", actor=operator)
    agent = start_agent(token, "boxed", "--run-implementations", "--dataset", f"podium_digits={folder},sha256={digest}",
                        "--container", "registry.example/fallback:1", "--container-engine", str(engine))
    _wait(lambda: ReproductionJob.objects.get(pk=job.pk).is_final, "the reproduction in a container", agent=agent)
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.REPRODUCED, (job.failure_reason, job.attempts.last().output_tail)
    build, run, *removes = [json.loads(line) for line in calls.read_text().splitlines()]
    tag = f"podium-impl-{job.pk}-attempt-{job.attempts.get().pk}"
    # The image is the implementation's own, built from its Dockerfile, not the operator's fallback image.
    assert build[:3] == ["build", "--tag", tag] and build[3].endswith("/impl")
    assert run[0] == "run" and "--network=none" in run and f"{folder.resolve()}:/data:ro" in run
    assert "DATADIR=/data" in run and "PODIUM_SYSTEM_CONFIG=config_cpu-box.sh" in run
    assert run[run.index("--workdir") + 1] == "/podium-job/impl"
    assert run[-4:] == [tag, "bash", "-c", 'set -a; . "./$PODIUM_SYSTEM_CONFIG"; set +a; exec bash ./run_and_time.sh']
    assert not any(token in arg for arg in run)  # the runner's token never reaches the engine
    assert all(call[:2] == ["rm", "--force"] for call in removes)


def test_import_results_records_the_code_beside_the_results_and_skips_a_hostile_implementation(
        shipped_bundle, tmp_path, reference_available) -> None:
    import os
    import shutil

    from ingest.importer import import_tree

    tree = tmp_path / "training_results_v6.1"
    shutil.copytree(shipped_bundle, tree / "Acme")
    hostile = tree / "Acme" / "benchmarks" / "podium_digits" / "implementations" / "linked"
    hostile.mkdir()
    (hostile / "run_and_time.sh").write_text("cat data.txt\n")
    (tmp_path / "secret.txt").write_text("the host's secret")
    os.symlink(tmp_path / "secret.txt", hostile / "data.txt")
    round_ = open_round(slug="impl-import", ruleset="6.1.0")
    extension_benchmark_add(round=round_, key="podium_digits")
    said: list[str] = []
    summary = import_tree(tree, round_slug=round_.slug, jobs=1, progress=said.append)
    [result] = summary.results
    implementation = implementation_for(result)
    assert implementation is not None and implementation.name == "pytorch"
    assert list(Implementation.objects.values_list("name", flat=True)) == ["pytorch"]
    assert any("implementation skipped" in line and "data.txt' is a symbolic link" in line for line in said)
    again = import_tree(tree, round_slug=round_.slug, jobs=1)  # unchanged: nothing new, not even code
    assert [o.status for o in again.outcomes] == ["unchanged"] and Implementation.objects.count() == 1
