"""Reproduction on runners: agents on accelerator hosts that pull jobs over HTTP on leases.

The database is the record: a job is queued → leased (attempt n until its lease expires) → running
(heartbeats extend the lease) → judging (the runner completed; a worker judges its log) → reproduced |
mismatch | failed | cancelled. An expired lease puts the job back in the queue as attempt n+1, up to a
maximum; a report from any attempt that is not the job's current one is refused. A completed attempt's
judgement is awaiting → judging → judged, claimed by the judging task with a conditional UPDATE.
"""

from __future__ import annotations

import datetime
import hmac
import secrets

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from accounts.models import Organization, PrefixedSecretToken, secret_digest
from catalog.models import Round
from ingest.models import Implementation, Result, Run


class Runner(models.Model):
    """A host that runs reproduction jobs. Its labels are what it reported on its last claim."""

    name = models.CharField(max_length=120, unique=True)
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, null=True, blank=True,
                                     related_name="runners", help_text="Empty for the site operator's runners")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    accelerator_model = models.CharField(max_length=200, blank=True)
    accelerator_count = models.PositiveIntegerField(default=0)
    accelerator_memory_gb = models.FloatField(null=True, blank=True)
    cpus = models.PositiveIntegerField(default=0)
    memory_gb = models.FloatField(null=True, blank=True)
    software = models.JSONField(default=dict, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Reported on each claim: the benchmarks whose dataset the host declares (benchmark → declared sha256),
    # and whether its operator lets it run the code that submissions ship.
    datasets = models.JSONField(default=dict, blank=True)
    runs_implementations = models.BooleanField(default=False)
    # Set by an operator, never by the runner: what it is trusted to time on. Timing jobs go only to
    # runners approved for the job's accelerator and count (a CPU-only approval: model "cpu", count 0).
    approved_accelerator_model = models.CharField(max_length=200, blank=True)
    approved_accelerator_count = models.PositiveIntegerField(null=True, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_approved(self) -> bool:
        return self.approved_at is not None


class RunnerToken(PrefixedSecretToken):
    """`prn_<prefix>_<secret>`: good for the agent API only, never for the public or submitter API."""

    PREFIX = "prn"

    runner = models.ForeignKey(Runner, on_delete=models.CASCADE, related_name="tokens")
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.runner} ({self.prefix}…)"


class JobQuerySet(models.QuerySet["ReproductionJob"]):
    def queued(self) -> JobQuerySet:
        return self.filter(state=ReproductionJob.State.QUEUED)

    def active(self) -> JobQuerySet:
        """Held by a runner's lease (a judging job is not: its runner is done with it)."""
        return self.filter(state__in=(ReproductionJob.State.LEASED, ReproductionJob.State.RUNNING))


class ReproductionJob(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        LEASED = "leased", "Leased"
        RUNNING = "running", "Running"
        JUDGING = "judging", "Judging"
        REPRODUCED = "reproduced", "Reproduced"
        MISMATCH = "mismatch", "Mismatch"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINAL_STATES = frozenset({State.REPRODUCED, State.MISMATCH, State.FAILED, State.CANCELLED})

    class Kind(models.TextChoices):
        CONVERGENCE = "convergence", "Convergence (any runner)"
        TIMING = "timing", "Timing (a runner like the submitted system)"

    result = models.ForeignKey(Result, on_delete=models.PROTECT, related_name="reproductions")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, null=True, blank=True, related_name="reproductions")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    module = models.CharField(max_length=200, blank=True,
                              help_text="An allow-listed module the agent runs; empty for an implementation's job")
    implementation = models.ForeignKey(Implementation, on_delete=models.PROTECT, null=True, blank=True,
                                       related_name="reproductions",
                                       help_text="The shipped code run by its run_and_time.sh")
    system_config = models.CharField(max_length=250, blank=True, help_text="config_<system>.sh it is run with")
    scale = models.PositiveIntegerField(default=1, help_text="Nodes of the submitted system")
    config = models.JSONField(default=dict, help_text="Hyperparameters and seed handed to the module")
    accelerator_model = models.CharField(max_length=200, blank=True, help_text="Empty: any, CPU included")
    accelerator_count = models.PositiveIntegerField(default=0)
    time_limit_seconds = models.PositiveIntegerField(default=600)
    deadline = models.DateTimeField(null=True, blank=True)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED)
    verdict_detail = models.JSONField(default=dict, blank=True, help_text="The numbers behind the verdict")
    failure_reason = models.CharField(max_length=300, blank=True)
    cancel_requested = models.BooleanField(default=False)
    current_attempt = models.ForeignKey("Attempt", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["state", "created_at"])]

    def __str__(self) -> str:
        return f"Job #{self.pk} {self.kind} of result {self.result_id} ({self.state})"

    def get_absolute_url(self) -> str:
        return reverse("runners:job", args=[self.pk])

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES


