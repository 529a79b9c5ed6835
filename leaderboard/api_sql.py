"""A page of the results list written as JSON by PostgreSQL, in the shape the Python path writes.

Why: on a signed-in (uncached) page, turning 100 rows of ~55 columns into Python values, then into
dicts, then into JSON text cost about a quarter of the request (bench/profile_api.py). PostgreSQL
writes the same rows as JSON text in about the time it takes to send the columns, so the page is one
string per row, joined.

The page is read in two statements: the page's ids, in order (the visitor's filters and ordering, built by
the ORM for each request), then the rows' columns for those ids (a query of every column the page shows,
whose SQL is compiled once per process by core.compiled: building and compiling the page's query as a
values() of ~55 columns cost each request 3.2 ms of CPU, the ids alone 1.2), a statement PostgreSQL
prepares once per connection (core.prepared).

The shape comes from leaderboard.api.ResultRows (field names, their order, the links, the ISO dates);
a test holds both paths' output equal on PostgreSQL. Numbers come out as PostgreSQL
writes them (shortest exact form: 100 where Python writes 100.0), which every JSON reader reads as
the same value. Other databases, other time zones and other renderers take the Python path.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import QuerySet
from django.utils import timezone

from core import prepared
from leaderboard import kept_rows

# How a field is written: "column" as PostgreSQL's to_json writes a value of any type (strings, and what
# has no kind of its own); "integer", "float" and "boolean" the same text for a column of that type, written
# without to_json (_value); "iso" a date as DRF writes it; "link" and "query_link" a URL around an id.
Kind = Literal["column", "integer", "float", "boolean", "iso", "link", "query_link"]


@dataclass(frozen=True)
class Field:
    name: str  # the key in the output
    kind: Kind
    column: str = ""  # the values() column it reads (the id for links)
    before: str = ""  # a link's text before the id, after the site's base ("link", "query_link")
    after: str = ""  # a link's text after the id ("link")


def _quoted(name: str) -> str:
    if '"' in name or "\x00" in name:  # names come from the serializer, never from a request
        raise ValueError(f"unexpected character in column name {name!r}")
    return f'"{name}"'


def _literal(text: str) -> str:
    """`text` as an SQL string literal inside a statement with %s parameters."""
    if "\x00" in text:
        raise ValueError(f"unexpected character in {text!r}")
    return "'" + text.replace("'", "''").replace("%", "%%") + "'"


def _iso(column: str) -> str:
    """What rest_framework's DateTimeField writes in UTC: seconds, microseconds only when not zero, 'Z'."""
    value = f"r.{_quoted(column)}"
    utc = f"({value} AT TIME ZONE 'UTC')"
    return (
        f"CASE WHEN {value} IS NULL THEN NULL ELSE to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || "
        f"CASE WHEN date_part('microseconds', {utc})::integer %% 1000000 <> 0 "
        f"THEN to_char({utc}, '.US') ELSE '' END || 'Z' END"
    )


def _value(field: Field) -> str:
    """The field's value as JSON text, never NULL: what row_to_json writes for it.

    Why not row_to_json: on PostgreSQL 15 it looks up every column's type and output function again for each
    row; a page of 100 rows of ~55 columns cost 3.5 ms that way against ~1.5 ms written out by type
    (bench/profile_api.py's database). The text is the same: numbers by their output function (the same
    function row_to_json calls), a float that is not a JSON number (NaN, Infinity) quoted as row_to_json
    quotes it, strings escaped by to_json."""
    value = f"r.{_quoted(field.column)}"
    if field.kind == "integer":
        return f"COALESCE({value}::text, 'null')"
    if field.kind == "float":
        return (f"CASE WHEN {value} IS NULL THEN 'null' WHEN {value} IN ('NaN', 'Infinity', '-Infinity') "
                f"THEN '\"' || {value}::text || '\"' ELSE {value}::text END")
    if field.kind == "boolean":
        return f"CASE WHEN {value} THEN 'true' WHEN NOT {value} THEN 'false' ELSE 'null' END"
    if field.kind == "iso":  # digits, dashes, colons, a dot, T and Z: nothing to escape
        return f"COALESCE('\"' || {_iso(field.column)} || '\"', 'null')"
    if field.kind in ("link", "query_link"):
        # The link's text around the id comes as parameters already escaped for JSON (the site's base is
        # the request's host): only the id, a number, is written in between.
        return f"COALESCE(%s || {value} || %s, 'null')"
    return f"COALESCE(to_json({value})::text, 'null')"


# A parameter of the page's statement: a link's text around a row's id (after the site's base where True),
# the opening or the closing part.
Slot = tuple[bool, str, bool]


