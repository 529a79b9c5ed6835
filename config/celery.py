import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("podium")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _sweep_litter_at_start(**kwargs: object) -> None:
    """What a killed worker left (scratch folders, half-stored bundles) goes when a worker starts."""
    from ingest.cleanup import litter_sweep_at_start

    litter_sweep_at_start(reason="worker start")
