"""Shared fixtures: where the real MLPerf corpus is, and whether missing services may skip.

On CI (PODIUM_REQUIRE_SERVICES=1) nothing may skip for want of the corpus, PostgreSQL, Redis, a browser or
network namespaces (tests/vanishing_host.py): a missing one fails the run. On a fresh machine those tests
skip and say why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ["tests.worker", "tests.redis_server", "tests.vanishing_host"]


def services_required() -> bool:
    return os.environ.get("PODIUM_REQUIRE_SERVICES", "") not in ("", "0", "false", "no")


def skip_or_fail(reason: str) -> None:
    """Skip on a developer machine; fail where the environment promises the dependency."""
    if services_required():
        pytest.fail(f"{reason} (PODIUM_REQUIRE_SERVICES is set, so this may not skip)")
    pytest.skip(reason)


def corpus_path() -> Path | None:
    configured = os.environ.get("PODIUM_CORPUS")
    if configured:
        return Path(configured)
    default = ROOT.parent / "shared" / "mlperf"
    return default if default.is_dir() else None


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    path = corpus_path()
    if path is None:
        skip_or_fail("the MLPerf corpus is not here: set PODIUM_CORPUS to a copy of shared/mlperf")
    assert path is not None
    if not (path / "EXPECTED.csv").is_file():
        pytest.fail(f"PODIUM_CORPUS={path} has no EXPECTED.csv: point it at the shared/mlperf folder")
    return path


@pytest.fixture(scope="session")
def demo_tree(tmp_path_factory: pytest.TempPathFactory):  # -> tuple[Path, DemoManifest]
    """Generated, checker-clean MLPerf bundles (plus a few broken on purpose), written once."""
    from ingest.demo import write_demo_tree

    root = tmp_path_factory.mktemp("demo")
    return root, write_demo_tree(root)


@pytest.fixture(autouse=True)
def _celery_mode(request: pytest.FixtureRequest) -> None:
    """Tasks run in-process unless a test asks for the real worker (marker `real_worker`).

    CI exports CELERY_BROKER_URL for the integration tests; every other test must not depend on a
    worker being up.
    """
    from config.celery import app

    real = request.node.get_closest_marker("real_worker") is not None
    app.conf.task_always_eager = not real
    app.conf.task_eager_propagates = False


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Tests roll their writes back, so the generation key never moves between them: start empty."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _isolated_storage(tmp_path_factory: pytest.TempPathFactory, settings) -> None:
    """Each test stores bundles in a scratch store of its own."""
    root = tmp_path_factory.mktemp("store")
    settings.PODIUM_BUNDLE_DIR = root / "bundles"
    settings.PODIUM_SCRATCH_DIR = root / "scratch"
    # Password hashing is deliberately slow; tests create many users and need none of that cost.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
