"""Helpers for migrations that move a model from one app to another without touching its table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def move_content_types(old_app: str, new_app: str, models: list[str]) -> Callable[[Any, Any], None]:
    """A RunPython step that relabels content types, so permissions and admin history follow the
    model to its new app instead of being orphaned (and a second set created beside them)."""

    def forwards(apps: Any, schema_editor: Any) -> None:
        content_type = apps.get_model("contenttypes", "ContentType")
        db = schema_editor.connection.alias
        for model in models:
            if content_type.objects.using(db).filter(app_label=new_app, model=model).exists():
                continue
            content_type.objects.using(db).filter(app_label=old_app, model=model).update(app_label=new_app)

    return forwards
