"""URL patterns are compiled for reversing, and task sending prepared, when a process starts (core.warmup), not
in its first request or task: after the warm-up, reversing a URL of any namespace compiles no pattern; a web
process also imports what its first request imported and connects to the broker (in a thread)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.urls import clear_url_caches, get_resolver, resolvers, reverse

from core.warmup import url_reversing_warm
from tests.conftest import ROOT

# One URL in each namespace, and one outside any.
SAMPLES = [("ingest:submission", {"pk": 1}), ("leaderboard:home", {}), ("api:reproduction-list", {}),
           ("accounts:tokens", {}), ("reviews:notifications", {}), ("healthz", {})]


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The patterns compiled for reversing from now on (Django's `normalize`, once per pattern), with the
    URL caches emptied before and after."""
    clear_url_caches()
    seen: list[str] = []
    real = resolvers.normalize

    def counted(pattern: str) -> list[tuple[str, list[str]]]:
        seen.append(pattern)
        return real(pattern)

    monkeypatch.setattr(resolvers, "normalize", counted)
    yield seen
    clear_url_caches()


def _reversible() -> list[tuple[str, dict[str, int]]]:
    names = set(get_resolver().reverse_dict.keys())
    for namespace, (_, included) in get_resolver().namespace_dict.items():
        names |= {f"{namespace}:{name}" for name in included.reverse_dict if isinstance(name, str)}
    return [(name, kwargs) for name, kwargs in SAMPLES if name in names]


def test_without_the_warm_up_the_first_reverse_compiles_patterns(compiled: list[str]) -> None:
    reverse("ingest:submission", kwargs={"pk": 1})
    assert compiled  # the control: what the warm-up saves a first request


def test_after_the_warm_up_reversing_in_any_namespace_compiles_nothing(compiled: list[str]) -> None:
    warmed = url_reversing_warm()
    assert warmed == 1 + len(get_resolver().namespace_dict)  # the root and each namespace (none nested here)
    assert compiled
    compiled.clear()
    samples = _reversible()
    assert len(samples) == len(SAMPLES), "a sample URL name is gone: pick another in its namespace"
    for name, kwargs in samples:
        assert reverse(name, kwargs=kwargs)
    assert compiled == []


# Run in a fresh interpreter after `{start}`: how many patterns reversing a few URLs compiles.
PROBE = """
import json
{start}
from django.urls import resolvers, reverse

seen = []
real = resolvers.normalize
resolvers.normalize = lambda pattern: seen.append(pattern) or real(pattern)
reverse("ingest:submission", kwargs={{"pk": 1}})
reverse("leaderboard:home")
reverse("api:reproduction-list")
print(json.dumps(len(seen)))
"""


