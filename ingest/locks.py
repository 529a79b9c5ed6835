"""A lock per entry (round, organization, system, benchmark): uploads of one entry store their results
one at a time, so that deciding which version is current never races.

PostgreSQL: a transaction-scoped advisory lock, held until the transaction ends (it works when no row
exists yet, where SELECT … FOR UPDATE locks nothing). SQLite: every write transaction starts with
BEGIN IMMEDIATE (config/settings.py), which already serializes writers.
"""

from __future__ import annotations

import hashlib

from django.db import connection


def _key(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def entry_lock(*, round_id: int, organization_id: int, system: str, benchmark: str) -> None:
    """Block until no other transaction holds this entry; call inside the transaction that writes it."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        key = _key("entry", round_id, organization_id, system, benchmark)
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])
