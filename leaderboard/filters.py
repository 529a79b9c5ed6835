"""Query-string filters of the public read API (django-filter), one FilterSet per endpoint.

Every filter narrows a queryset that is already limited by the embargo rule (ingest.visibility);
none of them can widen it. Unknown choices and malformed numbers answer 400, not an empty list.
"""

from __future__ import annotations

import copy
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db.models import Exists, F, OrderBy, OuterRef, Q, QuerySet
from django.http import QueryDict
from django_filters import rest_framework as df

from accounts.models import Organization
from catalog.models import Benchmark, Round
from ingest.models import Finding, Result, Run, System
from ingest.visibility import visible_results


class NullsLastOrderingFilter(df.OrderingFilter):
    """`?ordering=score,-accelerators` over a whitelist; missing values always sort last.

    SQLite puts NULL first and PostgreSQL last when ascending: without this, "fastest first" would
    open with the results that have no score on one database and not on the other. The primary key
    breaks ties, so that pages never repeat or skip a row.
    """

    def get_ordering_value(self, param: str) -> OrderBy:  # type: ignore[override]
        descending = param.startswith("-")
        name = param[1:] if descending else param
        field = F(self.param_map.get(name, name))
        return field.desc(nulls_last=True) if descending else field.asc(nulls_last=True)

    def filter(self, qs: QuerySet[Any], value: list[str] | None) -> QuerySet[Any]:
        if not value:
            return qs
        return qs.order_by(*[self.get_ordering_value(param) for param in value], "pk")


class LeanFilterSet(df.FilterSet):
    """A FilterSet that costs little per request. django-filter deep-copies every filter and builds a new
    form class, with new form fields, for each request: for the results list (twenty filters, an
    ordering over thirty fields) that cost more CPU than the page's query. Here the form class is built
    once per FilterSet class (Django's Form still copies its fields per instance, so a form never shares
    state), and each filter is copied shallowly: it gets its own `parent` and `model`, while what it was
    declared with (lookup, choices, help) is shared and never written at request time."""

    def __init__(self, data: Any = None, queryset: QuerySet[Any] | None = None, *, request: Any = None,
                 prefix: str | None = None) -> None:
        if queryset is None:
            queryset = self._meta.model._default_manager.all()
        self.is_bound = data is not None
        self.data = data or QueryDict()
        self.queryset = queryset
        self.request = request
        self.form_prefix = prefix
        self.filters = {name: copy.copy(filter_) for name, filter_ in self.base_filters.items()}
        for filter_ in self.filters.values():
            filter_.model = queryset.model
            filter_.parent = self
            if filter_.method is not None:
                filter_.method = filter_.method  # a new FilterMethod bound to this copy, not the declared one

    def get_form_class(self) -> type[Any]:
        cls = type(self)
        built: Any = cls.__dict__.get("_lean_form_class")
        if built is None:
            fields = {name: filter_.field for name, filter_ in cls.base_filters.items()}
            built = type(f"{cls.__name__}Form", (self._meta.form,), fields)
            built.base_fields = _SharedFields(built.base_fields)
            cls._lean_form_class = built  # a race builds it twice, harmlessly
        return built


class _SharedFields(dict):
    """A form class's fields, which each form instance shares rather than deep-copies (Django's BaseForm
    copies them so that one form may change its own fields; a filter's form never does: it only cleans a
    query string). The copy cost a results page ~1 ms of CPU (twenty fields, choices copied with them).
    Each form still gets its own dict, so adding or removing a field stays private to it."""

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return dict(self)


# The results list's default ordering: newest round first, then benchmark, fastest first, id to break
# ties. All on Result's own columns (round_publication_date is the round's date copied onto the row), so
# an index on Result serves it and a page of 100 reads 100 index entries, not a sort of every row.
PUBLISHED = "round_publication_date"
RESULT_ORDERING: tuple[Any, ...] = (F(PUBLISHED).desc(nulls_last=True), "benchmark_key",
                                    F("score").asc(nulls_last=True), "pk")


