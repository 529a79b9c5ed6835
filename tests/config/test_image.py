"""The production image holds a working app: the tree the Dockerfile's COPY instructions and .dockerignore
give is built here (no Docker engine runs on CI), and `manage.py check` and `collectstatic` run in it
with no access to the checkout, so a package the image forgets fails this test (issue 14)."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs manage.py in the image tree with the checkout's editable install switched off: an app missing from
# the tree must fail to import instead of being found in the checkout.
ISOLATED = """
import os, runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != {checkout!r}]
sys.path.insert(0, os.getcwd())
sys.argv = ["manage.py", *sys.argv[1:]]
runpy.run_path("manage.py", run_name="__main__")
"""


def ignore_patterns() -> list[tuple[bool, str]]:
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        patterns.append((negate, line.lstrip("!").strip("/")))
    return patterns


def ignored(rel: str, patterns: list[tuple[bool, str]]) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matching a folder covers what is in it."""
    verdict = False
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for negate, pattern in patterns:
        regex = fnmatch.translate(pattern).replace(".*.*", ".*")
        if pattern.startswith("**/"):
            regex = "(?:.*/)?" + fnmatch.translate(pattern[3:])
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            verdict = not negate
    return verdict


def image_tree(dest: Path) -> Path:
    """What `COPY` puts into the image's WORKDIR, from the files git knows (the build context of a clone)."""
    copies = [line.split()[1:] for line in (ROOT / "Dockerfile").read_text().splitlines()
              if line.startswith("COPY ")]
    assert copies == [[".", "."]], f"the Dockerfile should copy the whole context once, not {copies}"
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    patterns = ignore_patterns()
    for rel in listed:
        source = ROOT / rel
        if not source.is_file() or ignored(rel, patterns):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return dest


def run_in(tree: Path, *args: str, env: dict[str, str],
           flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    code = ISOLATED.format(checkout=str(ROOT))
    return subprocess.run([sys.executable, *flags, "-c", code, *args], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_image_tree_holds_every_app_and_passes_check_and_collectstatic(tmp_path) -> None:
    tree = image_tree(tmp_path / "app")
    for package in ("config", "core", "catalog", "accounts", "ingest", "reviews", "runners", "leaderboard",
                    "templates", "static", "runner_agent", "podium_reference"):
        assert (tree / package).is_dir(), f"{package}/ is missing from the image"
    assert not (tree / "tests").exists() and not (tree / ".git").exists()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PODIUM_VAR_DIR": str(tmp_path / "var"),
           "DJANGO_SETTINGS_MODULE": "config.settings"}
    checked = run_in(tree, "check", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    collected = run_in(tree, "collectstatic", "--noinput", env=env)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert (tree / "staticfiles" / "podium.css").exists()
    assert list((tree / "staticfiles" / "vendor").glob("plotly-*.min.js"))


def test_the_image_runs_from_the_bytecode_its_build_compiled(tmp_path) -> None:
    """The image sets PYTHONDONTWRITEBYTECODE, so no process caches what it compiles: without bytecode made when
    the image is built, every start compiled Podium's modules from source again (~0.2 s of CPU each). The
    Dockerfile's compileall, run on the image tree, leaves nothing of Podium's to compile at a start."""
    tree = image_tree(tmp_path / "app")
    dockerfile = (ROOT / "Dockerfile").read_text()
    workdir = re.search(r"^WORKDIR (\S+)", dockerfile, re.MULTILINE)
    assert workdir is not None
    compiles = re.findall(r"python -m compileall((?: -\S+)*) (\S+)", dockerfile)
    assert compiles, "the Dockerfile compiles no bytecode"
    for flags, target in compiles:
        assert target.rstrip("/") in (workdir.group(1), "."), f"compileall of {target}, not of the app"
        subprocess.run([sys.executable, "-m", "compileall", *flags.split(), str(tree)], check=True,
                       capture_output=True, timeout=300)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PODIUM_VAR_DIR": str(tmp_path / "var"),
           "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONDONTWRITEBYTECODE": "1"}
    checked = run_in(tree, "check", env=env, flags=("-v",))
    assert checked.returncode == 0, checked.stdout + checked.stderr[-4000:]
    loaded = [line for line in checked.stderr.splitlines() if line.startswith("# code object from ")]
    ours = [line for line in loaded if str(tree) in line]
    assert len(ours) > 100, "the check should have imported Podium's apps from the tree"
    from_source = [line for line in ours if not line.rstrip("'").endswith(".pyc")]
    assert from_source == [], f"compiled at the start: {from_source[:5]}"


def test_a_package_left_out_of_the_image_fails_the_check(tmp_path) -> None:
    tree = image_tree(tmp_path / "app")
    shutil.rmtree(tree / "accounts")  # what the old Dockerfile's list of folders did
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PODIUM_VAR_DIR": str(tmp_path / "var")}
    checked = run_in(tree, "check", env=env)
    assert checked.returncode != 0 and "No module named 'accounts'" in checked.stderr


def test_dockerignore_patterns_match_as_docker_does() -> None:
    patterns = [(False, "**/__pycache__"), (False, "tests"), (False, "docs"), (True, "docs/keep.md")]
    assert ignored("ingest/__pycache__/x.pyc", patterns)
    assert ignored("tests/test_x.py", patterns)
    assert not ignored("ingest/tests.py", patterns)
    assert ignored("docs/architecture.md", patterns) and not ignored("docs/keep.md", patterns)


def test_compose_migrates_once_before_the_stack_and_checks_every_service() -> None:
    import yaml

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert "migrate" in services["migrate"]["command"] and services["migrate"]["restart"] == "no"
    for name in ("web", "worker", "beat"):
        service = services[name]
        assert "migrate" not in str(service["command"]), f"{name} must not migrate at every start"
        assert service["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert service["healthcheck"]["test"], f"{name} has no health check"
        assert service["environment"]["PODIUM_DEPLOYMENT"] == "production"
    assert "inspect ping" in " ".join(services["worker"]["healthcheck"]["test"])
    environment = services["web"]["environment"]
    for variable in ("SECRET_KEY", "ALLOWED_HOSTS", "PODIUM_BASE_URL", "EMAIL_URL", "CACHE_URL", "DATABASE_URL"):
        assert environment[variable], variable
