"""What a process on the embedded default (SQLite, a per-process cache, no broker) imports at its start: no
PostgreSQL driver and no Redis client, ~0.2 s of every start of a manage.py command between them (django.setup()
0.62 -> 0.43 s on a 2-core AMD EPYC, bytecode compiled). core.prepared makes its PostgreSQL cursor where the
database is PostgreSQL; core.cache asks core.rediscache for its count only once the Redis cache was built. (A web
process imports psycopg all the same where it is installed: DRF's compat module does, for its PostgreSQL fields.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

START = """
import json, sys
import django
django.setup()
import ingest.management.commands.import_results, ingest.tasks, leaderboard.api_sql, core.prepared  # noqa
from core import cache
cache.settle_outage()  # what each task and each process's exit runs
{more}
print(json.dumps(sorted({{name.split(".")[0] for name in sys.modules}} & {{"psycopg", "psycopg2", "redis"}})))
"""


def _imported(tmp_path: Path, more: str = "", **env: str) -> list[str]:
    """Which of the drivers a fresh process imported by the end of START (and `more`)."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("DATABASE_URL", "CACHE_URL", "CELERY_BROKER_URL")}
    environment.update({"DJANGO_SETTINGS_MODULE": "config.settings", "PODIUM_VAR_DIR": str(tmp_path / "var"),
                        "DATABASE_URL": f"sqlite:///{tmp_path}/start.sqlite3", **env})
    done = subprocess.run([sys.executable, "-c", START.format(more=more)], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_command_on_the_embedded_default_imports_neither_a_postgresql_driver_nor_a_redis_client(tmp_path) -> None:
    assert _imported(tmp_path) == []


def test_a_web_process_on_the_embedded_default_imports_no_redis_client(tmp_path: Path) -> None:
    every_view = "from django.urls import get_resolver\nget_resolver().url_patterns"
    assert "redis" not in _imported(tmp_path, every_view)


def test_the_redis_cache_imports_its_client_once_it_is_used(tmp_path: Path) -> None:
    """With the production cache named: not before its first call (nothing could have failed then), and then it
    does (the checks above would pass for a process that could not import it at all). No server is needed: the
    call finds none and answers as an empty cache."""
    unused = "redis://127.0.0.1:1/0"
    assert _imported(tmp_path, CACHE_URL=unused) == []
    used = "from django.core.cache import cache as kept\nassert kept.get('podium-test') is None\ncache.settle_outage()"
    assert _imported(tmp_path, used, CACHE_URL=unused) == ["redis"]
