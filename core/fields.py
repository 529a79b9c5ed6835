"""Model fields of Podium's own."""

from __future__ import annotations

from typing import Any

from django.db import models


class ValuesRowInsert:
    """A field whose model's bulk inserts on PostgreSQL write one VALUES row per object.

    Why: since 5.2 Django's bulk_create on PostgreSQL sends each column as one array, unnested in the
    database (fewer placeholders to plan). Podium's statements are sent with their values written in
    (client-side binding), so each value becomes an element of an array literal: psycopg escapes every
    quote in it in Python (a regex substitution per quote) and PostgreSQL parses the arrays back. For
    Podium's rows, text full of quotes (JSON documents, log lines, checker messages), that is the slower way
    (the ORM's bulk_create in a rolled-back transaction, PostgreSQL, bench/profile_api.py's 20,000-result
    database; UNNEST -> VALUES): a verdict's ten runs 11.5 -> 6.5 ms, ten findings 4.0-4.5 -> 3.0 ms, fifty
    13.0-13.9 -> 9.2-9.5 ms.

    Django keeps VALUES rows for any insert with a field that has `get_placeholder` (a placeholder may depend
    on the value, which one array cannot hold); this one gives the placeholder every field has. One such field
    turns its model's whole bulk insert to VALUES rows; the column and what is stored are unchanged."""

    def get_placeholder(self, value: Any, compiler: Any, connection: Any) -> str:
        return "%s"


class ValuesRowJSONField(ValuesRowInsert, models.JSONField):
    pass


class ValuesRowTextField(ValuesRowInsert, models.TextField):  # type: ignore[type-arg]  # generic in the stubs only
    pass
