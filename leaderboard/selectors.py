"""Reads behind the public pages that are the read side's own (visibility itself: ingest.visibility)."""

from __future__ import annotations

from django.db.models import Count, Q

from accounts.viewer import Visitor
from catalog.models import Round
from ingest.visibility import visibility_q, visible_rounds


def rounds_overview(user: Visitor) -> list[Round]:
    visible = visibility_q(user, prefix="results__", result="results") & Q(results__is_current=True)
    return list(
        visible_rounds(user)
        .annotate(
            result_count=Count("results", filter=visible, distinct=True),
            organization_count=Count("results__organization", filter=visible, distinct=True),
        )
        .filter(result_count__gt=0)
    )