def _compiled_after(start: str, tmp_path: Path) -> int:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PODIUM_VAR_DIR": str(tmp_path),
           "DATABASE_URL": f"sqlite:///{tmp_path}/probe.sqlite3"}
    done = subprocess.run([sys.executable, "-c", PROBE.format(start=start)], cwd=ROOT, capture_output=True,
                          text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_worker_compiles_the_patterns_before_its_pool_forks(tmp_path: Path) -> None:
    """Each pool process's first notification (a submission's URL) reverses without compiling."""
    assert _compiled_after("import config.celery; config.celery._preload_checkers(sender=None)", tmp_path) == 0


def test_a_web_process_compiles_the_patterns_when_it_loads_the_application(tmp_path: Path) -> None:
    """A fresh web worker's first request (the first upload after a deploy) reverses without compiling."""
    assert _compiled_after("import config.wsgi", tmp_path) == 0


def test_the_probe_sees_patterns_compiled_without_a_warm_up(tmp_path: Path) -> None:
    assert _compiled_after("import django; django.setup()", tmp_path) > 0


# Run in a fresh interpreter after `{start}`: whether sending a task would still import the broker's transport
# and finalize the app (the first upload's request paid ~150 ms for them).
SENDING_PROBE = """
import json, sys
{start}
from celery import current_app
print(json.dumps({{"transport": "kombu.transport.redis" in sys.modules, "finalized": current_app.finalized}}))
"""


def _sending_after(start: str, tmp_path: Path, broker: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PODIUM_VAR_DIR": str(tmp_path),
           "DATABASE_URL": f"sqlite:///{tmp_path}/probe.sqlite3", "CELERY_BROKER_URL": broker}
    done = subprocess.run([sys.executable, "-c", SENDING_PROBE.format(start=start)], cwd=ROOT, capture_output=True,
                          text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# Nothing listens on port 9: the warm-up must not connect (a broker down at start may not stop the site).
NO_BROKER_THERE = "redis://127.0.0.1:9/0"


def test_a_web_process_prepares_task_sending_with_no_broker_there(tmp_path: Path) -> None:
    # The connection is tried in a thread (broker_connect_soon): the start neither waits for it nor fails.
    assert _sending_after("import config.wsgi", tmp_path, NO_BROKER_THERE) == {"transport": True, "finalized": True}


def test_the_sending_probe_sees_an_unprepared_process(tmp_path: Path) -> None:
    assert _sending_after("import django; django.setup()", tmp_path, NO_BROKER_THERE) == {
        "transport": False, "finalized": False}


def test_with_no_broker_nothing_is_prepared(tmp_path: Path) -> None:
    """Tasks run in-process (the embedded default): there is no transport to import."""
    from core.warmup import task_sending_warm

    assert task_sending_warm() is False  # the tests' settings have no broker
    assert _sending_after("import config.wsgi", tmp_path, "")["transport"] is False


# Run in a fresh interpreter after `{start}`: which of the modules a fresh web process's first upload imported
# (Django's session serializer and message storage, named in settings; Celery's event dispatcher; the database
# backend's SQL compilers) are loaded.
FIRST_REQUEST_PROBE = """
import json, sys
{start}
from django.conf import settings
from django.db import connection
wanted = [settings.SESSION_SERIALIZER.rpartition(".")[0], settings.MESSAGE_STORAGE.rpartition(".")[0],
          "celery.events.dispatcher", "encodings.latin_1", connection.ops.compiler_module]
print(json.dumps([name for name in wanted if name not in sys.modules]))
"""


def _first_request_imports_after(start: str, tmp_path: Path) -> list[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PODIUM_VAR_DIR": str(tmp_path),
           "DATABASE_URL": f"sqlite:///{tmp_path}/probe.sqlite3", "CELERY_BROKER_URL": NO_BROKER_THERE}
    done = subprocess.run([sys.executable, "-c", FIRST_REQUEST_PROBE.format(start=start)], cwd=ROOT,
                          capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_web_process_imports_at_start_what_its_first_request_imported(tmp_path: Path) -> None:
    assert _first_request_imports_after("import config.wsgi", tmp_path) == []


def test_the_import_probe_sees_them_missing_without_a_warm_up(tmp_path: Path) -> None:
    missing = _first_request_imports_after("import django; django.setup()", tmp_path)
    assert "celery.events.dispatcher" in missing and len(missing) >= 3


# After `import config.wsgi` and the warm-up thread's end: whether the connection the first publish takes from
# Celery's producer pool is open, and the task queue declared on it (kombu then declares it no more).
BROKER_PROBE = """
import json, threading
import config.wsgi
for thread in threading.enumerate():
    if thread.name == "podium-broker-warm-up":
        thread.join(60)
from celery import current_app
with current_app.producer_or_acquire() as producer:
    queue = current_app.amqp.queues[current_app.conf.task_default_queue]
    print(json.dumps({"connected": bool(producer.connection.connected),
                      "declared": hash(queue) in producer.connection.declared_entities}))
"""


def test_a_web_process_connects_to_the_broker_and_declares_the_queue_at_start(tmp_path: Path, own_redis) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PODIUM_VAR_DIR": str(tmp_path),
           "DATABASE_URL": f"sqlite:///{tmp_path}/probe.sqlite3", "CELERY_BROKER_URL": own_redis.url}
    done = subprocess.run([sys.executable, "-c", BROKER_PROBE], cwd=ROOT, capture_output=True, text=True,
                          check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"connected": True, "declared": True}
    # Declared, not published: the start sends no task.
    assert not [key for key in own_redis.client.keys("*") if not key.startswith(b"_kombu.binding")]


def test_the_lazily_compiled_patterns_of_loaded_modules_are_compiled_and_nothing_else_is_evaluated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from django.utils.functional import LazyObject, SimpleLazyObject, empty
    from django.utils.regex_helper import _lazy_re_compile

    from core.warmup import lazy_patterns_compile

    class Holder:  # a class's pattern (MultiPartParser's boundary), and an object's (a validator's)
        pattern = _lazy_re_compile(r"^b+$")

        def __init__(self) -> None:
            self.own = _lazy_re_compile(r"^c+$")

    class Other(LazyObject):  # a lazy object of another kind (a storage, the settings): asking its class sets it up
        def _setup(self) -> None:
            evaluated.append("another lazy object")
            self._wrapped = object()

    class Warns:  # a deprecated object that warns when asked its class
        @property
        def __class__(self) -> type:  # type: ignore[override]
            evaluated.append("a deprecated object")
            return Warns

    evaluated: list[str] = []
    module = types.ModuleType("podium_test_lazy_patterns")
    module.another = Other()
    module.deprecated = Warns()
    module.pattern = _lazy_re_compile(r"^a+$")
    module.Holder = Holder
    module.holder = Holder()
    module.other = SimpleLazyObject(lambda: evaluated.append("other") or "other")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    lazies = [module.pattern, Holder.__dict__["pattern"], module.holder.__dict__["own"]]
    assert [object.__getattribute__(lazy, "_wrapped") for lazy in lazies] == [empty] * 3
    assert lazy_patterns_compile() >= 3
    assert [object.__getattribute__(lazy, "_wrapped").pattern for lazy in lazies] == [r"^a+$", r"^b+$", r"^c+$"]
    assert object.__getattribute__(module.other, "_wrapped") is empty and evaluated == []  # not a pattern: left alone
    assert lazy_patterns_compile() == 0  # compiled once
