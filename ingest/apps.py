from django.apps import AppConfig
from django.db.models.signals import post_migrate


class IngestConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "ingest"

    def ready(self) -> None:
        # Registers the Celery tasks, which the services enqueue by name (they never import ingest.tasks).
        from ingest import cleanup, publication, tasks  # noqa: F401

        publication.connect()  # Result's copy of its round's publication date (ingest.publication)
        # SQLite drops a table's triggers when a migration rebuilds it: installed again after each migrate.
        post_migrate.connect(publication.ensure_triggers, sender=self, dispatch_uid="ingest.publication.triggers")
