from django.contrib import admin

from core.admin import BumpsGenerationAdmin
from ingest.models import Finding, Result, Submission, System


@admin.register(System)
class SystemAdmin(BumpsGenerationAdmin):
    list_display = ["slug", "organization", "round", "division", "category", "system_type", "accelerator_count"]
    list_filter = ["round", "division", "category", "system_type"]
    search_fields = ["slug", "name", "organization__name"]
    list_select_related = ["organization", "round"]


@admin.register(Submission)
class SubmissionAdmin(BumpsGenerationAdmin):
    list_display = ["id", "organization", "round", "source", "state", "created_at", "finished_at"]
    list_filter = ["state", "source", "round"]
    list_select_related = ["organization", "round"]


@admin.register(Result)
class ResultAdmin(BumpsGenerationAdmin):
    list_display = ["id", "round", "organization", "system_slug", "benchmark_key", "score", "verdict", "is_current"]
    list_filter = ["round", "verdict", "is_current", "division"]
    search_fields = ["system_slug", "organization__name", "benchmark_key"]
    list_select_related = ["organization", "round"]
    raw_id_fields = ["submission", "system", "benchmark", "superseded_by"]


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    list_display = ["id", "severity", "checker", "rule", "file", "line", "message"]
    list_filter = ["severity", "checker"]
    raw_id_fields = ["submission", "result", "run"]
