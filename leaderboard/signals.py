"""Cache invalidation: any write to what tables and charts are built from bumps the generation."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import m2m_changed, post_delete, post_save

from leaderboard import cache


def _bump(**kwargs: Any) -> None:
    cache.bump()


def connect() -> None:
    from catalog.models import Benchmark, Round
    from ingest.models import Result, System

    for model in (Result, System, Round, Benchmark):
        post_save.connect(_bump, sender=model, dispatch_uid=f"podium-bump-save-{model.__name__}")
        post_delete.connect(_bump, sender=model, dispatch_uid=f"podium-bump-delete-{model.__name__}")
    m2m_changed.connect(_bump, sender=Round.chairs.through, dispatch_uid="podium-bump-chairs")
