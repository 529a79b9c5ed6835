from __future__ import annotations

import datetime

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Upper
from django.urls import reverse
from django.utils import timezone

from accounts.models import Organization
from catalog.models import Benchmark, Round
from core.fields import ValuesRowJSONField, ValuesRowTextField


class System(models.Model):
    """One system description of one round, as submitted, plus the facets derived from it.

    Descriptions are immutable: a changed JSON is a new row (same slug, new sha256), so a result
    always points at the description it was verified with.
    """

    class Division(models.TextChoices):
        CLOSED = "closed", "Closed"
        OPEN = "open", "Open"

    class Category(models.TextChoices):
        AVAILABLE = "available", "Available"
        PREVIEW = "preview", "Preview"
        RESEARCH = "research", "Research"

    class SystemType(models.TextChoices):
        ON_PREMISES = "on_premises", "On-premises"
        CLOUD = "cloud", "Cloud"

    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="systems")
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="systems")
    slug = models.CharField(max_length=200, help_text="File name in systems/, without .json")
    name = models.CharField(max_length=200, blank=True, help_text="system_name from the description")
    description = models.JSONField(default=dict, blank=True, help_text="The JSON exactly as submitted")
    description_sha256 = models.CharField(max_length=64, blank=True)
    description_valid = models.BooleanField(default=False)
    division = models.CharField(max_length=8, choices=Division.choices, blank=True)
    status = models.CharField(max_length=80, blank=True, help_text="status as written")
    availability = models.CharField(max_length=60, blank=True, help_text="Official availability label")
    category = models.CharField(max_length=12, choices=Category.choices, blank=True)
    system_type = models.CharField(max_length=12, choices=SystemType.choices, blank=True)
    number_of_nodes = models.PositiveIntegerField(null=True, blank=True)
    accelerators_per_node = models.PositiveIntegerField(null=True, blank=True)
    accelerator_count = models.PositiveIntegerField(null=True, blank=True)
    host_processors_per_node = models.PositiveIntegerField(null=True, blank=True)
    host_processor_count = models.PositiveIntegerField(null=True, blank=True)
    accelerator_model_name = models.CharField(max_length=200, blank=True)
    host_processor_model_name = models.CharField(max_length=200, blank=True)
    framework = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["organization__name", "slug"]
        constraints = [
            models.UniqueConstraint(
                fields=["round", "organization", "slug", "description_sha256"], name="system_version_unique"
            )
        ]
        indexes = [models.Index(fields=["round", "organization", "slug"])]

    def __str__(self) -> str:
        return self.name or self.slug

    def get_absolute_url(self) -> str:
        return reverse("leaderboard:system", args=[self.pk])


class Submission(models.Model):
    """What one organization handed in at once: an upload, or one submitter folder of an import.

    The lifecycle (ingest.services.submissions enforces it; docs/architecture.md shows it):

        received ──claim (worker, conditional UPDATE, takes a lease)──▶ verifying
        verifying ──every item judged and stored in one transaction──▶ verified | noncompliant
        verifying ──platform fault (database, disk, storage): hand back──▶ received (retried)
        verifying ──lease lapsed (worker died): sweeper──▶ received (retried)
        verifying ──a bug of Podium's, or retries used up──▶ error
        verified | noncompliant ──a newer upload holds all its entries──▶ superseded
        verified | noncompliant | superseded ──a chair withdraws──▶ withdrawn
        superseded ──its submitter makes it current again──▶ verified | noncompliant

    Only a final submission is ever superseded; "error" is never the submitter's fault and leaves
    nothing current. A received or verifying one past its time is re-dispatched by the sweeper.
    """

    class State(models.TextChoices):
        RECEIVED = "received", "Received"
        VERIFYING = "verifying", "Verifying"
        VERIFIED = "verified", "Verified"
        NONCOMPLIANT = "noncompliant", "Noncompliant"
        ERROR = "error", "Platform error"
        SUPERSEDED = "superseded", "Superseded"
        WITHDRAWN = "withdrawn", "Withdrawn"

    FINAL_STATES = frozenset({State.VERIFIED, State.NONCOMPLIANT, State.ERROR, State.SUPERSEDED, State.WITHDRAWN})

    class Source(models.TextChoices):
        IMPORT = "import", "Import of a results tree"
        UPLOAD = "upload", "Upload"

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="submissions")
    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="submissions")
    source = models.CharField(max_length=12, choices=Source.choices)
    label = models.CharField(max_length=500, blank=True, help_text="Folder or file it came from")
    sha256 = models.CharField(max_length=64, help_text="Content address of the bundle")
    state = models.CharField(max_length=16, choices=State.choices, default=State.RECEIVED)
    tool_version = models.CharField(max_length=40, blank=True)
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="submissions")
    bundle_path = models.CharField(max_length=300, blank=True, help_text="Stored bundle, relative to the store")
    bundle_size = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The order of uploads decides which version of an entry is current, never the order in which their
    # verifications finish. Set at upload; moved to "now" when a submitter makes an old upload current again.
    uploaded_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True, help_text="Last time it was handed to a worker")
    # While verifying, the worker renews this lease; once it lapses the worker is presumed dead and the
    # sweeper hands the submission to another one.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    # A platform fault is never the submitter's: they see a neutral message, operators the detail.
    error_detail = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["round", "organization", "sha256"], name="submission_unique_bundle")
        ]
        indexes = [models.Index(fields=["state", "queued_at"])]

    def __str__(self) -> str:
        return f"{self.organization} {self.round.slug} #{self.pk}"


    def get_absolute_url(self) -> str:
        return reverse("ingest:submission", args=[self.pk])

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    @property
    def upload_order(self) -> tuple[datetime.datetime, int]:
        """Later uploads sort after earlier ones; the primary key breaks ties within a clock tick."""
        return (self.uploaded_at, self.pk)



