"""What a results page is built from besides its rows, kept per data version: its ids statement and envelope.

Why: no body is kept for a signed-in visitor's results page (leaderboard.api: an anonymous one is kept under
its ETag), and every such request built the page's ids query with the ORM: the filter form, the embargo rule,
the paginator, the compiler, ~1.5 ms of CPU of a 5.3 ms page (bench/profile_api.py, 20,000 results). All of
it depends only on what the anonymous body kept under the ETag depends on: the URL, the visitor's grant and
the data's version (the freshness). So a plan is kept per (freshness, grant, URL): the statement of the
page's ids as the ORM compiled it, and the page's envelope (its count and its links). What a page shows is
not kept: its ids and its rows are read from the database on every request. The ids statement is run
prepared, planned once per connection (it holds its values: parsing and planning were half of its 0.4 ms).

The embargo's instant in the statement is the one the plan was built at. A later one could only show more
rows, those of a round whose publication passed in between, and that moves the freshness the plan is kept
under (it counts the publications passed): such a request builds a new plan. So a plan never shows a result
before its round's publication, whenever it is used.

Not planned (built each time, as before): pages by cursor (their ids are read in parts), a filter that reads
the database to decide its SQL (`submitter`: which organization the name is), and anything that fails
(a bad filter value answers 400 every time). Each process keeps at most PLANS plans, the oldest dropped.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

PLANS = 512
# Query parameters whose SQL is decided by reading the database (leaderboard.filters.ResultFilter.filter_submitter)
# or whose ids are read in parts (a cursor): such pages are built whole each time.
UNPLANNED = frozenset({"submitter", "cursor"})


@dataclass(frozen=True)
class Plan:
    """A page's ids statement, its values written in (None: a filter that matches nothing), and the
    envelope's text before the rows."""

    ids_sql: str | None
    head: str


def plan_of(ids_sql: str | None, ids_params: Sequence[Any], head: str,
            literal: Callable[[str, Sequence[Any]], str]) -> Plan:
    """A plan from the ids statement the ORM compiled, with its values written in by `literal` (as Django
    sends them anyway: client-side binding), so that the same text is run, prepared, for every request of the
    plan (core.prepared): with no parameter left, PostgreSQL plans it once, for these very values."""
    return Plan(literal(ids_sql, ids_params) if ids_sql is not None else None, head)


def key_of(request: HttpRequest, freshness: str, sees: str) -> str | None:
    """The plan's key for this request, or None where the page is not planned."""
    if any(name in UNPLANNED for name in request.GET):
        return None
    # The whole URL: the envelope's links are absolute, on the request's scheme and host.
    parts = (freshness, sees, request.build_absolute_uri())
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


_plans: OrderedDict[str, Plan] = OrderedDict()
_lock = threading.Lock()


def find(key: str | None) -> Plan | None:
    if key is None:
        return None
    with _lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
        return plan


def keep(key: str | None, plan: Plan) -> None:
    if key is None:
        return
    with _lock:
        _plans[key] = plan
        while len(_plans) > PLANS:
            _plans.popitem(last=False)


def forget() -> None:
    """Every plan of this process dropped (tests)."""
    with _lock:
        _plans.clear()
