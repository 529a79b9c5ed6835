from django.apps import AppConfig


class RunnersConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'runners'

    def ready(self) -> None:
        from ingest.panels import register_result_panel
        from runners import tasks  # noqa: F401  (registers the Celery tasks: the services enqueue them by name)
        from runners.views import result_panel

        register_result_panel("runners.reproduction", template="runners/_result_reproduction.html",
                              context=result_panel, order=20)
