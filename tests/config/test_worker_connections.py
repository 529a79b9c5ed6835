"""A verification worker keeps its database connection from one task to the next (a new PostgreSQL connection
cost each task 7.5 ms), recycling it as Django's requests do: by CONN_MAX_AGE and after an error."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

from celery.fixups.django import DjangoWorkerFixup

import config.celery
from config.celery import app


def _task(eager: bool) -> SimpleNamespace:
    return SimpleNamespace(request=SimpleNamespace(is_eager=eager))


def test_celerys_fixup_leaves_the_connection_open_between_tasks() -> None:
    fixup = DjangoWorkerFixup(app)
    with mock.patch.object(fixup, "_close_database") as closed:
        for _ in range(100):
            fixup.on_task_prerun(sender=_task(eager=False))
            fixup.on_task_postrun(sender=_task(eager=False))
    assert closed.call_count == 0


def test_the_fixup_without_the_setting_would_close_it_around_every_task() -> None:
    fixup = DjangoWorkerFixup(app)
    fixup.db_reuse_max = None
    with mock.patch.object(fixup, "_close_database") as closed:
        fixup.on_task_prerun(sender=_task(eager=False))
        fixup.on_task_postrun(sender=_task(eager=False))
    assert closed.call_count == 2


def test_old_or_broken_connections_are_recycled_around_each_worker_task() -> None:
    from celery.signals import task_postrun, task_prerun

    hook = config.celery._recycle_old_connections
    for signal in (task_prerun, task_postrun):
        assert any(receiver() is hook for _, receiver in signal.receivers), signal
    with mock.patch("django.db.close_old_connections") as recycle:
        hook(task=_task(eager=False))
        assert recycle.call_count == 1
        hook(task=_task(eager=True))  # in-process: inside the caller's request or transaction
        assert recycle.call_count == 1
