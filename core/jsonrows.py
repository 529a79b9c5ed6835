"""`bulk_create` of new rows sent to PostgreSQL as one JSON document, which the database turns back into rows.

Why: the ORM sends a bulk insert with every value a parameter of its own (client-side binding, core.prepared),
and psycopg turns each one into SQL text in Python: for a verdict's ten runs (19 columns, four of them JSON
documents) that was 200 values dumped and quoted one by one, and a statement too long for psycopg to keep
parsed (it keeps those of at most 50 parameters), ~3.4 ms of the task's CPU on the way to the verdict
(bench/upload_latency.py; on SQLite, which takes the values as they are, half of it). Here the rows are one
JSON text, written by the standard library's encoder at C speed (the encoder Django writes each JSON field
with, so a JSON field's value is written as Django writes it), and one parameter; PostgreSQL reads it with
jsonb_to_recordset, each column as its own type.

Only what the JSON text can carry exactly goes this way: strings, booleans, integers, finite floats, JSON fields'
values and aware datetimes (ISO 8601 with their offset), in columns of Django's own field classes of the types
listed in _TYPES (and Podium's core.fields, which change only the placeholder); the objects' primary keys are
written where all of them have one (drawn ahead), else the database's. Anything else is handed to `bulk_create` as
it was, as on every database but PostgreSQL, so that whatever PostgreSQL or Django would refuse there is refused as
before and what they would store is stored: a field of another class or with a database default, an expression for
a value, some objects with a primary key and some without, a float that is not finite, a naive datetime, rows
whose text passes MAX_TEXT (jsonb holds at most 256 MB). (-0.0 is stored as 0 either way: the ORM's text writes it
as a numeric literal, which has no negative zero, as jsonb's numbers have none.) Text is written unescaped
(ensure_ascii=False), so that a lone surrogate fails on its way to the database, as it does through the ORM. A
failed insert marks its transaction for rollback, as save() does. No signals, as with `bulk_create`.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import connections, router, transaction
from django.db.models import Field, Model

from core import fields as podium_fields
from core import prepared

M = TypeVar("M", bound=Model)

# Internal types whose prepared values (Field.get_prep_value) the JSON text carries exactly, and which PostgreSQL
# reads back from it into their columns' own types.
_TYPES = frozenset({
    "CharField", "TextField", "SmallIntegerField", "PositiveSmallIntegerField", "IntegerField",
    "PositiveIntegerField", "BigIntegerField", "PositiveBigIntegerField", "FloatField", "BooleanField",
    "JSONField", "DateTimeField", "ForeignKey",
})
# The most JSON text one statement carries; more goes to bulk_create, a JSON document per value.
MAX_TEXT = 32 * 2**20
# Field classes of Podium's own that write their values as their Django base class does (core.fields).
_OWN_FIELDS = frozenset({podium_fields.ValuesRowJSONField, podium_fields.ValuesRowTextField})
# The statement of each (model, database, primary keys given) kept: its SQL and the fields it writes, in order; None
# where the model has a field that cannot go this way.
_kept: dict[tuple[type[Model], str, bool], tuple[str, list[Field[Any, Any]]] | None] = {}


def bulk_insert(objs: Sequence[M], *, using: str | None = None) -> list[M]:
    """Insert `objs` (new instances of one model) as `Model.objects.bulk_create(objs)` does, setting each one's
    primary key; returns them."""
    if not objs:
        return list(objs)
    model = type(objs[0])
    alias = using or router.db_for_write(model)
    statement = insert_statement(objs, using=alias)
    if statement is None:
        return model._default_manager.using(alias).bulk_create(objs)
    return inserted_by(objs, statement, using=alias)


def insert_statement(objs: Sequence[Model], *, using: str | None = None) -> tuple[str, list[Any]] | None:
    """The INSERT `bulk_insert` sends for `objs` on PostgreSQL and its parameters, for a caller that sends it inside a
    statement of its own (a WITH query: its RETURNING gives each new row's primary key, named as the model's, in the
    objects' order); None where bulk_insert would hand them to bulk_create (another database, a value the JSON text
    cannot carry: the module's docstring). The caller sends it with `inserted_by`."""
    if not objs:
        return None
    model = type(objs[0])
    alias = using or router.db_for_write(model)
    if connections[alias].vendor != "postgresql":
        return None
    with_pk = objs[0].pk is not None  # all of them, or none: _rows
    plan = _plan(model, alias, with_pk)
    rows = _rows(objs, model, plan[1], with_pk) if plan is not None else None
    return None if plan is None or rows is None else (plan[0], [rows])


def inserted_by(objs: Sequence[M], statement: tuple[str, list[Any]], *, using: str) -> list[M]:
    """Run `statement` (insert_statement's, or a caller's statement built on it whose rows give each new row's primary
    key, in the objects' order) and return `objs` as saved, each with its key, as bulk_create leaves them."""
    # As save() and bulk_create: a failed insert inside a transaction leaves it to be rolled back, never committed.
    # Prepared (core.prepared): the statement's text is the model's, whatever the rows; parsing and planning it took
    # PostgreSQL 0.3-0.4 ms of each of a verdict's inserts (bench/profile_verify_task.py --queries).
    with transaction.mark_for_rollback_on_error(using=using), prepared.cursor(connections[using]) as cursor:
        cursor.execute(*statement)
        ids = [row[0] for row in cursor.fetchall()]
    for obj, pk in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = using
    return list(objs)


def _plan(model: type[Model], alias: str, with_pk: bool) -> tuple[str, list[Field[Any, Any]]] | None:
    key = (model, alias, with_pk)
    if key not in _kept:
        _kept[key] = _planned(model, connections[alias], with_pk)
    return _kept[key]


def _planned(model: type[Model], connection: Any, with_pk: bool) -> tuple[str, list[Field[Any, Any]]] | None:
    """The statement and the fields it writes, in order (the primary key among them `with_pk`: ids drawn ahead)."""
    opts = model._meta
    pk = opts.pk
    fields = [f for f in opts.concrete_fields if f is not pk or with_pk]
    if pk is None or pk.get_internal_type() not in ("AutoField", "BigAutoField") or not all(
            _carried(f) for f in fields if f is not pk):
        return None
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    typed = ", ".join(f"{quote(f.column)} {f.db_type(connection)}" for f in fields)
    read = ", ".join(f"r.{quote(f.column)}" for f in fields)
    sql = (f"INSERT INTO {quote(opts.db_table)} ({columns}) SELECT {read} FROM ROWS FROM "
           f"(jsonb_to_recordset(%s::jsonb) AS ({typed})) WITH ORDINALITY AS r({columns}, podium_n) "
           f"ORDER BY r.podium_n RETURNING {quote(opts.db_table)}.{quote(pk.column)}")
    return sql, fields


def _carried(field: Field[Any, Any]) -> bool:
    """Whether the JSON text carries the field's values as Django would write them: a field of Django's own class of
    a type listed in _TYPES (no method of its own between), with no encoder or default of the database's."""
    kind = type(field)
    return (field.get_internal_type() in _TYPES
            and (kind in _OWN_FIELDS or kind.__module__.startswith("django.db.models.fields"))
            and getattr(field, "encoder", None) is None and not field.generated
            and not field.has_db_default())  # type: ignore[attr-defined]  # Django 5.0's, not in the stubs


def _rows(objs: Sequence[Model], model: type[Model], fields: list[Field[Any, Any]], with_pk: bool) -> str | None:
    """The rows as one JSON text; None where one value cannot be carried exactly (see the module's docstring)."""
    names = [(f.column, f.attname, f, _PREPARED.get(f.get_internal_type(), _INTEGERS if f.primary_key else ()),
              getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)) for f in fields]
    rows = []
    for obj in objs:
        if type(obj) is not model or (obj.pk is not None) is not with_pk:
            return None
        # As bulk_create: a related object saved since it was set gives its id, an unsaved one is refused.
        obj._prepare_related_fields_for_save(operation_name="bulk_create")  # type: ignore[attr-defined]  # no stub
        row = {}
        for column, attname, field, as_is, stamped in names:
            # pre_save, as bulk_create calls it, where it does more than read the value (auto_now: the time now).
            value = field.pre_save(obj, True) if stamped else getattr(obj, attname)
            kind = type(value)
            if kind not in as_is:  # what Field.get_prep_value would change, or may
                if hasattr(value, "resolve_expression"):  # an expression: the ORM compiles it into the SQL
                    return None
                value = field.get_prep_value(value)
                kind = type(value)
            if kind is float:
                if not math.isfinite(value):
                    return None
            elif kind is datetime.datetime:
                if value.tzinfo is None:
                    return None
                value = value.isoformat()
            row[column] = value
        rows.append(row)
    try:
        # A JSON field's value as Django writes it (json.dumps, without an encoder of the field's: _planned); NaN
        # and Infinity are left to bulk_create, where PostgreSQL refuses them in jsonb as before.
        text = json.dumps(rows, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return text if len(text) <= MAX_TEXT else None


# The exact types each internal type's get_prep_value returns as they are (None: no value, in any column). A JSON
# field's value is the JSON text's whatever its type: json.dumps takes what it can write, and refuses the rest.
_INTEGERS = (int, type(None))
_PREPARED: dict[str, tuple[type, ...]] = {
    "CharField": (str, type(None)), "TextField": (str, type(None)), "FloatField": (float, type(None)),
    "BooleanField": (bool, type(None)), "ForeignKey": _INTEGERS, "SmallIntegerField": _INTEGERS,
    "PositiveSmallIntegerField": _INTEGERS, "IntegerField": _INTEGERS, "PositiveIntegerField": _INTEGERS,
    "BigIntegerField": _INTEGERS, "PositiveBigIntegerField": _INTEGERS,
}
