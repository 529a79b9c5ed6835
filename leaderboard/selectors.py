"""Reads behind the public pages: which results a visitor may see, and the round table."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Q

from ingest.models import Result, ResultQuerySet, System
from ingest.visibility import round_visible_q, visibility_q
from leaderboard.models import Round, RoundQuerySet


def visible_rounds(user: AbstractBaseUser | AnonymousUser) -> RoundQuerySet:
    """Rounds whose page this visitor may open (see ingest.visibility for the rule)."""
    return Round.objects.filter(pk__in=Round.objects.filter(round_visible_q(user)).values("pk"))


def visible_results(user: AbstractBaseUser | AnonymousUser) -> ResultQuerySet:
    return Result.objects.filter(visibility_q(user, result="pk"))


def visible_systems(user: AbstractBaseUser | AnonymousUser):
    return System.objects.filter(visibility_q(user))


def rounds_overview(user: AbstractBaseUser | AnonymousUser) -> list[Round]:
    visible = visibility_q(user, prefix="results__", result="results") & Q(results__is_current=True)
    return list(
        visible_rounds(user)
        .annotate(
            result_count=Count("results", filter=visible, distinct=True),
            organization_count=Count("results__organization", filter=visible, distinct=True),
        )
        .filter(result_count__gt=0)
    )