def _number(field_name: str, lookup: str, help_text: str) -> df.NumberFilter:
    return df.NumberFilter(field_name=field_name, lookup_expr=lookup, help_text=help_text)


class ResultFilter(LeanFilterSet):
    round = df.CharFilter(method="filter_round", help_text="Round slug, e.g. training-v4.0")
    benchmark = df.CharFilter(field_name="benchmark_key", help_text="Benchmark key as mlperf-logging names it, "
                                                                    "e.g. resnet, bert, llama2_70b_lora")
    division = df.ChoiceFilter(choices=System.Division.choices)
    category = df.ChoiceFilter(choices=System.Category.choices)
    system_type = df.ChoiceFilter(choices=System.SystemType.choices)
    verdict = df.ChoiceFilter(choices=Result.Verdict.choices)
    submitter = df.CharFilter(method="filter_submitter",
                              help_text="Submitter name (case-insensitive, exact) or organization slug")
    system = df.CharFilter(field_name="system_slug", help_text="System slug (the systems/<slug>.json file name)")
    accelerator_model = df.CharFilter(field_name="accelerator_model", lookup_expr="icontains",
                                      help_text="Part of the accelerator model name, case-insensitive")
    framework = df.CharFilter(field_name="framework", lookup_expr="icontains",
                              help_text="Part of the framework string, case-insensitive")
    accelerators_min = _number("accelerator_count", "gte", "At least this many accelerators")
    accelerators_max = _number("accelerator_count", "lte", "At most this many accelerators")
    has_score = df.BooleanFilter(method="filter_has_score",
                                 help_text="true: only results with an official score; false: only those without")
    all_versions = df.BooleanFilter(method="keep", help_text="true: also superseded versions "
                                                            "(default: only the current version of each result)")
    ordering = NullsLastOrderingFilter(
        fields=(
            ("score", "score"),
            ("raw_score", "raw_score"),
            ("accelerator_count", "accelerators"),
            ("host_count", "hosts"),
            ("accelerator_minutes", "accelerator_minutes"),
            ("host_minutes", "host_minutes"),
            ("cloud_scale_minutes", "cloud_scale_minutes"),
            ("energy_kwh", "energy_kwh"),
            ("cost_to_train", "cost_to_train"),
            ("runs_cv", "runs_cv"),
            ("submitter", "submitter"),
            ("system_name", "system_name"),
            ("benchmark_key", "benchmark"),
            (PUBLISHED, "round"),
            ("created_at", "created_at"),
            ("id", "id"),
        ),
        help_text="Comma-separated fields, '-' for descending; missing values sort last",
    )

    class Meta:
        model = Result
        fields: list[str] = []

    # Both filters compare Result's own foreign keys with a subquery on the small table, not a join:
    # the planner then walks an index on Result.
    def filter_round(self, queryset: QuerySet[Result], name: str, value: str) -> QuerySet[Result]:
        return queryset.filter(round_id__in=Round.objects.filter(slug=value).values("pk"))

    def filter_submitter(self, queryset: QuerySet[Result], name: str, value: str) -> QuerySet[Result]:
        """The results whose submitter name is `value` (any case) or whose organization's slug is.

        The organization is read first, with whether any result outside it carries the name (two index
        seeks, either side of its id: migration 0016's index): usually none does, an organization's results
        carry its own name, and the filter is then the organization alone, which an index serves in the
        list's order. Their OR has no index order (PostgreSQL sorted every match of both sides: 8 ms for an
        organization's 3,360 of 200,000 results); it stays only where the name reaches beyond it."""
        named = Result.objects.filter(submitter__iexact=value)
        found = (Organization.objects.filter(slug=value)
                 .annotate(below=Exists(named.filter(organization_id__lt=OuterRef("pk"))),
                           above=Exists(named.filter(organization_id__gt=OuterRef("pk"))))
                 .values_list("pk", "below", "above").first())
        if found is None:
            return queryset.filter(submitter__iexact=value)
        organization_id, below, above = found
        if below or above:
            return queryset.filter(Q(submitter__iexact=value) | Q(organization_id=organization_id))
        return queryset.filter(organization_id=organization_id)

    def filter_has_score(self, queryset: QuerySet[Result], name: str, value: bool) -> QuerySet[Result]:
        return queryset.filter(score__isnull=not value)

    def keep(self, queryset: QuerySet[Any], name: str, value: bool) -> QuerySet[Any]:
        return queryset  # read in filter_queryset: its absence must filter too

    def filter_queryset(self, queryset: QuerySet[Result]) -> QuerySet[Result]:
        queryset = super().filter_queryset(queryset)
        if not self.form.cleaned_data.get("all_versions"):
            queryset = queryset.filter(is_current=True)
        return queryset