class Attempt(models.Model):
    class Outcome(models.TextChoices):
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        TIMEOUT = "timeout", "Timed out"
        EXPIRED = "expired", "Lease expired"

    class Judgement(models.TextChoices):
        """A completed attempt's way to its job's verdict (empty before completion, and for an expired one)."""

        AWAITING = "awaiting", "Awaiting judgement"
        JUDGING = "judging", "Being judged"
        JUDGED = "judged", "Judged"

    job = models.ForeignKey(ReproductionJob, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    runner = models.ForeignKey(Runner, on_delete=models.PROTECT, related_name="attempts")
    secret_hash = models.CharField(max_length=64)
    accelerator_indexes = models.JSONField(default=list, blank=True)
    leased_at = models.DateTimeField(default=timezone.now)
    lease_expires_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    heartbeats = models.PositiveIntegerField(default=0)
    progress = models.FloatField(null=True, blank=True)
    log_tail = models.TextField(blank=True, help_text="The newest lines the job printed")
    log_path = models.CharField(max_length=300, blank=True)
    log_sha256 = models.CharField(max_length=64, blank=True)
    log_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    output_tail = models.TextField(blank=True)
    elapsed_seconds = models.FloatField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    reported_log_sha256 = models.CharField(max_length=64, blank=True,
                                           help_text="The log the completion named; judged against the upload")
    judgement = models.CharField(max_length=8, choices=Judgement.choices, blank=True)
    judgement_queued_at = models.DateTimeField(null=True, blank=True,
                                               help_text="When the judgement was last handed to the workers")
    judging_started_at = models.DateTimeField(null=True, blank=True)
    judging_tries = models.PositiveSmallIntegerField(default=0)
    judged_at = models.DateTimeField(null=True, blank=True)
    answer = models.JSONField(default=dict, blank=True,
                              help_text="The job's state and verdict as the agent reads them, once judged")
    inventory = models.TextField(blank=True, help_text="The hardware inventory the agent reported (nvidia-smi -q)")

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="attempt_number_unique")]
        # The sweeper's look for judgements the queue lost: few rows, most attempts are judged.
        indexes = [models.Index(fields=["judgement"], name="attempt_judgement_pending",
                                condition=models.Q(judgement__in=["awaiting", "judging"]))]

    def __str__(self) -> str:
        return f"Attempt {self.number} of job #{self.job_id}"

    @staticmethod
    def new_secret() -> tuple[str, str]:
        secret = secrets.token_urlsafe(24)
        return secret, secret_digest(secret)

    def matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash, secret_digest(secret))

    def lease_expired(self, now: datetime.datetime | None = None) -> bool:
        return self.lease_expires_at <= (now or timezone.now())


class Dataset(models.Model):
    """The dataset a benchmark's reproductions need, as an operator declared it: runners must hold a copy
    with this checksum (runner_agent.datasets.tree_digest of the folder)."""

    benchmark_key = models.CharField(max_length=200, unique=True)
    sha256 = models.CharField(max_length=64)
    description = models.CharField(max_length=300, blank=True)
    declared_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    declared_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.benchmark_key} ({self.sha256[:12]}…)"


class ReproductionSample(models.Model):
    """A random sample of a round's results queued for reproduction (a TOP500-style spot check): which
    results, drawn with which seed, so anyone can draw the same sample again."""

    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="reproduction_samples")
    seed = models.BigIntegerField()
    size = models.PositiveIntegerField()
    kind = models.CharField(max_length=12, choices=ReproductionJob.Kind.choices)
    population = models.JSONField(default=list, help_text="The ids of the results it was drawn from, in order")
    result_ids = models.JSONField(default=list)
    job_ids = models.JSONField(default=list)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"sample of {self.size} from {self.round.slug} (seed {self.seed})"
