from django.contrib import admin

from catalog.models import Benchmark, Round
from core.admin import BumpsGenerationAdmin


class BenchmarkInline(admin.TabularInline):
    model = Benchmark
    extra = 0
    fields = ["key", "name", "area", "quality_target", "target_direction", "required_runs", "olympic_k"]


@admin.register(Round)
class RoundAdmin(BumpsGenerationAdmin):
    list_display = ["slug", "name", "ruleset", "submission_deadline", "publication_date", "is_demo"]
    list_filter = ["is_demo", "ruleset"]
    search_fields = ["slug", "name"]
    inlines = [BenchmarkInline]
