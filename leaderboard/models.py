from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

slug_with_dots = RegexValidator(
    r"^[a-z0-9][a-z0-9.-]*$", "Use lowercase letters, digits, dots and hyphens, e.g. training-v4.0."
)


class RoundQuerySet(models.QuerySet["Round"]):
    def published(self, now: timezone.datetime | None = None) -> RoundQuerySet:
        """Rounds whose results are public: the publication date has passed."""
        return self.filter(publication_date__lte=now or timezone.now())


class Round(models.Model):
    """One submission round, judged under one mlperf-logging ruleset."""

    slug = models.CharField(max_length=64, unique=True, validators=[slug_with_dots])
    name = models.CharField(max_length=120)
    usage = models.CharField(max_length=16, default="training")
    ruleset = models.CharField(max_length=16, help_text="mlperf-logging ruleset, e.g. 4.0.0")
    submission_deadline = models.DateTimeField(null=True, blank=True)
    review_start = models.DateTimeField(null=True, blank=True)
    review_end = models.DateTimeField(null=True, blank=True)
    publication_date = models.DateTimeField(null=True, blank=True)
    source = models.TextField(blank=True, help_text="Where the round's facts come from")
    is_demo = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RoundQuerySet.as_manager()

    class Meta:
        ordering = ["-publication_date", "-ruleset", "slug"]

    def __str__(self) -> str:
        return self.name

    @property
    def version_label(self) -> str:
        major, minor, _ = self.ruleset.split(".")
        return f"v{major}.{minor}"

    def is_published(self, now: timezone.datetime | None = None) -> bool:
        return self.publication_date is not None and self.publication_date <= (now or timezone.now())


class Benchmark(models.Model):
    """A benchmark as one round defines it: its quality target, run count and closed-division rules."""

    HIGHER = "higher"
    LOWER = "lower"

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="benchmarks")
    key = models.CharField(max_length=40, help_text="mlperf-logging name, e.g. resnet")
    name = models.CharField(max_length=80)
    area = models.CharField(max_length=60, blank=True)
    task = models.CharField(max_length=120, blank=True)
    model = models.CharField(max_length=120, blank=True)
    dataset = models.CharField(max_length=120, blank=True)
    quality_metric = models.CharField(max_length=120, blank=True)
    quality_target = models.FloatField(null=True, blank=True)
    target_direction = models.CharField(
        max_length=8, choices=[(HIGHER, "higher is better"), (LOWER, "lower is better")], default=HIGHER
    )
    target_text = models.CharField(max_length=200, blank=True)
    required_runs = models.PositiveSmallIntegerField()
    olympic_k = models.PositiveSmallIntegerField(default=1)
    modifiable_hyperparameters = models.JSONField(default=list, blank=True)
    source = models.TextField(blank=True)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["round", "position", "key"]
        constraints = [models.UniqueConstraint(fields=["round", "key"], name="benchmark_unique_per_round")]

    def __str__(self) -> str:
        return f"{self.name} ({self.round.slug})"
