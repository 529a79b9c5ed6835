"""Celery beat's housekeeping of the accounts app."""

from __future__ import annotations

import logging

from celery import shared_task

from accounts.sessions import sessions_sweep

log = logging.getLogger("podium.cleanup")


@shared_task
def sweep_sessions() -> int:
    """Expired sessions out of the database (idempotent: a second run finds none)."""
    removed = sessions_sweep()
    if removed:
        log.info("removed %d expired sessions", removed)
    return removed
