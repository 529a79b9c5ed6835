"""The benches' CPU accounting by role (bench.proc_cpu): every CPU second of the tree between two snapshots is
counted once, under the role of the process that spent it, including processes born and reaped in between (a
task's checker children, the fork server's middle processes), and a pid used again is a new process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import proc_cpu
from bench.upload_latency import DATABASE_ROLE, to_verdict_line
from bench.upload_latency import role as upload_role

BENCH, WEB, WORKER, POOL, CHILD = 100, 200, 300, 310, 320


def proc(pid: int, ppid: int, command: str, user: float = 0.0, system: float = 0.0, reaped_user: float = 0.0,
         reaped_system: float = 0.0, started: int = 1, nice: int = 0) -> proc_cpu.Proc:
    return proc_cpu.Proc(pid, ppid, command, user, system, reaped_user, reaped_system, started, nice)


def by_parent(p: proc_cpu.Proc, tree: dict[int, proc_cpu.Proc]) -> str:
    """A role by who the parent is: the pool process's children are the checkers, whoever reaped them."""
    return "checkers" if p.ppid == POOL else p.command


def test_each_second_is_counted_once_under_the_role_that_spent_it() -> None:
    before = {
        BENCH: proc(BENCH, 1, "bench", user=5.0),
        POOL: proc(POOL, BENCH, "pool", user=2.0, system=1.0, reaped_user=4.0),
        CHILD: proc(CHILD, POOL, "child", user=0.5, system=0.25, started=7),  # alive now, reaped by the next one
    }
    after = {
        BENCH: proc(BENCH, 1, "bench", user=5.5),
        # Reaped since: CHILD (2.0 user and 0.5 system in its life), and one born and ended in between (1.0 user).
        POOL: proc(POOL, BENCH, "pool", user=3.0, system=1.5, reaped_user=4.0 + 2.0 + 1.0, reaped_system=0.5),
    }
    spent = proc_cpu.by_role(before, after, by_parent)
    assert spent["bench"].user_s == pytest.approx(0.5)
    assert (spent["pool"].user_s, spent["pool"].system_s) == (pytest.approx(1.0), pytest.approx(0.5))
    # What CHILD spent after the first snapshot (1.5 user, 0.25 system) and all the other one spent (1.0 user).
    assert (spent["checkers"].user_s, spent["checkers"].system_s) == (pytest.approx(2.5), pytest.approx(0.25))


def test_a_pid_used_again_is_a_new_process() -> None:
    before = {BENCH: proc(BENCH, 1, "bench"), CHILD: proc(CHILD, BENCH, "old", user=9.0, started=5)}
    after = {BENCH: proc(BENCH, 1, "bench", reaped_user=9.5), CHILD: proc(CHILD, BENCH, "new", user=0.5, started=8)}
    spent = proc_cpu.by_role(before, after, lambda p, tree: "mine" if p.pid == BENCH else "theirs")
    # The old one spent 0.5 more before it was reaped; the new one 0.5 in all.
    assert spent["theirs"].user_s == pytest.approx(1.0)


def test_the_upload_bench_names_each_part_of_the_path() -> None:
    tree = {
        BENCH: proc(BENCH, 1, "python bench/upload_latency.py"),
        WEB: proc(WEB, BENCH, "python -m gunicorn config.wsgi:application"),
        WEB + 1: proc(WEB + 1, WEB, "python -m gunicorn config.wsgi:application"),
        WORKER: proc(WORKER, BENCH, "python -m celery -A config worker"),
        POOL: proc(POOL, WORKER, "python -m celery -A config worker"),
        CHILD: proc(CHILD, POOL, "python -m celery -A config worker"),
        CHILD + 1: proc(CHILD + 1, CHILD, "python -m celery -A config worker"),
    }
    assert upload_role(tree[BENCH], tree).startswith("the bench")
    assert upload_role(tree[WEB], tree) == upload_role(tree[WEB + 1], tree) == "web server"
    assert upload_role(tree[WORKER], tree) == "Celery's main process"
    assert upload_role(tree[POOL], tree) == "the task (worker pool process)"
    assert upload_role(tree[CHILD], tree) == upload_role(tree[CHILD + 1], tree) == \
        "checker children (and the fork server)"
    # What a pool process reaped (proc_cpu.by_role asks for a child of it that is gone) is its children's.
    assert upload_role(proc(-1, POOL, ""), tree) == "checker children (and the fork server)"
    # The child the RCP check runs ahead in runs at a lower priority than its pool process; a bench started under
    # `nice` lowers them all alike.
    tree[CHILD + 2] = proc(CHILD + 2, POOL, "python -m celery -A config worker", nice=10)
    assert upload_role(tree[CHILD + 2], tree) == "the RCP check ahead's child (a lower priority)"
    niced = {pid: proc(p.pid, p.ppid, p.command, nice=5) for pid, p in tree.items()}
    assert upload_role(niced[CHILD], niced) == "checker children (and the fork server)"


