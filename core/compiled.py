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
or booleans: compare a date in the query, and take a boolean's truth). `objects` gives model instances instead, each
column through the converters the ORM applies.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model, QuerySet
from django.db.models.query import ModelIterable, get_related_populators  # type: ignore[attr-defined]  # not in the stubs
from django.db.models.sql import UpdateQuery

from core import prepared

PLACEHOLDER_IDS = tuple(range(-987_654_301, -987_654_401, -1))  # a hundred distinct ids no row has
PLACEHOLDER_NOW = datetime.datetime(1901, 2, 3, 4, 5, 6, 789_012, tzinfo=datetime.UTC)
# More dates, for a statement that takes several (PLACEHOLDER_NOW is the first).
PLACEHOLDER_DATES = tuple(PLACEHOLDER_NOW + datetime.timedelta(microseconds=i) for i in range(4))
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
        kept = _kept[key] = (sql, params, _slots(connection, params))
    sql, params, slots = kept
    return sql, _given(connection, params, slots, values)


class _Maker:
    """What ModelIterable works out from a compiled query before its first row, kept: the statement, where each
    model's columns are, the converters of each column, how select_related's rows are set on each instance."""

    def __init__(self, queryset: QuerySet[Any], connection: BaseDatabaseWrapper) -> None:
        query = queryset.query
        if (queryset._iterable_class is not ModelIterable
                or queryset._prefetch_related_lookups  # type: ignore[attr-defined]  # not in the stubs
                or queryset._known_related_objects  # type: ignore[attr-defined]
                or query.annotation_select or query.extra_select):
            raise ValueError("objects() reads plain model instances: no values(), annotation, extra or prefetch")
        compiler = query.get_compiler(connection=connection)
        sql, compiled_params = compiler.as_sql()  # also fills select and klass_info, as executing would
        self.sql, self.params = sql, list(compiled_params)
        self.slots = _slots(connection, self.params)
        select, klass_info = compiler.select, compiler.klass_info
        self.model: type[Model] = klass_info["model"]
        fields = klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [column[0].target.attname for column in select[self.start:self.end]]
        self.related = get_related_populators(klass_info, select, connection.alias)
        self.converters = list(compiler.get_converters([column[0] for column in select[:compiler.col_count]]).items())


# (name, database alias, vendor) -> its _Maker: per process, as _kept. What a maker keeps of the connection it was
# made with is the SQL that alias's backend writes and its converters, which get the connection they convert for
# at each call: the backends' own read nothing else of the connection that made them but its time zone, taken
# from the alias's settings (SQLite's dates). Kept per connection (a thread's own), every request thread's first
# read and every connection opened again after CONN_MAX_AGE built each maker anew (~0.4-1 ms each, a waiting
# upload's first answer three of them).
_makers: dict[tuple[Hashable, str, str], _Maker] = {}


def objects(name: Hashable, build: Callable[[], QuerySet[Any]], values: dict[Any, Any],
            using: str = "default", *, prepare: bool = False) -> list[Any]:
    """The model instances of `build()` (a queryset of instances built with placeholders; select_related
    allowed), as the ORM would make them, with each placeholder replaced as `rows` does."""
    connection = connections[using]
    maker = _maker(name, build, connection, using)
    given = _given(connection, maker.params, maker.slots, values)
    with prepared.cursor(connection) if prepare else connection.cursor() as cursor:
        cursor.execute(maker.sql, given)
        fetched = cursor.fetchall()
    return _made(maker, fetched, connection, using)


def objects_after(name: Hashable, build: Callable[[], QuerySet[Any]], values: dict[Any, Any], *, with_sql: str,
                  with_params: list[Any], source: str, using: str = "default", prepare: bool = False) -> list[Any]:
    """As `objects`, in one statement after `WITH <with_sql>` (its parameters `with_params`), the query reading its
    model's rows from the WITH query named `source` instead of the model's table (`source` must have the table's
    columns: on PostgreSQL a data-modifying statement's RETURNING *, whose changes the statement's other parts do not
    see). Why: a change and the read of what it changed, with the rows it joins, in one round trip."""
    connection = connections[using]
    maker = _maker(name, build, connection, using)
    quote = connection.ops.quote_name
    table = quote(maker.model._meta.db_table)
    if maker.sql.count(f"FROM {table}") != 1:
        raise ValueError(f"objects_after reads one table in FROM: {table} is not read once in {maker.sql!r}")
    sql = f"WITH {with_sql} " + maker.sql.replace(f"FROM {table}", f"FROM {quote(source)} AS {table}")
    given = [*with_params, *_given(connection, maker.params, maker.slots, values)]
    with (transaction.mark_for_rollback_on_error(using=using),  # it writes: as update()
          prepared.cursor(connection) if prepare else connection.cursor() as cursor):
        cursor.execute(sql, given)
        fetched = cursor.fetchall()
    return _made(maker, fetched, connection, using)