def _pieces(fields: Sequence[Field]) -> list[tuple[Field, str, list[Slot]]]:
    """Each field's part of a row's JSON object (its key, then its value; the object's opening brace before the
    first), as an SQL expression over alias r, with the parameters it takes, in order."""
    pieces = []
    for position, field in enumerate(fields):
        key = ("{" if position == 0 else ",") + json.dumps(field.name, ensure_ascii=False) + ":"
        slots: list[Slot] = []
        if field.kind == "link":
            slots = [(True, field.before, True), (False, field.after, False)]
        elif field.kind == "query_link":
            slots = [(True, field.before, True), (False, "", False)]
        pieces.append((field, f"{_literal(key)} || {_value(field)}", slots))
    return pieces


def _object(fields: Sequence[Field]) -> tuple[str, list[Slot]]:
    """The expression writing one row (alias r) as a JSON object, keys in the fields' order, and the
    parameters it takes, in order."""
    pieces = _pieces(fields)
    slots = [slot for _, _, taken in pieces for slot in taken]
    return " || ".join([*(sql for _, sql, _ in pieces), "'}'"]) if pieces else "'{}'", slots


def kept_form(fields: Sequence[Field], own: Callable[[str], bool], literal: Callable[[str, Sequence[Any]], str],
              joins: Sequence[kept_rows.Join], source: str) -> kept_rows.Kept:
    """`fields` (api_sql's, in order) kept in parts: each run of fields of Result's own columns (`own(column)`)
    is one kept part, written by the triggers; between them, fields read from other tables (`joins`: one for
    each such column, and for round__publication_date) are written when the page is read. `literal(sql,
    params)`: the SQL with its parameters written in (the triggers take none). `source`: the SQL the parts are
    written over (Result's own columns and what is computed of them, such as `official`): part of the shape,
    as the parts are, so that a change of either is a new shape, and every row is written again."""
    parts: list[str] = []
    read: list[str] = []
    run: list[tuple[str, list[Any]]] = []

    def close_run() -> None:
        if run:
            parts.append(literal(" || ".join(sql for sql, _ in run), [value for _, values in run for value in values]))
            read.append(f"r.parts[{len(parts)}]")
            run.clear()

    for field, sql, slots in _pieces(fields):
        if own(field.column):
            run.append((sql, [_kept_link_part(slot) for slot in slots]))
        else:
            if slots:
                raise ValueError(f"{field.name}: a link is written from Result's own columns only")
            close_run()
            read.append(sql)
    run.append(("'}'", []))
    close_run()
    digested = (kept_rows.VERSION, *kept_rows.COLUMNS, source, *parts)
    shape = hashlib.sha256("\x00".join(digested).encode()).hexdigest()[:32]
    return kept_rows.Kept(shape, tuple(parts), " || ".join(read), tuple(joins))


def _kept_link_part(slot: Slot) -> str:
    """A link's text before or after its id, as _link_part writes it, with kept_rows.BASE for the site's base."""
    after_base, text, opening = slot
    escaped = json.dumps(text, ensure_ascii=False)
    if opening:
        return '"' + (kept_rows.BASE if after_base else "") + escaped[1:-1]
    return escaped[1:]


def _link_part(base: str, slot: Slot) -> str:
    """A link's text before or after its id, as the inside of a JSON string with its opening or closing quote."""
    after_base, text, opening = slot
    escaped = json.dumps(base + text if after_base else text, ensure_ascii=False)
    return escaped[:-1] if opening else escaped[1:]


def usable(queryset: QuerySet[Any]) -> bool:
    """PostgreSQL, and dates to be written in UTC (the only zone the SQL writes)."""
    return connections[queryset.db].vendor == "postgresql" and timezone.get_current_timezone_name() == "UTC"