# The rows a table shows (ResultQuerySet.current): the partial indexes below hold only these.
_TABLE = Q(is_current=True, withdrawn_at__isnull=True)


class ResultQuerySet(models.QuerySet["Result"]):
    def current(self) -> ResultQuerySet:
        """The latest version of every (system, benchmark), unless a chair withdrew it: what tables show."""
        return self.filter(is_current=True, withdrawn_at__isnull=True)

    def published(self, now: datetime.datetime | None = None) -> ResultQuerySet:
        return self.filter(round__publication_date__lte=now or timezone.now())

    @staticmethod
    def official_q() -> Q:
        """Result.is_official as a condition: verified, scored, not withdrawn."""
        return Q(score__isnull=False, verdict=Result.Verdict.VERIFIED, withdrawn_at__isnull=True)

    def ranked(self) -> ResultQuerySet:
        """Results with an official score (see Result.is_official)."""
        return self.filter(self.official_q())


class Result(models.Model):
    """The verdict and score of one (system, benchmark) in one round."""

    class Verdict(models.TextChoices):
        VERIFIED = "verified", "Verified"
        NONCOMPLIANT = "noncompliant", "Noncompliant"

    class ScalingSource(models.TextChoices):
        JSON = "scaling_json", "scaling.json in the bundle"
        RCP = "rcp", "RCP normalization computed by mlperf-logging"
        NONE = "none", "none"
        REVIEW = "review", "applied by the round's chair after review"

    class RcpStatus(models.TextChoices):
        NOT_APPLICABLE = "not_applicable", "RCP check not applicable"
        PASS = "pass", "passes the RCP check"
        FAIL = "fail", "fails the RCP check"
        TOOL_ERROR = "tool_error", "the RCP checker could not judge it"

    class Reproduction(models.TextChoices):
        NONE = "", "not reproduced"
        REPRODUCED = "reproduced", "Reproduced"
        MISMATCH = "mismatch", "Mismatch"
        FAILED = "failed", "Failed"

    submission = models.ForeignKey(Submission, on_delete=models.PROTECT, related_name="results")
    # No index of its own: the indexes below that start with the round serve every lookup by round, and
    # with a narrow one beside them PostgreSQL preferred it to the round table's covering index
    # (result_table_rows) and read the heap: 44 -> 18 ms for a 20,000-result round's filter choices.
    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="results", db_index=False)
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="results")
    system = models.ForeignKey(System, on_delete=models.PROTECT, related_name="results")
    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="results", null=True,
                                  blank=True, help_text="Null when the folder names no benchmark of the round")
    system_slug = models.CharField(max_length=200)
    benchmark_key = models.CharField(max_length=60)
    digest = models.CharField(max_length=64, help_text="Content address of the item's files")
    division = models.CharField(max_length=8, choices=System.Division.choices, blank=True)
    runs_count = models.PositiveSmallIntegerField()
    runs_required = models.PositiveSmallIntegerField(null=True, blank=True)
    runs_compliant = models.PositiveSmallIntegerField()
    olympic_k = models.PositiveSmallIntegerField()
    raw_score = models.FloatField(null=True, blank=True, help_text="Olympic mean, minutes")
    scaling_factor = models.FloatField(null=True, blank=True)
    scaling_source = models.CharField(max_length=16, choices=ScalingSource.choices, default=ScalingSource.NONE)
    score = models.FloatField(null=True, blank=True, help_text="Official score in minutes; null if none")
    no_score_reason = models.CharField(max_length=300, blank=True)
    rcp_status = models.CharField(max_length=16, choices=RcpStatus.choices, default=RcpStatus.NOT_APPLICABLE)
    rcp_message = models.CharField(max_length=300, blank=True)
    rcp_norm_factor = models.FloatField(null=True, blank=True)
    energy_j = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    tool_version = models.CharField(max_length=40)
    # Facts copied from the system description and figures derived at write time, so that tables,
    # exports, charts and the API read one row per result and never parse logs or JSON per request.
    # Results and system descriptions are immutable versions, so the copies never go stale.
    submitter = models.CharField(max_length=120, blank=True)
    system_name = models.CharField(max_length=200, blank=True)
    accelerator_model = models.CharField(max_length=200, blank=True)
    framework = models.CharField(max_length=300, blank=True)
    category = models.CharField(max_length=12, choices=System.Category.choices, blank=True)
    system_type = models.CharField(max_length=12, choices=System.SystemType.choices, blank=True)
    accelerator_count = models.PositiveIntegerField(null=True, blank=True)
    host_count = models.PositiveIntegerField(null=True, blank=True)
    host_processor_count = models.PositiveIntegerField(null=True, blank=True)
    host_memory_gb = models.FloatField(null=True, blank=True)
    price_per_hour = models.FloatField(null=True, blank=True, help_text="USD, if the system gives it")
    accelerator_minutes = models.FloatField(null=True, blank=True)
    host_minutes = models.FloatField(null=True, blank=True)
    cloud_scale = models.FloatField(null=True, blank=True)
    cloud_scale_minutes = models.FloatField(null=True, blank=True)
    energy_kwh = models.FloatField(null=True, blank=True)
    cost_to_train = models.FloatField(null=True, blank=True)
    runs_cv = models.FloatField(null=True, blank=True, help_text="Coefficient of variation of the counted runs")
    reproduction = models.CharField(max_length=12, blank=True, choices=Reproduction.choices,
                                    help_text="Verdict of the newest judged reproduction: reproduced, mismatch, failed")
    # A new version of the same (system, benchmark) clears is_current on the old one before it is
    # inserted, so the partial unique constraint below never sees two current rows.
    is_current = models.BooleanField(default=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True, help_text="Set when a chair withdraws it")
    borrowed_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="lent_to",
                                      help_text="The result whose hyperparameters this version borrowed")
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="supersedes")
    created_at = models.DateTimeField(default=timezone.now)
    # A copy of round.publication_date, kept exact by the database's triggers (ingest.publication): the
    # embargo (ingest.visibility) reads it without joining the round, and an index on Result serves the
    # orderings by it (the API's default).
    round_publication_date = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ResultQuerySet.as_manager()

    class Meta:
        ordering = ["round", "benchmark_key", "score"]
        constraints = [
            models.UniqueConstraint(
                fields=["round", "organization", "system_slug", "benchmark_key"],
                condition=Q(is_current=True),
                name="one_current_result_per_item",
            )
        ]
        # What the round table, the exports and the API list filter and order on (docs/operating.md
        # lists them). The API's orderings with NULLS LAST are PostgreSQL-only expression indexes made
        # in migration 0011 (SQLite cannot index NULLS LAST).
        indexes = [
            models.Index(fields=["round", "benchmark_key", "score"]),
            models.Index(fields=["is_current", "round"]),
            models.Index(fields=["benchmark_key", "accelerator_count"]),
            # The round table's rows (systems) and its sorts, read from the index alone on PostgreSQL (id: the
            # publication hold filters on it).
            models.Index(fields=["round", "division", "organization", "system_slug"], condition=_TABLE,
                         include=["submitter", "system_name", "accelerator_model", "accelerator_count", "host_count",
                                  "benchmark_key", "verdict", "score", "id"],
                         name="result_table_rows"),
            # The filter form's choices, in their order: distinct values read in one sorted pass of the index
            # alone, not hashed from every result of the round (10 -> 4 ms for a 20,000-result round); and
            # each organization's results per round with the newest (the organizations API): 12 -> 5 ms.
            models.Index(fields=["round", "organization", "accelerator_model", "benchmark_key"], condition=_TABLE,
                         include=["created_at"], name="result_table_choices"),
            # The exports, in their order: read straight from the index, no sort.
            models.Index(fields=["round", "division", "benchmark_key", "score", "submitter", "system_slug", "id"],
                         condition=_TABLE, name="result_export_order"),
            # API filters: a benchmark ordered by score, one system, a submitter by name. The benchmark's
            # index carries the division and what the embargo reads (round, organization), so counting a
            # benchmark's results, as the API's first page after a change does, reads the index alone
            # on PostgreSQL (36 -> 16 ms for 18,680 of 200,000 results, bench/browse.py's data).
            models.Index(fields=["benchmark_key", "score", "id"], condition=Q(is_current=True),
                         include=["division", "round", "organization"], name="result_api_bench_score"),
            models.Index(fields=["system_slug"], name="result_system_slug"),
            # A submitter by name, and whether any of its results lie outside an organization (the API's
            # `submitter` filter asks before it narrows to the organization alone: a seek on each side of
            # the organization's id, not a walk over every result of that name).
            models.Index(Upper("submitter"), F("organization"), name="result_submitter_org"),
        ]

    def __str__(self) -> str:
        return f"{self.system_slug} / {self.benchmark_key} ({self.round.slug})"

    def get_absolute_url(self) -> str:
        return reverse("leaderboard:result", args=[self.pk])

    @property
    def is_official(self) -> bool:
        """Only a verified result that was not withdrawn has an official score, and only it is ranked."""
        return self.verdict == self.Verdict.VERIFIED and self.score is not None and self.withdrawn_at is None