def _maker(name: Hashable, build: Callable[[], QuerySet[Any]], connection: BaseDatabaseWrapper, using: str) -> _Maker:
    key = (name, using, connection.vendor)
    maker = _makers.get(key)
    if maker is None:
        maker = _makers[key] = _Maker(build(), connection)
    return maker


def _made(maker: _Maker, fetched: list[Any], connection: BaseDatabaseWrapper, using: str) -> list[Any]:
    made = []
    for fetched_row in fetched:
        row = list(fetched_row)
        for position, (converters, expression) in maker.converters:
            value = row[position]
            for converter in converters:
                value = converter(value, expression, connection)
            row[position] = value
        instance = maker.model.from_db(using, maker.init_list, row[maker.start:maker.end])
        for related in maker.related:
            related.populate(row, instance)
        made.append(instance)
    return made


def update(name: Hashable, build: Callable[[], tuple[QuerySet[Any], dict[str, Any]]], values: dict[Any, Any],
           using: str = "default", *, prepare: bool = True) -> int:
    """`queryset.update(**assignments)` for the (queryset, assignments) `build()` gives, built with placeholders
    (in the filter and in the assigned values), run with each replaced as `rows` does; the number of rows
    updated. For a plain update of one table (no related model's fields). Prepared (`prepare`, as `rows`), unless
    told otherwise: the updates here name their row by its primary key, one plan for any values; on a table with
    many indexes (ingest_result's fifty) planning each took PostgreSQL 0.3 ms of the 0.6-1.1 ms of a verdict's
    UPDATEs (bench/profile_verify_task.py --queries)."""
    connection = connections[using]
    sql, given = update_statement(name, build, values, using)
    with (transaction.mark_for_rollback_on_error(using=using),
          prepared.cursor(connection) if prepare else connection.cursor() as cursor):
        cursor.execute(sql, given)
        return int(cursor.rowcount)


def update_statement(name: Hashable, build: Callable[[], tuple[QuerySet[Any], dict[str, Any]]],
                     values: dict[Any, Any], using: str = "default") -> tuple[str, list[Any]]:
    """The SQL and parameters `update` would send, for a caller that sends them inside a statement of its own."""
    connection = connections[using]
    key = ("update", name, using, connection.vendor)
    kept = _kept.get(key)
    if kept is None:
        queryset, assignments = build()
        query = queryset.query.chain(UpdateQuery)
        query.add_update_values(assignments)  # type: ignore[attr-defined]  # an UpdateQuery's, as chain() made it
        if query.related_updates:
            raise ValueError("update() runs one statement: no related model's fields")
        sql, compiled_params = query.get_compiler(connection=connection).as_sql()
        params = list(compiled_params)
        kept = _kept[key] = (sql, params, _slots(connection, params))
    sql, params, slots = kept
    return sql, _given(connection, params, slots, values)


def _given(connection: BaseDatabaseWrapper, params: list[Any], slots: list[Any], values: dict[Any, Any]) -> list[Any]:
    """The parameters to send: each placeholder's (its slot) replaced by its value in `values`, adapted."""
    return [param if slot is None else _adapted(connection, values[slot]) for param, slot in zip(params, slots,
                                                                                                 strict=True)]


def _slots(connection: BaseDatabaseWrapper, params: list[Any]) -> list[Any]:
    """The placeholder each parameter is, or None."""
    # The backend may have adapted a date already (SQLite: to text): compare with what it makes of ours.
    dates = {connection.ops.adapt_datetimefield_value(date): date for date in PLACEHOLDER_DATES}
    return [param if _is_id(param) or _is_text(param) else dates.get(param) if _hashable(param) else None
            for param in params]


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


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
