"""factory_boy factories for the catalog and results, for page and selector tests."""

from __future__ import annotations

import datetime

import factory
from django.utils import timezone

from accounts.models import Organization
from catalog.models import Benchmark, Round
from ingest.models import Finding, Result, Run, Submission, System


class RoundFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Round

    slug = factory.Sequence(lambda n: f"test-round-{n}")
    name = factory.Sequence(lambda n: f"Test round {n}")
    ruleset = "4.0.0"
    publication_date = factory.LazyFunction(lambda: timezone.now() - datetime.timedelta(days=30))


class BenchmarkFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Benchmark

    round = factory.SubFactory(RoundFactory)
    key = "resnet"
    name = "ResNet-50"
    area = "Vision"
    model = "ResNet-50 v1.5"
    dataset = "ImageNet"
    quality_metric = "Top-1 accuracy"
    quality_target = 0.759
    target_text = "75.90% top-1 accuracy"
    required_runs = 5
    olympic_k = 1


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"Org {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class SystemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = System

    round = factory.SubFactory(RoundFactory)
    organization = factory.SubFactory(OrganizationFactory)
    slug = factory.Sequence(lambda n: f"system-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.upper())
    description = factory.LazyAttribute(lambda o: {"system_name": o.name, "division": o.division,
                                                   "accelerator_model_name": o.accelerator_model_name})
    description_sha256 = factory.Sequence(lambda n: f"{n:064x}")
    description_valid = True
    division = System.Division.CLOSED
    status = "Available on-premise"
    availability = "Available on-premise"
    category = System.Category.AVAILABLE
    system_type = System.SystemType.ON_PREMISES
    number_of_nodes = 1
    accelerators_per_node = 8
    accelerator_count = 8
    accelerator_model_name = "Fictional X100"


class SubmissionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Submission

    organization = factory.SubFactory(OrganizationFactory)
    round = factory.SubFactory(RoundFactory)
    source = Submission.Source.IMPORT
    sha256 = factory.Sequence(lambda n: f"{n:064x}")
    state = Submission.State.VERIFIED


class ResultFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Result

    system = factory.SubFactory(SystemFactory)
    round = factory.SelfAttribute("system.round")
    organization = factory.SelfAttribute("system.organization")
    submission = factory.SubFactory(SubmissionFactory, round=factory.SelfAttribute("..round"),
                                    organization=factory.SelfAttribute("..organization"))
    benchmark = factory.SubFactory(BenchmarkFactory, round=factory.SelfAttribute("..round"))
    system_slug = factory.SelfAttribute("system.slug")
    benchmark_key = factory.SelfAttribute("benchmark.key")
    digest = factory.Sequence(lambda n: f"{n:064x}")
    division = factory.SelfAttribute("system.division")
    runs_count = 5
    runs_required = 5
    runs_compliant = 5
    olympic_k = 1
    raw_score = 10.0
    scaling_factor = 1.0
    score = 10.0
    verdict = Result.Verdict.VERIFIED
    tool_version = "4.1.68"
    # The facts result_store copies from the system description (override any of them per test).
    submitter = factory.SelfAttribute("organization.name")
    system_name = factory.SelfAttribute("system.name")
    accelerator_model = factory.SelfAttribute("system.accelerator_model_name")
    framework = factory.SelfAttribute("system.framework")
    category = factory.SelfAttribute("system.category")
    system_type = factory.SelfAttribute("system.system_type")
    accelerator_count = factory.SelfAttribute("system.accelerator_count")
    host_count = factory.SelfAttribute("system.number_of_nodes")
    host_processor_count = factory.SelfAttribute("system.host_processor_count")
    accelerator_minutes = factory.LazyAttribute(
        lambda o: o.score * o.accelerator_count if o.score is not None and o.accelerator_count else None)


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    result = factory.SubFactory(ResultFactory)
    position = factory.Sequence(lambda n: n)
    file = factory.LazyAttribute(lambda o: f"org/results/sys/resnet/result_{o.position}.txt")
    sha256 = "0" * 64
    byte_count = 1000
    line_count = 100
    time_to_train_min = 10.0
    status = "success"
    compliant = True
    counted = True


class FindingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Finding

    result = factory.SubFactory(ResultFactory)
    submission = factory.SelfAttribute("result.submission")
    severity = Finding.Severity.ERROR
    checker = "compliance"
    rule = "eval_accuracy"
    file = "org/results/sys/resnet/result_0.txt"
    line = 12
    message = "quality target not reached"
