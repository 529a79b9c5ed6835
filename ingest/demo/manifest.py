"""What a demo tree contains, as returned by `write_demo_tree`: the importer's tests compare
their verdicts with it."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

# Ways a run is broken on purpose (DemoItem.broken_runs).
ABORTED = "aborted"  # never reaches the quality target; run_stop status "aborted"
NO_RUN_STOP = "no_run_stop"  # the job died: the log ends without run_stop
GARBAGE_LINE = "garbage_line"  # one :::MLLOG line is cut off mid-JSON


@dataclass(frozen=True)
class DemoRound:
    slug: str  # e.g. "demo-2024a"
    name: str  # e.g. "Demo round 2024 A (ruleset 4.0.0)"
    ruleset: str  # an mlperf-logging training ruleset, e.g. "4.0.0"
    folder: str  # folder name under the root for this round
    publication_date: datetime.date  # in the past, so the demo results are public


@dataclass(frozen=True)
class DemoItem:
    """One (system, benchmark) written."""

    round_slug: str
    org: str  # the organization's folder name
    system: str  # the system's folder name (and its JSON's file stem)
    benchmark: str
    runs_written: int
    runs_expected_compliant: int
    expect_official_score: bool  # False when too few runs or too many noncompliant runs
    notes: str  # what is deliberately wrong, if anything
    # (result file name, one of ABORTED / NO_RUN_STOP / GARBAGE_LINE) for each run broken on purpose.
    broken_runs: tuple[tuple[str, str], ...] = ()

    @property
    def rel_dir(self) -> str:
        """The item's results folder, relative to its round folder."""
        return f"{self.org}/results/{self.system}/{self.benchmark}"


@dataclass(frozen=True)
class DemoManifest:
    rounds: list[DemoRound]
    items: list[DemoItem]

    def round(self, slug: str) -> DemoRound:
        return next(r for r in self.rounds if r.slug == slug)

    def summary(self) -> str:
        lines = []
        for rnd in self.rounds:
            items = [i for i in self.items if i.round_slug == rnd.slug]
            files = sum(i.runs_written for i in items)
            lines.append(f"{rnd.slug}  {rnd.name}  published {rnd.publication_date}  ->  {rnd.folder}/")
            lines.append(f"  {len(items)} items, {files} result files")
            for item in items:
                runs = f"{item.runs_expected_compliant}/{item.runs_written} compliant"
                score = "official" if item.expect_official_score else "NO official score"
                note = f"  [{item.notes}]" if item.notes else ""
                lines.append(f"    {item.rel_dir:<58} {runs:<16} {score}{note}")
        total = sum(i.runs_written for i in self.items)
        orgs = {i.org for i in self.items}
        systems = {(i.org, i.system) for i in self.items}
        lines.append(
            f"{len(self.rounds)} rounds, {len(orgs)} organizations, {len(systems)} systems, "
            f"{len(self.items)} items, {total} result files"
        )
        return "\n".join(lines)