class Run(models.Model):
    class Dropped(models.TextChoices):
        COUNTED = "", "counted"
        FASTEST = "fastest", "dropped: fastest"
        SLOWEST = "slowest", "dropped: slowest"
        FAILED = "failed", "dropped: not a successful compliant run"

    result = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="runs")
    position = models.PositiveSmallIntegerField()
    file = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    byte_count = models.PositiveBigIntegerField()
    line_count = models.PositiveIntegerField()
    run_start_ms = models.FloatField(null=True, blank=True)
    run_stop_ms = models.FloatField(null=True, blank=True)
    time_to_train_min = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=40, blank=True, help_text="run_stop status; blank if none")
    compliant = models.BooleanField(null=True, help_text="Compliance checker's verdict; null if it crashed")
    counted = models.BooleanField(default=False)
    dropped = models.CharField(max_length=8, choices=Dropped.choices, blank=True)
    # JSON fields of ValuesRowInsert: a verdict's runs go in as VALUES rows (core.fields says why).
    hyperparameters = ValuesRowJSONField(default=dict, blank=True)
    eval_curve = ValuesRowJSONField(default=list, blank=True)
    seeds = ValuesRowJSONField(default=list, blank=True)
    logged = ValuesRowJSONField(default=dict, blank=True)
    energy_j = models.FloatField(null=True, blank=True)
    rerun_digest = models.CharField(max_length=64, blank=True,
                                    help_text="sha256 of the log without its hyperparameter lines")

    class Meta:
        ordering = ["result", "position"]

    def __str__(self) -> str:
        return self.file

    @property
    def name(self) -> str:
        return self.file.rsplit("/", 1)[-1]