class RoundFilter(LeanFilterSet):
    ruleset = df.CharFilter(help_text="mlperf-logging ruleset, e.g. 4.0.0")
    usage = df.CharFilter(help_text="training")
    ordering = NullsLastOrderingFilter(
        fields=(("publication_date", "publication_date"), ("slug", "slug"), ("ruleset", "ruleset")),
        help_text="Comma-separated fields, '-' for descending",
    )

    class Meta:
        model = Round
        fields: list[str] = []


class BenchmarkFilter(LeanFilterSet):
    round = df.CharFilter(field_name="round__slug", help_text="Round slug")
    key = df.CharFilter(help_text="Benchmark key, e.g. resnet")
    area = df.CharFilter(lookup_expr="iexact", help_text="e.g. Vision, Language")

    class Meta:
        model = Benchmark
        fields: list[str] = []


class OrganizationFilter(LeanFilterSet):
    round = df.CharFilter(method="filter_round", help_text="Only organizations with results in this round (slug)")

    class Meta:
        model = Organization
        fields: list[str] = []

    def filter_round(self, queryset: QuerySet[Organization], name: str, value: str) -> QuerySet[Organization]:
        # Through the caller's visible results only: filtering on all results would tell an anonymous
        # caller which organizations submitted to a round that is still under embargo.
        user = self.request.user if self.request is not None else AnonymousUser()
        visible = visible_results(user).current().filter(round__slug=value)
        return queryset.filter(pk__in=visible.values("organization_id"))


class SystemFilter(LeanFilterSet):
    round = df.CharFilter(field_name="round__slug", help_text="Round slug")
    organization = df.CharFilter(field_name="organization__slug", help_text="Organization slug")
    slug = df.CharFilter(help_text="System slug (the systems/<slug>.json file name)")
    division = df.ChoiceFilter(choices=System.Division.choices)
    category = df.ChoiceFilter(choices=System.Category.choices)
    system_type = df.ChoiceFilter(choices=System.SystemType.choices)
    accelerator_model = df.CharFilter(field_name="accelerator_model_name", lookup_expr="icontains",
                                      help_text="Part of the accelerator model name, case-insensitive")
    framework = df.CharFilter(lookup_expr="icontains", help_text="Part of the framework string, case-insensitive")
    accelerators_min = _number("accelerator_count", "gte", "At least this many accelerators")
    accelerators_max = _number("accelerator_count", "lte", "At most this many accelerators")
    ordering = NullsLastOrderingFilter(
        fields=(("name", "name"), ("accelerator_count", "accelerators"), ("number_of_nodes", "nodes"),
                ("created_at", "created_at")),
        help_text="Comma-separated fields, '-' for descending; missing values sort last",
    )

    class Meta:
        model = System
        fields: list[str] = []


class RunFilter(LeanFilterSet):
    result = df.NumberFilter(field_name="result_id", help_text="Result id")
    counted = df.BooleanFilter(help_text="true: only the runs the score counts")

    class Meta:
        model = Run
        fields: list[str] = []


class FindingFilter(LeanFilterSet):
    result = df.NumberFilter(field_name="result_id", help_text="Result id")
    run = df.NumberFilter(field_name="run_id", help_text="Run id")
    severity = df.ChoiceFilter(choices=Finding.Severity.choices)
    checker = df.CharFilter(help_text="compliance, system_desc, seed, rcp, run_count, …")

    class Meta:
        model = Finding
        fields: list[str] = []
