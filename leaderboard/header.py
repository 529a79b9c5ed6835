"""What the header of every page shows a signed-in visitor, read in one statement per request.

Why: every signed-in HTML page read the visitor's organizations (for the members links), the rounds they
chair (review links) and their unread notifications, in two or three ORM queries built on each request:
about a fifth of a signed-in round page's time (bench/profile_api.py --path /rounds/bench-r09/). Here they
are one UNION ALL of the three, its text the same for the same numbers of organizations and chaired rounds
(prepared once per connection on PostgreSQL, core.prepared), read once per request and kept on the request's
user object beside its viewer (as ingest.visibility keeps the grant), so the context processor and the
template tag share it.

The memberships and chaired rounds come from the viewer (accounts.sessions read them with the session);
site staff see every round in review instead of the ones they chair: that list is the ORM's, as before.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from django.db import connection

from accounts.models import Organization
from accounts.viewer import Visitor, viewer_of
from catalog.models import Round
from core import prepared
from reviews.models import Notification

# The review links shown, newest submission deadline first.
CHAIRED_SHOWN = 5

_ATTRIBUTE = "_podium_header"


@dataclass(frozen=True)
class Header:
    organizations: list[tuple[str, str]]  # (name, slug), by name
    chaired: list[tuple[str, str]]  # (name, slug), newest deadline first, at most CHAIRED_SHOWN
    unread: int  # unread notifications


NOBODY = Header([], [], 0)


@functools.lru_cache(maxsize=64)
def _statement(organizations: int, chaired: int, vendor: str) -> str:
    """Kind (0 organization, 1 chaired round, 2 the unread count), name, slug, the two sort keys, the count.
    The count's NULLs are typed: PostgreSQL types a UNION's columns branch by branch, and two untyped NULLs
    make text, which the count's bigint does not match."""
    q = connection.ops.quote_name
    branches = []
    if organizations:
        marks = ", ".join(["%s"] * organizations)
        branches.append(f"SELECT 0 AS kind, {q('name')} AS name, {q('slug')} AS slug, {q('name')} AS by_name, "
                        f"NULL AS deadline, CAST(NULL AS BIGINT) AS unread FROM {q(Organization._meta.db_table)} "
                        f"WHERE {q('id')} IN ({marks})")
    if chaired:
        marks = ", ".join(["%s"] * chaired)
        branches.append(f"SELECT 1, {q('name')}, {q('slug')}, NULL, {q('submission_deadline')}, CAST(NULL AS BIGINT) "
                        f"FROM {q(Round._meta.db_table)} WHERE {q('id')} IN ({marks})")
    branches.append(f"SELECT 2, NULL, NULL, NULL, NULL, COUNT(*) FROM {q(Notification._meta.db_table)} "
                    f"WHERE {q('user_id')} = %s AND {q('read_at')} IS NULL")
    return " UNION ALL ".join(branches) + " ORDER BY 1, 4, 5 DESC"


def header(user: Visitor) -> Header:
    """The header's reads for this request's visitor (NOBODY for anonymous visitors)."""
    viewer = viewer_of(user)
    if not viewer.is_authenticated:
        return NOBODY
    holder = viewer.user.__dict__
    kept = holder.get(_ATTRIBUTE)
    if kept is not None and kept[0] is viewer:  # a viewer made again (memberships changed) reads again
        return kept[1]
    organizations = sorted(viewer.organization_ids())
    chaired = [] if viewer.is_staff else sorted(viewer.chaired_round_ids)
    statement = _statement(len(organizations), len(chaired), connection.vendor)
    with prepared.cursor(connection) as cursor:
        cursor.execute(statement, [*organizations, *chaired, viewer.user.pk])
        rows = cursor.fetchall()
    found = Header(organizations=[(name, slug) for kind, name, slug, *_ in rows if kind == 0],
                   chaired=[(name, slug) for kind, name, slug, *_ in rows if kind == 1][:CHAIRED_SHOWN],
                   unread=next(int(row[5]) for row in rows if row[0] == 2))
    if viewer.is_staff:
        in_review = Round.objects.in_review().order_by("-submission_deadline")[:CHAIRED_SHOWN]
        found = Header(found.organizations, [(r.name, r.slug) for r in in_review], found.unread)
    holder[_ATTRIBUTE] = (viewer, found)
    return found
