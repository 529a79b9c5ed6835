import os

from celery import Celery
from celery.signals import worker_init, worker_ready

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
    # And the catalog's rule changes (rule_changes.yaml), which each child read on its first task for the RCP
    # reference of the time (the first task 0.2 s slower than the next under the profiler).
    from catalog.catalog_data import rule_changes

    rule_changes()
    # And the URL patterns compiled for reversing (~45 ms), which each child's first notification would compile.
    import django
    from django.apps import apps

    if not apps.ready:  # Celery's Django fixup has set it up by now; setting it up again redoes logging
        django.setup()
    from core.warmup import url_reversing_warm

    url_reversing_warm()


@worker_ready.connect
def _sweep_litter_at_start(**kwargs: object) -> None:
    """What a killed worker left (scratch folders, half-stored bundles) goes when a worker starts."""
    from ingest.cleanup import litter_sweep_at_start

    litter_sweep_at_start(reason="worker start")
