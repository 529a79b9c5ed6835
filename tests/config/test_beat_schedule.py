"""Every task Celery beat is told to send is one a worker knows by that name: a misspelt or unregistered
name is sent all the same, and the worker drops it with an error nobody watches."""

from __future__ import annotations

from django.conf import settings


def test_every_scheduled_task_is_registered_by_the_worker_s_autodiscovery() -> None:
    from config.celery import app

    app.loader.import_default_modules()  # what a worker does at start: autodiscover_tasks() runs then
    unknown = {name: entry["task"] for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
               if entry["task"] not in app.tasks}
    assert unknown == {}
    assert "sweep-sessions" in settings.CELERY_BEAT_SCHEDULE
