"""Celery beat task: return expired reproduction leases to the queue (the work itself never runs here)."""

from __future__ import annotations

from celery import shared_task

from runners import services


@shared_task(acks_late=True)
def sweep_leases() -> list[int]:
    return services.attempts_sweep()
