import os

from celery import Celery
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("podium")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _preload_checkers(**kwargs: object) -> None:
    """Import the checkers (mlperf_logging, scipy for the RCP check) in the worker's main process, which
    sends worker_init before it forks its pool: every child starts with them loaded, and the first upload
    does not pay the seconds their import takes. (worker_process_init would run in each child, after the
    fork: too late.)"""
    # The engine is pure Python (no models): safe to import before Django's apps are ready.
    from ingest.engine import tool, verify  # noqa: F401 - verify: the rest of the engine a task runs

    tool.preload()
    # The compliance rules too (half a second for every ruleset): each child would parse them on its first
    # verification, the first upload after a start among them.
    tool.preload_rules()
    # And the RCP checker's minimum acceptable means of every ruleset's reference points (0.17 s in all), which
    # each child computed on its first check of each benchmark.
    tool.preload_rcps()
    # And the catalog's rule changes (rule_changes.yaml), which each child read on its first task for the RCP
    # reference of the time (the first task 0.2 s slower than the next under the profiler).
    from catalog.catalog_data import rule_changes

    rule_changes()
    # And the URL patterns compiled for reversing (~45 ms), which each child's first notification would compile.
    import django
    from django.apps import apps

    if not apps.ready:  # Celery's Django fixup has set it up by now; setting it up again redoes logging
        django.setup()
    from core.warmup import heap_freeze, url_reversing_warm

    url_reversing_warm()
    # And the release digest (core.release: ~10 ms of reading Podium's source files), which the hand-over's
    # folder name holds (ingest.handoff): each child computed it in its first task, on the first upload's way.
    from core.release import release

    release()
    # Connected here, not at import: Celery's Django fixup closes every database connection of a new pool process
    # in a worker_process_init receiver of its own, which it connects from its worker_init receiver, which runs
    # before this one (the fixup is installed when the app is made). Connected at import, the warm-up ran first,
    # the fixup then closed the connection it had opened, and the first task opened another.
    worker_process_init.connect(_first_task_warm, dispatch_uid="podium-first-task-warm")
    # Last: all of the above lives as long as the worker. Frozen before the fork, it is out of every pool
    # process's full collections (100-150 ms each, in the middle of a task, when it was not) and its pages
    # stay shared between them.
    heap_freeze(collect=True)


def _first_task_warm(**kwargs: object) -> None:
    """What each pool process's first task would meet for the first time, met when the process starts
    (submissions.worker_warm): its database connection among them, the one its tasks then use (connected to
    worker_process_init by _preload_checkers, after Celery's fixup closed the process's connections). Then the
    task's whole way to a verdict, rehearsed on a made-up bundle with its writes rolled back (rehearsal)."""
    from core.warmup import heap_freeze
    from ingest.services import rehearsal, submissions

    submissions.worker_warm()
    rehearsal.verdict_rehearsal()
    # What the rehearsal built lives as long as the process (compiled statements, the ORM's caches): out of the
    # collector's walks, as the rest of the start is (a full collection walks every object not frozen).
    heap_freeze(collect=True)  # the pool's own objects only: what the main process froze is not walked again


@worker_process_init.connect
def _spare_checker_child(**kwargs: object) -> None:
    """Each pool process keeps a checker child forked ahead (tool.prepare_spare): its first verification's
    first checker call, and each one after (a task forks the next once its verdict is out), does not wait
    for a fork. The children are forked by the process's fork server (tool.enable_spares starts it), so the
    pool process itself never forks again (ingest.engine.forkserver)."""
    from core.warmup import heap_freeze
    from ingest import scratch, storage
    from ingest.engine import tool

    # And its first verification's scratch folders, made ahead likewise (ingest.scratch).
    scratch.enable()
    scratch.prepare()
    heap_freeze(collect=False)  # what the pool set up since the main process froze its heap (no walk: shared pages)
    tool.enable_spares(scratch=storage.scratch_dir())  # the spares' warm-ups there: the litter sweep's to clear
    tool.prepare_spare()


@worker_process_shutdown.connect
def _spare_scratch_removed(**kwargs: object) -> None:
    """A pool process that ends removes the scratch folders it kept for a next verification."""
    from ingest import scratch

    scratch.discard()


@worker_ready.connect
def _sweep_litter_at_start(**kwargs: object) -> None:
    """What a killed worker left (scratch folders, half-stored bundles) goes when a worker starts."""
    from ingest.cleanup import litter_sweep_at_start

    litter_sweep_at_start(reason="worker start")


@task_prerun.connect
@task_postrun.connect
def _recycle_old_connections(task: object = None, **kwargs: object) -> None:
    """What Django does around each request, around each task: a connection older than CONN_MAX_AGE, or left
    unusable by an error, is closed, and one kept is checked before its next use (CONN_HEALTH_CHECKS).
    Celery's own fixup would close every connection instead (settings.CELERY_DB_REUSE_MAX). Not for a task
    run in-process: it runs inside the caller's request or transaction."""
    if _in_process(task):
        return
    from django.db import close_old_connections

    close_old_connections()


@task_prerun.connect
def _settle_cache_outage(task: object = None, **kwargs: object) -> None:
    """A worker that stored a change while the cache (Redis) was unreachable lost that change's bump, and
    reads no generation until its next one: pages kept before the change would be served again once Redis
    answers. Before each task (the sweepers run every 15-30 s) it invalidates them if it saw an outage."""
    if _in_process(task):
        return
    from core.cache import settle_outage

    settle_outage()


def _in_process(task: object) -> bool:
    """Whether the task runs eagerly, inside its caller (no broker configured), not on a worker."""
    return bool(getattr(getattr(task, "request", None), "is_eager", False))
