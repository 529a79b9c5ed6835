"""Time Podium's import of the MLPerf corpus against the official tools on the same folders.

Podium: one `manage.py import_results <round folder>...` over every round folder of the corpus, on
a fresh database (migrations not timed), database writes included.
Official: for every submitter folder, `python -m mlperf_logging.package_checker` then
`python -m mlperf_logging.result_summarizer`, on a scratch copy (they write into their input).
Both start fresh interpreters per command; both run in this process's environment, one after the
other. Prints both wall times and their ratio (target: Podium <= 1/5 of the official tools).

    .venv/bin/python bench/import_corpus.py [--corpus ../shared/mlperf] [--database-url URL] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
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


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 and "import_results" in " ".join(cmd):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}")


def podium(corpus: Path, database_url: str | None) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="podium-bench-") as tmp:
        env = {**os.environ, "PODIUM_VAR_DIR": tmp, "PODIUM_SCRATCH_DIR": f"{tmp}/scratch"}
        env["DATABASE_URL"] = database_url or f"sqlite:///{tmp}/bench.sqlite3"
        manage = [sys.executable, str(ROOT / "manage.py")]
        if database_url:
            run([*manage, "flush", "--noinput"], env, ROOT)
        run([*manage, "migrate", "--noinput", "-v0"], env, ROOT)
        rounds = [str(r) for r in sorted(corpus.glob("training_results_v*"))]
        start = time.perf_counter()
        run([*manage, "import_results", *rounds, "-v0"], env, ROOT)
        elapsed = time.perf_counter() - start
        logs = sum(1 for _ in corpus.glob("training_results_v*/*/results/*/*/result_*.txt"))
        return elapsed, logs


def official(corpus: Path) -> float:
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
        start = time.perf_counter()
        for org, ruleset in jobs:
            run([sys.executable, "-m", "mlperf_logging.package_checker", str(org), "training", ruleset,
                 "--log_output", str(scratch / "package_checker.log")], env, scratch)
            run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(org), "training", ruleset,
                 "--csv", str(scratch / "summary.csv")], env, scratch)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_corpus = Path(os.environ.get("PODIUM_CORPUS", ROOT.parent / "shared" / "mlperf"))
    parser.add_argument("--corpus", type=Path, default=default_corpus)
    parser.add_argument("--database-url", default=None, help="time against this database (it is flushed!)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus}; pass --corpus or set PODIUM_CORPUS")
    podium_times, official_times = [], []
    logs = 0
    for _ in range(args.repeat):
        elapsed, logs = podium(args.corpus, args.database_url)
        podium_times.append(elapsed)
        official_times.append(official(args.corpus))
    p, o = statistics.median(podium_times), statistics.median(official_times)
    print(f"corpus: {args.corpus} ({logs} result logs), cpus: {os.cpu_count()}, repeats: {args.repeat}")
    print(f"podium import_results (db writes included): {p:.2f} s  [{', '.join(f'{t:.2f}' for t in podium_times)}]")
    print(f"official package_checker + result_summarizer: {o:.2f} s  [{', '.join(f'{t:.2f}' for t in official_times)}]")
    print(f"ratio podium / official: {p / o:.3f}  (target <= 0.200)")


if __name__ == "__main__":
    main()
