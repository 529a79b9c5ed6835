"""Reads behind the public pages that are the read side's own (visibility itself: ingest.visibility)."""

from __future__ import annotations

from django.db.models import Count, Q

from accounts.viewer import Visitor
from catalog.models import Round
from ingest.visibility import visible_results, visible_rounds


def rounds_overview(user: Visitor) -> list[Round]:
    """The rounds with current results the visitor may see, those results and their organizations
    counted: a count that included a hidden or held result would give it away."""
    visible = Q(results__in=visible_results(user).current().values("pk"))
    return list(
        visible_rounds(user)
        .annotate(
            result_count=Count("results", filter=visible, distinct=True),
            organization_count=Count("results__organization", filter=visible, distinct=True),
        )
        .filter(result_count__gt=0)
    )
