"""Time Podium's import of the MLPerf corpus against the official tools on the same folders.

Podium: one `manage.py import_results <round folder>...` over every round folder of the corpus, on
a fresh database (migrations not timed), database writes and run-log storage included; then the same
command again over the unchanged tree (every item's verdict reused by its digest: no checker runs).
Official: for every submitter folder, `python -m mlperf_logging.package_checker` then
`python -m mlperf_logging.result_summarizer`, on a scratch copy (they write into their input).
Both start fresh interpreters per command, from bytecode (Podium's sources are compiled first, as
the image's build does); both run in this process's environment, one after the other. Prints the wall
times, the ratios against the official tools (goals: import <= 0.1x, re-import of the unchanged tree
<= 0.02x) and the machine's load average beside them: on a shared machine the ratios move with the load,
so read them together.

    .venv/bin/python bench/import_corpus.py [--corpus ../shared/mlperf] [--database-url URL] [--repeat N]
        [--profile FILE]   also profile one in-process import (cProfile, --jobs 1) and print where time goes
"""

from __future__ import annotations

import argparse
import compileall
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ingest.engine.rules import ruleset_from_folder  # noqa: E402
from ingest.engine.tree import submitter_folders  # noqa: E402

IMPORT_GOAL = 0.1
REIMPORT_GOAL = 0.02


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 and "import_results" in " ".join(cmd):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}")


def rounds_of(corpus: Path) -> list[str]:
    return [str(r) for r in sorted(corpus.glob("training_results_v*"))]


def compile_sources() -> int:
    """Compile Podium's own modules to bytecode, as the image does when it is built (Dockerfile) and as pip did
    for the official tools (site-packages). Where PYTHONDONTWRITEBYTECODE is set (this machine; the image) an
    interpreter caches nothing it compiles: each command timed here would compile ~115 modules from source first
    (0.35-0.45 s of a 1.2 s re-import, 2-core AMD EPYC), which no deployed command pays. Returns the files."""
    compiled = 0
    for package in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").is_file()):
        if not compileall.compile_dir(package, quiet=1, workers=0):
            raise SystemExit(f"could not compile {package}")
        compiled += sum(1 for _ in package.rglob("*.py"))
    return compiled


def podium(corpus: Path, database_url: str | None) -> tuple[float, float, float, int, str, str]:
    """(first import s, re-import s, Django start-up s, logs, load before the first, load before the re-import)."""
    with tempfile.TemporaryDirectory(prefix="podium-bench-") as tmp:
        env = {**os.environ, "PODIUM_VAR_DIR": tmp, "PODIUM_SCRATCH_DIR": f"{tmp}/scratch"}
        env["DATABASE_URL"] = database_url or f"sqlite:///{tmp}/bench.sqlite3"
        manage = [sys.executable, str(ROOT / "manage.py")]
        if database_url:
            run([*manage, "flush", "--noinput"], env, ROOT)
        run([*manage, "migrate", "--noinput", "-v0"], env, ROOT)
        command = [*manage, "import_results", *rounds_of(corpus), "-v0"]
        load_first = load()
        start = time.perf_counter()
        run(command, env, ROOT)
        first = time.perf_counter() - start
        load_again = load()
        start = time.perf_counter()
        run(command, env, ROOT)
        again = time.perf_counter() - start
        # The floor under any manage.py command: a fresh interpreter and django.setup() with every app.
        start = time.perf_counter()
        run([sys.executable, "-c", "import django; django.setup()"],
            {**env, "DJANGO_SETTINGS_MODULE": "config.settings"}, ROOT)
        startup = time.perf_counter() - start
        logs = sum(1 for _ in corpus.glob("training_results_v*/*/results/*/*/result_*.txt"))
        return first, again, startup, logs, load_first, load_again


def official(corpus: Path) -> tuple[float, str]:
    with tempfile.TemporaryDirectory(prefix="podium-bench-official-") as tmp:
        scratch = Path(tmp)
        jobs: list[tuple[Path, str]] = []
        for round_dir in sorted(corpus.glob("training_results_v*")):
            copy = scratch / round_dir.name
            shutil.copytree(round_dir, copy)
            for path in copy.rglob("*"):
                path.chmod(0o755 if path.is_dir() else 0o644)
            ruleset = ruleset_from_folder(round_dir.name)
            assert ruleset is not None
            jobs += [(org, ruleset) for org in submitter_folders(copy)]
        env = dict(os.environ)
        before = load()
        start = time.perf_counter()
        for org, ruleset in jobs:
            run([sys.executable, "-m", "mlperf_logging.package_checker", str(org), "training", ruleset,
                 "--log_output", str(scratch / "package_checker.log")], env, scratch)
            run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(org), "training", ruleset,
                 "--csv", str(scratch / "summary.csv")], env, scratch)
        return time.perf_counter() - start, before


