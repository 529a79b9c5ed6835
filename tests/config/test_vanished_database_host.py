"""A kept database connection to a host that vanished (a failover, a dead machine, a cut route) must fail,
not hold the request or task that uses it: TCP alone gives up after ~15 minutes on a query sent to it and
after two hours on one it was already running. The settings' libpq options bound both (config/settings.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import OperationalError, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from tests.hang_guard import returns_within
from tests.vanishing_host import VanishingHost

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="libpq's TCP options: PostgreSQL only"),
]
# Many times the settings' own bounds (10 s; 10 s of silence and a probe), so that only a wait without end
# fails, however loaded the machine.
BOUND = 120


def _wrapper(host: str, port: int | str, alias: str, *, server_options: str = "") -> BaseDatabaseWrapper:
    """A connection to the test database with the settings' options, through `host`."""
    default = connections["default"].settings_dict
    options = dict(default.get("OPTIONS", {}))
    if server_options:
        options["options"] = f"{options.get('options', '')} {server_options}".strip()
    return type(connections["default"])({**default, "HOST": host, "PORT": port, "OPTIONS": options}, alias)


@contextlib.contextmanager
def _through_vanishing_host(vanishing_host: Callable[[str, int], VanishingHost],
                            ) -> Iterator[tuple[BaseDatabaseWrapper, VanishingHost]]:
    settings = connections["default"].settings_dict
    if not settings["HOST"] or settings["HOST"].startswith("/"):
        pytest.skip("the database is reached through a unix socket: there is no TCP connection to cut")
    host = vanishing_host(settings["HOST"], int(settings["PORT"] or 5432))
    # The server ends the session's query within a second once the forwarder in front of it is gone (the
    # fixture's end, or a test run killed meanwhile): a session left asleep blocks dropping the test database.
    wrapper = _wrapper(host.address, host.port, "through-a-vanishing-host",
                       server_options="-c client_connection_check_interval=1000")
    try:
        yield wrapper, host
    finally:
        with contextlib.suppress(Exception):
            wrapper.close()


def _backend_of(wrapper: BaseDatabaseWrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _fails(wrapper: BaseDatabaseWrapper, sql: str, what: str) -> None:
    with returns_within(BOUND, what), pytest.raises(OperationalError), wrapper.cursor() as cursor:
        cursor.execute(sql)


def _end_backend(pid: int) -> None:
    """The server's side of the vanished connection, which may be sleeping in a query still."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_query_sent_on_a_kept_connection_to_a_vanished_host_fails(vanishing_host) -> None:
    with _through_vanishing_host(vanishing_host) as (wrapper, host):
        backend = _backend_of(wrapper)
        host.vanish()
        try:
            _fails(wrapper, "SELECT 1", "a query sent to a vanished database host")
        finally:
            _end_backend(backend)


def test_a_query_running_when_its_host_vanishes_fails(vanishing_host) -> None:
    """The query was sent and acknowledged; the client waits for its answer with nothing in flight, which only
    keepalive probes can find unanswered."""
    with _through_vanishing_host(vanishing_host) as (wrapper, host):
        backend = _backend_of(wrapper)
        watcher = threading.Thread(target=_vanish_once_running, args=(host, backend), daemon=True)
        watcher.start()
        try:
            # Bounded too, beside the server's check of its client (above): nothing of a killed run lasts.
            _fails(wrapper, f"SELECT pg_sleep({BOUND + 30})", "a query running when its database host vanished")
        finally:
            watcher.join(timeout=BOUND)
            _end_backend(backend)


def _vanish_once_running(host: VanishingHost, backend: int) -> None:
    """Takes the host away once the server runs the query (not after a fixed wait, which a loaded machine
    could outlast before the query is even sent)."""
    settings = connections["default"].settings_dict
    watcher = _wrapper(settings["HOST"], settings["PORT"], "watcher")
    try:
        for _ in range(BOUND * 20):
            with watcher.cursor() as cursor:
                cursor.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", [backend])
                row = cursor.fetchone()
            if row and row[0] == "active":
                break
            time.sleep(0.05)
        host.vanish()
    finally:
        watcher.close()
