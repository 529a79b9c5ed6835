from typing import Any

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


def _ensure_kept_rows(using: str = "default", **kwargs: Any) -> None:
    from leaderboard import kept_rows
    from leaderboard.api import kept_form

    kept_rows.ensure(using, kept_form)


class LeaderboardConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "leaderboard"

    def ready(self) -> None:
        # The kept rows' writer holds SQL made by this code (leaderboard.kept_rows): installed again after each
        # migrate. Sent for ingest's models: Django sends post_migrate only for apps with models, and this one
        # has none.
        post_migrate.connect(_ensure_kept_rows, sender=apps.get_app_config("ingest"),
                             dispatch_uid="leaderboard.kept_rows")