def test_each_role_s_time_on_a_cpu_and_waiting_for_one_is_counted_between_two_snapshots() -> None:
    tree = {BENCH: proc(BENCH, 1, "bench"), POOL: proc(POOL, BENCH, "pool", started=3),
            CHILD: proc(CHILD, POOL, "child", started=4)}
    before = {(POOL, 3, POOL): proc_cpu.Sched(5_000_000, 1_000_000),
              (POOL, 3, POOL + 1): proc_cpu.Sched(0, 0),
              (CHILD, 2, CHILD): proc_cpu.Sched(9_000_000, 9_000_000)}  # an earlier process of that pid
    after = {(POOL, 3, POOL): proc_cpu.Sched(8_000_000, 1_500_000),
             (POOL, 3, POOL + 1): proc_cpu.Sched(1_000_000, 250_000),  # the lease thread
             (CHILD, 4, CHILD): proc_cpu.Sched(2_000_000, 4_000_000),  # born since: counted whole
             (CHILD + 9, 1, CHILD + 9): proc_cpu.Sched(7_000_000, 7_000_000)}  # not in the tree: not counted
    waited = proc_cpu.waited_by_role(before, after, tree, lambda p, t: "checkers" if p.ppid == POOL else p.command)
    assert set(waited) == {"pool", "checkers"}
    assert (waited["pool"].on_cpu_s, waited["pool"].waiting_s) == (pytest.approx(0.004), pytest.approx(0.00075))
    assert (waited["checkers"].on_cpu_s, waited["checkers"].waiting_s) == (pytest.approx(0.002), pytest.approx(0.004))


@pytest.mark.skipif(not os.path.isfile(f"/proc/{os.getpid()}/schedstat"), reason="no scheduler counters")
def test_the_scheduler_counters_of_every_thread_of_the_tree_are_read() -> None:
    import threading

    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    thread.start()
    try:
        tree = proc_cpu.snapshot(os.getpid())
        before = proc_cpu.sched_snapshot(tree)
        mine = {key for key in before if key[0] == os.getpid()}
        assert (os.getpid(), tree[os.getpid()].started, threading.get_native_id()) in mine
        assert (os.getpid(), tree[os.getpid()].started, thread.native_id) in mine
        sum(range(200_000))  # some work of this thread's: its time on a CPU can only grow
        # The kernel adds a running thread's time to its counter when it stops running (or at a timer tick, which
        # short work may not meet): blocking once makes it so, however fast or slow the machine.
        time.sleep(0.001)
        after = proc_cpu.sched_snapshot(tree)
        key = (os.getpid(), tree[os.getpid()].started, threading.get_native_id())
        assert after[key].on_cpu_ns > before[key].on_cpu_ns
        assert after[key].waiting_ns >= before[key].waiting_ns
    finally:
        done.set()
        thread.join()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="/proc is Linux's")
def test_a_child_that_ended_is_counted_under_its_parent_s_children() -> None:
    before = proc_cpu.snapshot(os.getpid())
    assert before[os.getpid()].command
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", busy], check=True)  # run and reaped here
    spent = proc_cpu.by_role(before, proc_cpu.snapshot(os.getpid()),
                             lambda p, tree: "me" if p.pid == os.getpid() else "children")
    assert spent["children"].total_s >= 0.3 - 2 / proc_cpu._TICK  # clock ticks round down


