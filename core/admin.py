"""Admin pages that edit what visitors see (rounds and their dates, results) bump the results generation
like the services do: an edit in the admin must not leave round pages and API answers stale."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from core.cache import bump_generation

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic only in the stubs
    _ModelAdmin = admin.ModelAdmin


class BumpsGenerationAdmin(_ModelAdmin):
    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        bump_generation()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)  # inlines (benchmarks) and m2m (chairs)
        bump_generation()

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        super().delete_model(request, obj)
        bump_generation()

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        super().delete_queryset(request, queryset)
        bump_generation()