class Finding(models.Model):
    class Severity(models.TextChoices):
        ERROR = "error", "Error"
        WARNING = "warning", "Warning"
        INFO = "info", "Info"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="findings")
    result = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="findings", null=True, blank=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="findings", null=True, blank=True)
    severity = models.CharField(max_length=8, choices=Severity.choices)
    checker = models.CharField(max_length=40, help_text="compliance, system_desc, seed, rcp, run_count, …")
    rule = models.CharField(max_length=120, blank=True)
    file = models.CharField(max_length=500, blank=True)
    line = models.PositiveIntegerField(null=True, blank=True)
    # Text fields of ValuesRowInsert: a verdict's findings go in as VALUES rows (core.fields says why).
    message = ValuesRowTextField()
    detail = ValuesRowTextField(blank=True)
    excerpt = ValuesRowTextField(blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{self.severity} {self.checker}/{self.rule} {where}: {self.message}"


class Implementation(models.Model):
    """The code a submission shipped for one benchmark: `benchmarks/<benchmark>/implementations/<name>/`.

    Stored once as a canonical .tar.gz under its content address (`archive_key`); `files` lists what it
    holds, `systems` the systems it has a `config_<system>.sh` for, which ties it to their results.
    """

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="implementations")
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="implementations")
    round = models.ForeignKey(Round, on_delete=models.PROTECT, related_name="implementations")
    benchmark_key = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    path = models.CharField(max_length=500, help_text="Inside the submitter folder")
    digest = models.CharField(max_length=64, help_text="Content address of its files (names and contents)")
    archive_key = models.CharField(max_length=300)
    archive_sha256 = models.CharField(max_length=64)
    archive_bytes = models.PositiveBigIntegerField()
    files = models.JSONField(default=list, help_text="[{path, size, sha256}], sorted by path")
    systems = models.JSONField(default=list, help_text="Systems with a config_<system>.sh")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["benchmark_key", "name"]
        constraints = [models.UniqueConstraint(fields=["submission", "benchmark_key", "name"],
                                               name="implementation_unique_per_submission")]

    def __str__(self) -> str:
        return f"{self.organization} {self.path}"

    def get_absolute_url(self) -> str:
        return reverse("runners:implementation", args=[self.pk])