def test_the_file_system_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    new_file_ms, new_folder_ms = proc_cpu.new_files_ms(tmp_path, count=3)
    assert new_file_ms > 0 and new_folder_ms > 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="/proc is Linux's")
def test_the_tree_read_down_from_its_root_is_the_tree_all_of_proc_shows() -> None:
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in range(2)]
    try:
        walked = proc_cpu.snapshot(os.getpid())
        assert {s.pid for s in sleepers} <= walked.keys()
        assert walked.keys() == proc_cpu._snapshot_scanning(os.getpid()).keys()
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def test_postgresql_s_processes_are_the_database_server_s() -> None:
    postmaster, backend = 900, 901
    tree = {
        BENCH: proc(BENCH, 1, "python bench/upload_latency.py"),
        WEB: proc(WEB, BENCH, "python -m gunicorn config.wsgi:application"),
        postmaster: proc(postmaster, 1, "/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main"),
        backend: proc(backend, postmaster, "postgres: 15/main: postgres podium 127.0.0.1(50420) idle"),
    }
    assert upload_role(tree[postmaster], tree) == upload_role(tree[backend], tree) == DATABASE_ROLE
    # What the postmaster reaped (a backend whose connection closed) is the database server's too.
    assert upload_role(proc(-1, postmaster, ""), tree) == DATABASE_ROLE
    assert upload_role(tree[WEB], tree) == "web server"
    assert upload_role(proc(-1, WEB, ""), tree) == "web server"
    # A command that only mentions PostgreSQL is not its process.
    assert upload_role(proc(WEB + 5, BENCH, "python -m gunicorn --name postgres"), tree) == "web server"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="/proc is Linux's")
def test_processes_are_found_by_their_command_name() -> None:
    with open(f"/proc/{os.getpid()}/comm") as handle:
        mine = handle.read().strip()
    found = proc_cpu.named(mine)
    assert os.getpid() in found
    assert found[os.getpid()].ppid == os.getppid()
    assert proc_cpu.named("no-process-is-called-this") == {}


def test_waited_spans_add_up_role_by_role() -> None:
    into = {"web": proc_cpu.Waited(0.002, 0.001)}
    proc_cpu.add_waited(into, {"web": proc_cpu.Waited(0.003, 0.0005), "task": proc_cpu.Waited(0.010, 0.004)})
    assert set(into) == {"web", "task"}
    assert (into["web"].on_cpu_s, into["web"].waiting_s) == (pytest.approx(0.005), pytest.approx(0.0015))
    assert (into["task"].on_cpu_s, into["task"].waiting_s) == (pytest.approx(0.010), pytest.approx(0.004))


def test_the_cpu_on_the_way_to_each_verdict_says_how_soon_it_could_come() -> None:
    def span(task: float, web: float) -> dict[str, proc_cpu.Waited]:
        return {"task": proc_cpu.Waited(task, 1.0), "web": proc_cpu.Waited(web, 1.0)}

    # The first upload (first-time work) is left out: 60 and 40 ms of CPU after it, for verdicts in 50 and 40 ms.
    line = to_verdict_line([span(0.500, 0.500), span(0.040, 0.020), span(0.030, 0.010)],
                           [1.0, 0.050, 0.040], checker_s=0.020, cores=2)
    assert "the sequential uploads after the first; ms, means): 50.0 = task 35.0; web 15.0." in line
    assert "no verdict can come sooner than 25.0 ms, 1.25x the checker time" in line
    assert "allows at most 80.0 ms of CPU a verdict" in line
    # 60 / (2 x 50) and 40 / (2 x 40): the median of 60% and 50%.
    assert "the cores were 55% busy" in line
    # A single upload is its own figure.
    alone = to_verdict_line([span(0.030, 0.010)], [0.040], checker_s=0.020, cores=1)
    assert "the only upload, the first; ms, means): 40.0 = task 30.0; web 10.0." in alone
    assert "sooner than 40.0 ms, 2.00x" in alone
