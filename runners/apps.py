from django.apps import AppConfig


class RunnersConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'runners'

    def ready(self) -> None:
        from ingest.demo.steps import register_demo_step
        from ingest.panels import register_result_panel
        from runners import demo, tasks  # noqa: F401  (tasks registers the Celery tasks: enqueued by name)
        from runners.views import result_panel

        register_result_panel("runners.reproduction", template="runners/_result_reproduction.html",
                              context=result_panel, order=20)
        register_demo_step("runners", demo.seed_reproductions)