def profile(corpus: Path, out: Path) -> None:
    """One import in one process (--jobs 1) under cProfile: checker children show as time waiting on them
    (each item's checks run in one child, the compliance checks pipelined beside Podium's own reading)."""
    with tempfile.TemporaryDirectory(prefix="podium-bench-profile-") as tmp:
        env = {**os.environ, "PODIUM_VAR_DIR": tmp, "PODIUM_SCRATCH_DIR": f"{tmp}/scratch",
               "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3"}
        manage = [sys.executable, str(ROOT / "manage.py")]
        run([*manage, "migrate", "--noinput", "-v0"], env, ROOT)
        run([sys.executable, "-m", "cProfile", "-o", str(out), str(ROOT / "manage.py"), "import_results",
             *rounds_of(corpus), "-v0", "--jobs", "1"], env, ROOT)
    stats = pstats.Stats(str(out))
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    wanted = {
        "verifying items (verify_item)": ("ingest/engine/verify.py", "verify_item"),
        "  logs: Podium's reading beside the checker": ("ingest/engine/verify.py", "_check_logs"),
        "    Podium's log reader (parse_log)": ("ingest/engine/logparse.py", "parse_log"),
        "  waiting for a checker child's answers": ("ingest/engine/tool.py", "_answer"),
        "  seed checker calls": ("ingest/engine/tool.py", "check_seeds"),
        "  RCP checker calls (parent: scipy import once)": ("ingest/engine/tool.py", "check_rcp"),
        "  the system description's answer (sent first)": ("ingest/engine/tool.py", "system_desc"),
        "  os.fork itself (one checker child per item)": ("~", "<built-in method posix.fork>"),
        "  waitpid (a child's exit)": ("~", "<built-in method posix.waitpid>"),
        "database writes (result_store)": ("ingest/services/results.py", "result_store"),
        "run-log storage (run_logs_store)": ("ingest/services/results.py", "run_logs_store"),
        "item digests": ("ingest/engine/tree.py", "digest"),
        "Django setup": ("django/__init__.py", "setup"),
    }
    cumulative: dict[str, float] = {}
    for (filename, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        for label, (suffix, function) in wanted.items():
            if name == function and filename.endswith(suffix):
                cumulative[label] = cumulative.get(label, 0.0) + ct
    print(f"profile of one import, --jobs 1 (cProfile, {total:.2f} s of CPU in this process; {out}):")
    for label in wanted:
        seconds = cumulative.get(label, 0.0)
        print(f"  {label:<48} {seconds:7.2f} s  {100 * seconds / total:5.1f} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_corpus = Path(os.environ.get("PODIUM_CORPUS", ROOT.parent / "shared" / "mlperf"))
    parser.add_argument("--corpus", type=Path, default=default_corpus)
    parser.add_argument("--database-url", default=None, help="time against this database (it is flushed!)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", type=Path, default=None, help="also write a cProfile of one import here")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus}; pass --corpus or set PODIUM_CORPUS")
    sources = compile_sources()
    firsts, agains, startups, officials = [], [], [], []
    loads: list[str] = []
    logs = 0
    for _ in range(args.repeat):
        first, again, startup, logs, load_first, load_again = podium(args.corpus, args.database_url)
        elapsed, load_official = official(args.corpus)
        firsts.append(first)
        agains.append(again)
        startups.append(startup)
        officials.append(elapsed)
        loads.append(f"import at {load_first}; re-import at {load_again}; official at {load_official}")
    p, r, o = statistics.median(firsts), statistics.median(agains), statistics.median(officials)

    def listed(times: list[float]) -> str:
        return ", ".join(f"{t:.2f}" for t in times)

    print(f"corpus: {args.corpus} ({logs} result logs), cpus: {os.cpu_count()}, repeats: {args.repeat}")
    print(f"Podium's {sources} source files compiled to bytecode first, as the image is built (the official tools "
          "run from the bytecode pip made)")
    print(f"podium import_results (db writes and run logs included): {p:.2f} s  [{listed(firsts)}]")
    print(f"podium import_results again, unchanged tree:           {r:.2f} s  [{listed(agains)}]")
    print(f"  of which a bare interpreter + django.setup():         {statistics.median(startups):.2f} s  "
          f"[{listed(startups)}]")
    print(f"official package_checker + result_summarizer:          {o:.2f} s  [{listed(officials)}]")
    print(f"ratio import / official:    {p / o:.3f}  (goal <= {IMPORT_GOAL})   "
          f"{'met' if p / o <= IMPORT_GOAL else 'NOT met'}")
    print(f"ratio re-import / official: {r / o:.4f} (goal <= {REIMPORT_GOAL})  "
          f"{'met' if r / o <= REIMPORT_GOAL else 'NOT met'}")
    for line in loads:
        print(f"load average (1, 5, 15 min) {line}")
    if args.profile:
        profile(args.corpus, args.profile)


if __name__ == "__main__":
    main()
