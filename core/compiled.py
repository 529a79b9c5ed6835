"""A read the ORM builds once per process and database, then runs again with other values.

Why: the two reads every signed-in request makes before its page (the visitor's memberships and the rounds
whose review they see) cost about 1.3 ms each through the ORM, of which the database's part is 0.2-0.3 ms:
the rest is building and compiling the same query again (bench/profile_api.py). Here the query is built
once with placeholder values, compiled, and its SQL kept; each run puts the real values where the
placeholders were and sends the SQL as the ORM would have.

Placeholders are values no query here takes otherwise (negative ids, a date in 1901, texts holding a NUL, which
no stored text holds: PostgreSQL's text refuses it), so a value that is not replaced can only make the query
match nothing; a text placeholder stands only for a value compared as it is (an exact lookup, no pattern made
of it). The builder must give the same SQL for the same placeholders; a query whose shape depends on the values
(an IN list's length) takes that length as part of its name. Rows come back as the database driver gives them:
use it for integers, floats and strings only (no column that needs the ORM's converters, such as SQLite's dates
or booleans: compare a date in the query, and take a boolean's truth).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from core import prepared

PLACEHOLDER_IDS = tuple(range(-987_654_301, -987_654_401, -1))  # a hundred distinct ids no row has
PLACEHOLDER_NOW = datetime.datetime(1901, 2, 3, 4, 5, 6, 789_012, tzinfo=datetime.UTC)
PLACEHOLDER_TEXTS = tuple(f"\x00podium-placeholder-{i}\x00" for i in range(8))

# (name, database alias, vendor) -> (SQL, its parameters, the placeholder each parameter is, or None)
_kept: dict[tuple[Hashable, ...], tuple[str, list[Any], list[Any]]] = {}


def rows(name: Hashable, build: Callable[[], QuerySet[Any]], values: dict[Any, Any],
         using: str = "default", *, prepare: bool = False) -> list[tuple[Any, ...]]:
    """The rows of `build()` (a values_list queryset built with placeholders), with each placeholder
    replaced by `values[placeholder]`. `name` names the query's shape (with its IN lists' lengths).
    `prepare`: PostgreSQL parses and plans it once per connection (core.prepared: only for a query whose
    best plan does not depend on the values)."""
    sql, given = statement(name, build, values, using)
    connection = connections[using]
    with prepared.cursor(connection) if prepare else connection.cursor() as cursor:
        cursor.execute(sql, given)
        return [tuple(row) for row in cursor.fetchall()]


def statement(name: Hashable, build: Callable[[], QuerySet[Any]], values: dict[Any, Any],
              using: str = "default") -> tuple[str, list[Any]]:
    """The SQL and parameters `rows` would send, for a caller that sends them inside a statement of its own."""
    connection = connections[using]
    key = (name, using, connection.vendor)
    kept = _kept.get(key)
    if kept is None:
        sql, compiled_params = build().query.sql_with_params()
        params = list(compiled_params)
        # The backend may have adapted a date already (SQLite: to text): compare with what it makes of ours.
        now = connection.ops.adapt_datetimefield_value(PLACEHOLDER_NOW)
        slots = [param if _is_id(param) or _is_text(param) else PLACEHOLDER_NOW if param == now else None
                 for param in params]
        kept = _kept[key] = (sql, params, slots)
    sql, params, slots = kept
    given = [param if slot is None else _adapted(connection, values[slot]) for param, slot in zip(params, slots,
                                                                                                    strict=True)]
    return sql, given


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value in PLACEHOLDER_IDS


def _is_text(value: Any) -> bool:
    return type(value) is str and value in PLACEHOLDER_TEXTS


def _adapted(connection: Any, value: Any) -> Any:
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime.datetime) else value


def ids(count: int) -> Sequence[int]:
    """`count` distinct placeholder ids (for an IN list of that length)."""
    if count > len(PLACEHOLDER_IDS) - 1:
        raise ValueError(f"at most {len(PLACEHOLDER_IDS) - 1} placeholder ids")
    return PLACEHOLDER_IDS[1:count + 1]


def texts(count: int) -> Sequence[str]:
    """`count` distinct placeholder texts."""
    if count > len(PLACEHOLDER_TEXTS):
        raise ValueError(f"at most {len(PLACEHOLDER_TEXTS)} placeholder texts")
    return PLACEHOLDER_TEXTS[:count]


USER = PLACEHOLDER_IDS[0]