@functools.lru_cache(maxsize=16)
def _rows_statement(rows_sql: str, fields: tuple[Field, ...],
                    kept: kept_rows.Kept | None) -> tuple[str, tuple[Slot | str, ...]]:
    """The statement writing the rows of a list of ids (its first parameter, in order) as one JSON array, and
    its parameters after the ids: "links" (each link's text around its id), "now", "rows" (`rows_sql`'s) and
    "shape" (the kept rows'), in the order returned; the same text for every page, so that it is prepared once
    per connection (core.prepared). With `kept`: each row kept in that shape from its kept text and the fields
    of other tables, read without its result (leaderboard.kept_rows); the others written here from their
    result, as without."""
    row, slots = _object(fields)
    published, created = 'r."round__publication_date"', 'r."created_at"'
    since = (f"CASE WHEN {published} IS NOT NULL AND {created} < {published} AND {published} <= %s "
             f"THEN {published} ELSE {created} END")
    page = 'JOIN podium_page ON podium_page.id = r."id"'
    # The ids are numbered in the page's order and the rows joined in that order.
    ids = "podium_page AS MATERIALIZED (SELECT t.id, t.n FROM unnest(%s::bigint[]) WITH ORDINALITY AS t(id, n))"
    if kept is None:
        return (
            f"WITH {ids} SELECT string_agg(p.j, ',' ORDER BY p.n), max(p.since) FROM ("
            f"SELECT {row} AS j, podium_page.n, {since} AS since FROM ({rows_sql}) r {page}) p"
        ), (*slots, "now", "rows")
    # The kept rows first; the page's other ids (none, mostly: the filter stops them before any result is read)
    # written from their results.
    return (
        f"WITH {ids}, podium_kept AS MATERIALIZED (SELECT r.\"id\", podium_page.n, {kept.read} AS j, {since} AS since "
        f"FROM ({kept.source}) r {page}) "
        "SELECT string_agg(p.j, ',' ORDER BY p.n), max(p.since) FROM ("
        "SELECT podium_kept.n, podium_kept.j, podium_kept.since FROM podium_kept UNION ALL "
        f"SELECT podium_page.n, {row}, {since} FROM ({rows_sql}) r {page} "
        "WHERE podium_page.id NOT IN (SELECT podium_kept.id FROM podium_kept)) p"
    ), ("now", "shape", *slots, "now", "rows")


def page_json(ids: Sequence[int], rows: tuple[str, Sequence[Any]], fields: Sequence[Field], base: str,
              now: datetime.datetime, *, using: str,
              kept: kept_rows.Kept | None = None) -> tuple[str, datetime.datetime | None, int | None]:
    """The page's rows as a JSON array, the latest time one of them became what the caller sees (for
    Last-Modified: stored, or made public by its round's publication at or before `now`, as
    leaderboard.api._visible_since says) and the id of the page's last row; None for an empty page.

    `ids`: the page's ids, in its order (ids_of). `rows`:
    the SQL and parameters of a values() query of every row, unfiltered, with every column `fields` read,
    `id`, `created_at` and `round__publication_date`: joined to the ids, PostgreSQL reads those rows by
    primary key. `kept`: the rows' kept form (leaderboard.kept_rows), where the database has the table.

    Two statements: the page's ids (the visitor's filters and ordering, planned for their values), then the
    rows of those ids, a statement of the same text for every page, prepared (core.prepared): parsing and
    planning it was a third of the page's time in the database. Its answer is one row, the array joined in
    PostgreSQL and that date (100 rows of two dates each cost more to send and decode than the page's JSON)."""
    connection = connections[using]
    if not ids:
        return "[]", None, None
    rows_sql, rows_params = rows
    statement, order = _rows_statement(rows_sql, tuple(fields), kept)
    values: list[Any] = []
    for slot in order:
        if slot == "now":
            values.append(now)
        elif slot == "rows":
            values += rows_params
        elif slot == "shape":
            assert kept is not None
            values.append(kept.shape)
        else:
            values.append(_link_part(base, cast(Slot, slot)))
    from psycopg.types.numeric import Int8  # PostgreSQL only (see usable): not imported by a process on SQLite

    with prepared.cursor(connection) as cursor:
        # As bigints whatever their size: psycopg would type small ids smallint[], a statement prepared apart.
        cursor.execute(statement, [[Int8(pk) for pk in ids], *values])
        joined, since = cursor.fetchone()
    joined = joined or ""
    if kept is not None:  # the kept rows' links: the site's base in place of the mark
        joined = joined.replace(kept_rows.BASE, json.dumps(base, ensure_ascii=False)[1:-1])
    # What DRF's JSONRenderer does to its output: these two are valid JSON but not valid JavaScript.
    text = "[" + joined.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "]"
    return text, since, ids[-1]


def ids_statement(page: QuerySet[Any]) -> tuple[str, list[Any]] | None:
    """The SQL and parameters of a sliced values("pk") queryset; None where a filter can match nothing (an
    unknown round: the ORM then reads no rows either)."""
    try:
        sql, params = page.query.sql_with_params()
    except EmptyResultSet:
        return None
    return sql, list(params)


def ids_of(statement: tuple[str, Sequence[Any] | None] | None, using: str, *, prepare: bool = False) -> list[int]:
    """The page's ids, in order, read by its statement (ids_statement; None: nothing matches). `prepare`: a
    statement with its values written in (no parameter, leaderboard.page_plans), prepared (core.prepared)."""
    if statement is None:
        return []
    connection = connections[using]
    with prepared.cursor(connection) if prepare else connection.cursor() as cursor:
        cursor.execute(*statement)
        return [row[0] for row in cursor.fetchall()]
