"""Writes of the catalog: rounds and their benchmarks."""

from __future__ import annotations

import datetime
import zoneinfo
from dataclasses import asdict

from django.db import transaction

from catalog.catalog_data import BenchmarkInfo, RoundInfo, load_catalog
from catalog.models import Benchmark, Round
from core.cache import bump_generation

# Publication is at the start of the day, UTC, unless an admin sets a time.
_PUBLICATION_TIME = datetime.time(0, 0, tzinfo=datetime.UTC)
# A submission deadline is at 1:00 pm Pacific time, the hour of the policies' round schedule ("Friday
# 1:00pm Pacific Time: Submit all required artifacts", mlcommons/policies submission_rules.adoc).
_DEADLINE_TIME = datetime.time(13, 0, tzinfo=zoneinfo.ZoneInfo("America/Los_Angeles"))


def _as_datetime(day: datetime.date | None, at: datetime.time = _PUBLICATION_TIME) -> datetime.datetime | None:
    return None if day is None else datetime.datetime.combine(day, at).astimezone(datetime.UTC)


def _benchmark_fields(info: BenchmarkInfo, position: int) -> dict[str, object]:
    fields = asdict(info)
    fields.pop("key")
    fields["modifiable_hyperparameters"] = list(info.modifiable_hyperparameters)
    fields["position"] = position
    return fields


def benchmarks_sync(*, round: Round, benchmarks: list[BenchmarkInfo]) -> None:
    for position, info in enumerate(benchmarks):
        Benchmark.objects.update_or_create(round=round, key=info.key, defaults=_benchmark_fields(info, position))
    bump_generation()  # on commit: round pages and the API show the new names, targets and order


def extension_benchmark_add(*, round: Round, key: str) -> Benchmark:
    """One of Podium's own benchmarks (catalog/extensions) in a round, e.g. the reference benchmark."""
    from catalog.extensions import EXTENSIONS

    ext = EXTENSIONS[key]
    benchmark, _ = Benchmark.objects.update_or_create(round=round, key=key, defaults={
        "name": ext.name, "area": ext.area, "task": ext.task, "model": ext.model, "dataset": ext.dataset,
        "quality_metric": ext.quality_metric, "quality_target": ext.quality_target, "target_direction": "higher",
        "target_text": ext.target_text, "required_runs": ext.required_runs, "olympic_k": ext.olympic_k,
        "modifiable_hyperparameters": list(ext.modifiable_hyperparameters),
        "source": "Podium reference benchmark (podium_reference/, catalog/extensions/)",
        "position": round.benchmarks.count(),
    })
    bump_generation()
    return benchmark


@transaction.atomic
def catalog_round_sync(*, info: RoundInfo, benchmarks: list[BenchmarkInfo]) -> Round:
    """Create or refresh an official round from the catalog. Dates an admin set are kept; a date the
    catalog does not know (not public yet) is left for an admin to set."""
    deadline = _as_datetime(info.submission_deadline, _DEADLINE_TIME)
    round_, created = Round.objects.get_or_create(
        slug=info.slug,
        defaults={"name": info.name, "ruleset": info.ruleset, "source": info.source,
                  "publication_date": _as_datetime(info.publication_date),
                  "submission_deadline": deadline, "deadline_source": info.deadline_source},
    )
    if not created:
        round_.name = info.name
        round_.source = info.source
        if round_.publication_date is None:
            round_.publication_date = _as_datetime(info.publication_date)
        if round_.submission_deadline is None and deadline is not None:
            round_.submission_deadline = deadline
            round_.deadline_source = info.deadline_source
        round_.save(update_fields=["name", "source", "publication_date", "submission_deadline",
                                   "deadline_source"])
    benchmarks_sync(round=round_, benchmarks=benchmarks)
    return round_


def catalog_sync(*, rulesets: list[str] | None = None) -> list[Round]:
    return [
        catalog_round_sync(info=info, benchmarks=benchmarks)
        for info, benchmarks in load_catalog()
        if rulesets is None or info.ruleset in rulesets
    ]


def round_for_ruleset(ruleset: str) -> Round:
    """The official round of a ruleset, created from the catalog on first use."""
    for info, benchmarks in load_catalog():
        if info.ruleset == ruleset:
            existing = Round.objects.filter(slug=info.slug).first()
            return existing or catalog_round_sync(info=info, benchmarks=benchmarks)
    raise LookupError(f"ruleset {ruleset} is not in the catalog")


@transaction.atomic
def round_create(
    *,
    slug: str,
    name: str,
    ruleset: str,
    publication_date: datetime.datetime | None,
    is_demo: bool = False,
    submission_deadline: datetime.datetime | None = None,
    review_start: datetime.datetime | None = None,
    review_end: datetime.datetime | None = None,
) -> Round:
    """A round of our own (a demo or a private competition) with the benchmarks of its ruleset."""
    catalog = {info.ruleset: benchmarks for info, benchmarks in load_catalog()}
    if ruleset not in catalog:
        raise LookupError(f"ruleset {ruleset} is not in the catalog")
    round_, _ = Round.objects.update_or_create(
        slug=slug,
        defaults={
            "name": name,
            "ruleset": ruleset,
            "publication_date": publication_date,
            "submission_deadline": submission_deadline,
            "review_start": review_start,
            "review_end": review_end,
            "is_demo": is_demo,
            "source": "created in Podium" if not is_demo else "generated demo data",
        },
    )
    benchmarks_sync(round=round_, benchmarks=catalog[ruleset])
    return round_
