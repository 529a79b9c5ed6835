"""One statement for a credential, the user it names and that user's memberships and chaired rounds.

Why: a signed-in request needs all three before its page, and the ORM reads them in two or three round trips
(the credential with its user, then the viewer's memberships). A session (accounts.sessions) and an API token
(accounts.authentication) are both a row keyed by one value that names a user: here one statement, built once
per process and database from the models' own names, reads that row, its user and the grants, prepared once
per connection on PostgreSQL (a read by a unique key: its plan does not depend on the values).

The answer has one row per membership and chaired round (at least one: LEFT JOINs); the credential's and the
user's columns are the same in each. The last two columns are what the viewer's memberships query gives (an
organization's id and a role, or a round's id and viewer.CHAIR), NULL for a user who has neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import connections, models

from accounts import viewer
from accounts.models import Membership
from catalog.models import Round
from core import prepared


class Statement:
    """`SELECT <lead fields>, <user>, <grants> FROM <lead model> WHERE <conditions>`, with each column's
    converters (SQLite keeps dates as text and booleans as integers) applied as the ORM applies them."""

    def __init__(self, alias: str, lead: Sequence[models.Field[Any, Any]], user_column: str,
                 conditions: Sequence[tuple[str, str]]) -> None:
        """`lead`: the credential's fields to read (all of one model); `user_column`: its column naming the
        user; `conditions`: (column, operator) pairs, each compared with a parameter of `run`, in order."""
        connection = connections[alias]
        quote = connection.ops.quote_name
        model = lead[0].model
        chairs = Round.chairs.through._meta
        user_fields: list[models.Field[Any, Any]] = list(User._meta.concrete_fields)
        self.alias = alias
        self.lead_names = [field.attname for field in lead]
        self.user_names = [field.attname for field in user_fields]
        user_pk = f"u.{quote(User._meta.pk.column)}"
        where = " AND ".join(f"s.{quote(column)} {operator} %s" for column, operator in conditions)
        self.sql = (
            "SELECT " + ", ".join(f"s.{quote(field.column)}" for field in lead) + ", "
            + ", ".join(f"u.{quote(field.column)}" for field in user_fields)
            + f", g.pk, g.role FROM {quote(model._meta.db_table)} s"
            f" LEFT JOIN {quote(User._meta.db_table)} u ON {user_pk} = s.{quote(user_column)}"
            f" LEFT JOIN (SELECT m.{quote('user_id')} AS user_id, m.{quote('organization_id')} AS pk,"
            f" m.{quote('role')} AS role FROM {quote(Membership._meta.db_table)} m"
            f" UNION ALL SELECT c.{quote('user_id')}, c.{quote('round_id')}, %s"
            f" FROM {quote(chairs.db_table)} c) g ON g.user_id = {user_pk}"
            f" WHERE {where}"
        )
        self.converters: list[tuple[int, list[Callable[..., Any]], Any]] = []
        for position, field in enumerate([*lead, *user_fields]):
            column = field.get_col(field.model._meta.db_table)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if found:
                self.converters.append((position, found, column))

    def run(self, params: Sequence[Any]) -> Read | None:
        """The credential's values (in `lead`'s order) and its user, with the user's grants kept on it for its
        viewer (viewer.keep_memberships); None when no row matches."""
        connection = connections[self.alias]
        with prepared.cursor(connection) as cursor:
            cursor.execute(self.sql, [viewer.CHAIR, *params])
            rows = cursor.fetchall()
        if not rows:
            return None
        first = list(rows[0])
        for position, converters, column in self.converters:
            for convert in converters:
                first[position] = convert(first[position], column, connection)
        lead = first[:len(self.lead_names)]
        values = first[len(self.lead_names):len(self.lead_names) + len(self.user_names)]
        if values[0] is None:  # a credential naming no user (a session signed out, or of a user deleted)
            return Read(lead, None)
        user = User.from_db(self.alias, self.user_names, values)
        viewer.keep_memberships(user, [(row[-2], row[-1]) for row in rows if row[-2] is not None])
        return Read(lead, user)


class Read:
    __slots__ = ("lead", "user")

    def __init__(self, lead: list[Any], user: User | None) -> None:
        self.lead = lead
        self.user = user


_statements: dict[tuple[str, str, str], Statement] = {}


def statement(name: str, alias: str, build: Callable[[str], Statement]) -> Statement:
    """The statement `name` for the database `alias`, built by `build(alias)` once per process and vendor."""
    key = (name, alias, connections[alias].vendor)
    found = _statements.get(key)
    if found is None:
        found = _statements[key] = build(alias)
    return found
