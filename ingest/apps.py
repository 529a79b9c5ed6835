from django.apps import AppConfig


class IngestConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "ingest"

    def ready(self) -> None:
        # Registers the Celery tasks, which the services enqueue by name (they never import ingest.tasks).
        from ingest import cleanup, publication, tasks  # noqa: F401

        publication.connect()  # Result's copy of its round's publication date (ingest.publication)
