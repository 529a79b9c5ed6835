"""Benchmarks added to a round from the catalog (catalog/data/catalog.yaml for the round's ruleset) or
from Podium's own (catalog/extensions), by an operator through a command: no Django shell."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from accounts.services import audit_record
from catalog.catalog_data import BenchmarkInfo, load_catalog
from catalog.extensions import EXTENSIONS
from catalog.models import Benchmark, Round
from catalog.services import benchmarks_sync, extension_benchmark_add


class UnknownBenchmark(ValueError):
    """Neither the catalog (for the round's ruleset) nor Podium's own benchmarks know the key."""


def catalog_benchmarks(ruleset: str) -> list[BenchmarkInfo]:
    """The benchmarks the catalog lists for a ruleset, in its order."""
    return [info for round_info, infos in load_catalog() if round_info.ruleset == ruleset for info in infos]


@transaction.atomic
def round_benchmarks_add(*, round: Round, keys: list[str], actor: User) -> list[Benchmark]:
    """Add (or refresh from the catalog) the benchmarks `keys` in the round; refuses every key if one is
    unknown, naming what there is."""
    catalog = {info.key: info for info in catalog_benchmarks(round.ruleset)}
    unknown = [key for key in keys if key not in catalog and key not in EXTENSIONS]
    if unknown:
        raise UnknownBenchmark(
            f"no benchmark {', '.join(map(repr, unknown))} for ruleset {round.ruleset}: the catalog has "
            f"{', '.join(sorted(catalog)) or 'none'}; Podium's own: {', '.join(sorted(EXTENSIONS))}")
    before = sorted(round.benchmarks.values_list("key", flat=True))
    wanted = set(before) | set(keys)
    # In the catalog's order, so tables list them as MLCommons does.
    benchmarks_sync(round=round, benchmarks=[info for key, info in catalog.items() if key in wanted])
    for key in keys:
        if key not in catalog:
            extension_benchmark_add(round=round, key=key)
    after = sorted(round.benchmarks.values_list("key", flat=True))
    audit_record(actor=actor, action="round.benchmarks_add", subject=round, before={"benchmarks": before},
                 after={"benchmarks": after, "added": sorted(set(keys))})
    return list(round.benchmarks.filter(key__in=keys))
