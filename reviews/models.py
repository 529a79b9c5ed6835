"""Peer review of a round's results: flags, their threads and decisions, and hyperparameter borrowing."""

from __future__ import annotations

import datetime

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from accounts.models import Organization
from catalog.models import Round
from ingest.models import Result, Run, Submission


class Flag(models.Model):
    """A reviewer's claim that a result (or one of its runs) breaks a rule, until a chair decides."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        ANSWERED = "answered", "Answered"
        RESOLVED = "resolved", "Resolved"

    UNRESOLVED = frozenset({State.OPEN, State.ANSWERED})

    class Outcome(models.TextChoices):
        REJECTED = "rejected", "Rejected: no issue"
        FIXED = "fixed", "Fixed by resubmission"
        MOVED_TO_OPEN = "moved_to_open", "Moved to the open division"
        WITHDRAWN = "withdrawn", "Result withdrawn"
        SCALED = "scaled", "Scaling factor applied"

    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="flags")
    result = models.ForeignKey(Result, on_delete=models.PROTECT, related_name="flags")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="flags", null=True, blank=True)
    raised_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="flags_raised")
    raised_by_organization = models.ForeignKey(Organization, on_delete=models.PROTECT, null=True, blank=True,
                                               related_name="flags_raised", help_text="Empty when a chair raised it")
    rule = models.CharField(max_length=200, help_text="The rule or check concerned")
    anchor_file = models.CharField(max_length=500, blank=True)
    anchor_line = models.PositiveIntegerField(null=True, blank=True)
    description = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True)
    scaling_factor = models.FloatField(null=True, blank=True, help_text="With the 'scaled' outcome")
    decision_note = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="flags_decided")
    decided_at = models.DateTimeField(null=True, blank=True)
    resubmission = models.ForeignKey(Submission, on_delete=models.PROTECT, null=True, blank=True,
                                     related_name="answers_flags", help_text="The upload that answers it")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["round", "state"])]

    def __str__(self) -> str:
        return f"Flag #{self.pk} on {self.result} ({self.state})"

    def get_absolute_url(self) -> str:
        return reverse("reviews:flag", args=[self.pk])

    @property
    def deadline(self) -> datetime.datetime | None:
        return self.round.review_end

    @property
    def is_overdue(self) -> bool:
        return self.state in self.UNRESOLVED and self.deadline is not None and self.deadline < timezone.now()


class Comment(models.Model):
    flag = models.ForeignKey(Flag, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="review_comments")
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, null=True, blank=True)
    body = models.TextField()
    # A chair may keep a comment out of the public record that appears after publication.
    private = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"Comment by {self.author} on flag #{self.flag_id}"


class Borrowing(models.Model):
    """An entry that adopts another submission's hyperparameters, once, during review."""

    class State(models.TextChoices):
        PENDING = "pending", "Being verified"
        ACCEPTED = "accepted", "Accepted"
        REFUSED = "refused", "Refused"

    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="borrowings")
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="borrowings")
    system_slug = models.CharField(max_length=200)
    benchmark_key = models.CharField(max_length=60)
    entry = models.ForeignKey(Result, on_delete=models.PROTECT, related_name="borrowings",
                              help_text="The entry's version before borrowing")
    source = models.ForeignKey(Result, on_delete=models.PROTECT, related_name="lendings",
                               help_text="The other organization's result whose hyperparameters are borrowed")
    submission = models.ForeignKey(Submission, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="borrowings")
    result = models.ForeignKey(Result, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                               help_text="The new version it produced")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # "once per entry": one borrowing per (organization, system, benchmark) in a round.
            models.UniqueConstraint(fields=["round", "organization", "system_slug", "benchmark_key"],
                                    name="one_borrowing_per_entry")
        ]

    def __str__(self) -> str:
        return f"{self.organization} {self.system_slug}/{self.benchmark_key} borrows from {self.source_id}"


class Notification(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    text = models.CharField(max_length=300)
    url = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.text
