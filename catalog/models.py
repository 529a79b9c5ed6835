from __future__ import annotations

import datetime

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

slug_with_dots = RegexValidator(
    r"^[a-z0-9][a-z0-9.-]*$", "Use lowercase letters, digits, dots and hyphens, e.g. training-v4.0."
)


class RoundQuerySet(models.QuerySet["Round"]):
    def published(self, now: datetime.datetime | None = None) -> RoundQuerySet:
        """Rounds whose results are public: the publication date has passed."""
        return self.filter(publication_date__lte=now or timezone.now())

    def in_review(self, now: datetime.datetime | None = None) -> RoundQuerySet:
        """Past the submission deadline, not yet published: submitters review each other."""
        now = now or timezone.now()
        return self.filter(submission_deadline__lte=now).exclude(publication_date__lte=now)

    def open_for_uploads(self, now: datetime.datetime | None = None) -> RoundQuerySet:
        now = now or timezone.now()
        return self.filter(submission_deadline__gt=now).exclude(publication_date__lte=now)


class Round(models.Model):
    """One submission round, judged under one mlperf-logging ruleset.

    Its phase follows from its dates: draft (no dates yet) → open (until the submission deadline)
    → review (deadline passed, not yet published) → published → closed.
    """

    class Phase(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open for uploads"
        REVIEW = "review", "In review"
        PUBLISHED = "published", "Published"
        CLOSED = "closed", "Closed"

    slug = models.CharField(max_length=64, unique=True, validators=[slug_with_dots])
    name = models.CharField(max_length=120)
    usage = models.CharField(max_length=16, default="training")
    ruleset = models.CharField(max_length=16, help_text="mlperf-logging ruleset, e.g. 4.0.0")
    submission_deadline = models.DateTimeField(null=True, blank=True)
    review_start = models.DateTimeField(null=True, blank=True)
    review_end = models.DateTimeField(null=True, blank=True)
    publication_date = models.DateTimeField(null=True, blank=True)
    closes_at = models.DateTimeField(null=True, blank=True, help_text="After this the round is closed to changes")
    chairs = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="chaired_rounds")
    source = models.TextField(blank=True, help_text="Where the round's facts come from")
    deadline_source = models.TextField(blank=True, help_text="Where the submission deadline comes from")
    is_demo = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # TOP500-style spot checks: once the submission deadline has passed, this many of the round's
    # verified results are drawn at random (the seed recorded) and queued for reproduction. 0: none.
    reproduction_sample_size = models.PositiveIntegerField(default=0)
    reproduction_sample_kind = models.CharField(max_length=12, default="convergence",
                                                choices=[("convergence", "Convergence"), ("timing", "Timing")])

    objects = RoundQuerySet.as_manager()

    class Meta:
        ordering = ["-publication_date", "-ruleset", "slug"]

    def __str__(self) -> str:
        return self.name

    @property
    def version_label(self) -> str:
        major, minor, _ = self.ruleset.split(".")
        return f"v{major}.{minor}"

    def is_published(self, now: datetime.datetime | None = None) -> bool:
        return self.publication_date is not None and self.publication_date <= (now or timezone.now())

    def phase(self, now: datetime.datetime | None = None) -> str:
        now = now or timezone.now()
        if self.closes_at is not None and now >= self.closes_at:
            return self.Phase.CLOSED
        if self.is_published(now):
            return self.Phase.PUBLISHED
        if self.submission_deadline is not None:
            return self.Phase.REVIEW if now >= self.submission_deadline else self.Phase.OPEN
        return self.Phase.DRAFT


class Benchmark(models.Model):
    """A benchmark as one round defines it: its quality target, run count and closed-division rules."""

    class Direction(models.TextChoices):
        HIGHER = "higher", "higher is better"
        LOWER = "lower", "lower is better"

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
        max_length=8, choices=Direction.choices, default=Direction.HIGHER
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
