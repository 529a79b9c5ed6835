"""Jobs in containers, against a stand-in `docker` (no engine runs here).

The stand-in records each call with its environment, then for `run` becomes the job the way the image
would run it: the mounted work dir at /podium-job, the image's own code (here the fake job module),
HOME and nothing else. What is checked is the agent's side: the engine's arguments, the GPUs, the
network, the cleanup after a kill, and that the runner's token goes nowhere near the engine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from runner_agent import leftovers
from runner_agent.container import MOUNT, Container
from tests.runner_agent.test_agent import (
    FAKE_MODULE,
    H100,
    TOKEN,
    claim_answer,
    completion,
    gone,
    kill_quietly,
    pids_in,
    run_agent,
    running_job_pids,
    start_agent_process,
    write_fake_nvidia_smi,
)

IMAGE = "registry.example/podium-jobs:2026.11"

FAKE_ENGINE = '''#!{python}
import json, os, sys
argv = sys.argv[1:]
with open({calls!r}, "a") as f:
    f.write(json.dumps({{"argv": argv, "env": sorted(os.environ)}}) + "\\n")
if argv[0] != "run":
    sys.exit(0)
volume = argv[argv.index("--volume") + 1]
host = volume.split(":")[0]
command = argv[argv.index({image!r}) + 1:]
inside = lambda a: a.replace({mount!r}, host)
command = [sys.executable if command[0] == "python" else command[0]] + [inside(a) for a in command[1:]]
os.chdir(host)
os.execve(command[0], command, {{"HOME": host, "PYTHONPATH": {code!r}, "PYTHONUNBUFFERED": "1"}})
'''


@pytest.fixture
def engine(job_host: Path, tmp_path: Path) -> Path:
    """A `docker` on the test PATH; returns the file its calls are recorded in."""
    calls = tmp_path / "engine-calls.jsonl"
    script = job_host / "docker"
    script.write_text(FAKE_ENGINE.format(python=sys.executable, calls=str(calls), image=IMAGE, mount=MOUNT,
                                         code=str(tmp_path / "jobs")))
    script.chmod(0o755)
    return calls


def calls_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_job_runs_in_the_image_with_its_gpu_its_work_dir_and_no_network(podium, clock, tmp_path, job_host,
                                                                          engine, monkeypatch) -> None:
    monkeypatch.setenv("PODIUM_RUNNER_TOKEN", TOKEN)
    write_fake_nvidia_smi(job_host, f"0, {H100}, 81559\\n1, {H100}, 81559\\n")
    podium.script["claim"] = [claim_answer(indexes=(1,), config={"log_text": "logged inside\n"})]

    assert run_agent(podium.url, tmp_path, clock, "--container", IMAGE, token=False) == 0

    done = completion(podium)
    assert (done["outcome"], done["exit_code"]) == ("finished", 0)
    assert podium.of("log")[0].body == b"logged inside\n"
    assert podium.requests[0].json()["software"]["container"] == f"docker {IMAGE}"
    run, remove = calls_of(engine)
    work = tmp_path / "work" / "job-1-attempt-11"
    name = "podium-job-1-attempt-11"
    argv = run["argv"]
    assert argv[:6] == ["run", "--rm", "--init", "--name", name, "--network=none"]
    assert argv[argv.index("--volume") + 1] == f"{work}:{MOUNT}:rw"
    assert argv[argv.index("--gpus") + 1] == '"device=1"'
    assert argv[argv.index(IMAGE) + 1:] == ["python", "-m", FAKE_MODULE, "--config", f"{MOUNT}/config.json",
                                            "--log", f"{MOUNT}/result.txt"]
    assert not any("CUDA_VISIBLE_DEVICES" in a or TOKEN in a for a in argv)
    assert "PODIUM_RUNNER_TOKEN" not in run["env"] and "PYTHONPATH" not in run["env"]
    assert remove["argv"] == ["rm", "--force", name]  # harmless after --rm, essential after a kill


def test_a_container_past_its_time_limit_is_killed_and_removed(podium, clock, tmp_path, engine) -> None:
    podium.script["claim"] = [claim_answer(config={"mode": "hang", "ignore_term": True}, time_limit=1)]

    assert run_agent(podium.url, tmp_path, clock, "--container", IMAGE) == 0

    done = completion(podium)
    assert done["outcome"] == "timeout"
    job_pid, child_pid = pids_in(done["output_tail"])
    assert gone(job_pid) and gone(child_pid)
    assert calls_of(engine)[-1]["argv"] == ["rm", "--force", "podium-job-1-attempt-11"]


def test_the_container_of_a_killed_agent_is_removed_by_the_next_agent(podium, clock, tmp_path, engine) -> None:
    podium.script["claim"] = [claim_answer(config={"mode": "hang"})]
    agent = start_agent_process(podium.url, tmp_path, "--container", IMAGE)
    pids: list[int] = []
    try:
        pids = running_job_pids(podium)
        agent.kill()
        agent.communicate(timeout=10)
        assert gone(pids[0])  # the engine's client, killed with the agent; the container would live on
        assert [call["argv"][0] for call in calls_of(engine)] == ["run"]

        # Without --container too: the engine the earlier agent recorded removes it.
        assert run_agent(podium.url, tmp_path, clock) == 0

        assert calls_of(engine)[-1]["argv"] == ["rm", "--force", "podium-job-1-attempt-11"]
        assert sorted(path.name for path in (tmp_path / "work").iterdir()) == [leftovers.LOCK_NAME]
    finally:
        agent.kill()
        agent.communicate()
        kill_quietly(*pids)


def test_a_cpu_job_gets_no_gpus_and_podman_takes_cdi_devices(tmp_path) -> None:
    work = tmp_path / "w"
    docker = Container("/usr/bin/docker", IMAGE).argv(name="n", module="m", work_dir=work, config=work / "c.json",
                                                      log_file=work / "l.txt", indexes=())
    assert "--gpus" not in docker and "--device" not in docker
    podman = Container("/usr/bin/podman", IMAGE, network="bridge").argv(
        name="n", module="m", work_dir=work, config=work / "c.json", log_file=work / "l.txt", indexes=(0, 3))
    assert "--network=bridge" in podman
    assert [podman[i + 1] for i, a in enumerate(podman) if a == "--device"] == ["nvidia.com/gpu=0",
                                                                               "nvidia.com/gpu=3"]


def test_containers_without_an_engine_stop_the_agent_with_status_2(podium, clock, tmp_path, caplog) -> None:
    assert run_agent(podium.url, tmp_path, clock, "--container", IMAGE) == 2

    assert "no container engine found on PATH (looked for docker, podman)" in caplog.text
    assert podium.requests == []
