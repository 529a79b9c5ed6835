"""A round's current view as a file: CSV or JSON, one row per result (long format), streamed.

Submitters write most of the text in a row (their organization's name, the system's name, slug, accelerator
model and framework come from their bundle). A spreadsheet reads a CSV cell that begins with `=`, `+`, `-`,
`@`, a tab or a carriage return as a formula ("CSV injection", OWASP), so a system named
`=HYPERLINK("https://…"&A2,"…")` would run in the spreadsheet of whoever opens the export. In the CSV such a
text cell is written with a `'` before it, which spreadsheets show as text; numbers are written as they are
(a negative number stays a number), and the JSON export carries every text exactly as stored.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from django.db.models import Case, CharField, Expression, F, Field, TextField, Value, When
from django.db.models.functions import Concat, Substr
from django.db.models.lookups import In

from accounts.viewer import Visitor
from catalog.models import Round
from ingest.models import Result
from leaderboard.addresses import template
from leaderboard.table import TableView, filtered_results

EXPORT_FIELDS = (
    "round", "ruleset", "submitter", "system", "system_name", "benchmark", "division", "category", "system_type",
    "accelerator_model", "accelerators", "hosts", "host_processors", "framework", "runs", "runs_compliant",
    "raw_score", "scaling_factor", "scaling_source", "score", "verdict", "accelerator_minutes", "host_minutes",
    "cloud_scale", "cloud_scale_minutes", "energy_kwh", "cost_to_train", "runs_cv", "url",
)
# The Result column behind each export field after round and ruleset (the round's own) and before url
# (made from the id): all on Result, so a row is a tuple from one index-ordered query.
_EXPORT_COLUMNS = (
    "submitter", "system_slug", "system_name", "benchmark_key", "division", "category", "system_type",
    "accelerator_model", "accelerator_count", "host_count", "host_processor_count", "framework", "runs_count",
    "runs_compliant", "raw_score", "scaling_factor", "scaling_source", "score", "verdict", "accelerator_minutes",
    "host_minutes", "cloud_scale", "cloud_scale_minutes", "energy_kwh", "cost_to_train", "runs_cv", "id",
)
DERIVED_NOTE = ("accelerator_minutes, host_minutes, cloud_scale(_minutes), energy_kwh, cost_to_train and runs_cv are "
                "derived, not official scores")
_CHUNK = 2000

# What a spreadsheet takes for the start of a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _as_text(column: str) -> Expression | str:
    """A text column as the CSV writes it: with a `'` before a value that begins like a formula, done by the
    database; other columns as they are. (A 2,000-row round, in process, 40 runs each, load 0.9: a check per
    cell in Python cost the web process 9.5 ms more CPU, this 4.2 ms, building the query; 10 ms of wall time
    either way, against 51 ms without.)"""
    field: Field[Any, Any] = Result._meta.get_field(column)  # type: ignore[assignment]
    if not isinstance(field, CharField | TextField):
        return column
    return Case(When(In(Substr(F(column), 1, 1), list(FORMULA_STARTS)), then=Concat(Value("'"), F(column))),
                default=F(column), output_field=field.__class__())


_CSV_COLUMNS = tuple(_as_text(column) for column in _EXPORT_COLUMNS)


def export_tuples(round_: Round, view: TableView, user: Visitor, base_url: str = "", *,
                  for_csv: bool = False) -> Iterator[tuple[Any, ...]]:
    """One tuple per result of the current view (long format, EXPORT_FIELDS), the official score beside
    derived figures; read in chunks (a server-side cursor on PostgreSQL), so memory does not grow with
    the round. The order is the one an index holds (ingest.models: result_export_order). `for_csv`: text
    that begins like a formula gets a `'` before it (see the module's docstring)."""
    results = filtered_results(round_, view, user)
    if view.columns:
        results = results.filter(benchmark_key__in=view.columns)
    url = f"{base_url}{template('leaderboard:result')}"
    head: tuple[str, ...] = (round_.slug, round_.ruleset)
    if for_csv:  # the round's slug and ruleset are the catalog's; neutralized anyway, they cost nothing here
        head = tuple("'" + text if text.startswith(FORMULA_STARTS) else text for text in head)
    ordered = results.order_by("division", "benchmark_key", "score", "submitter", "system_slug", "id")
    columns = _CSV_COLUMNS if for_csv else _EXPORT_COLUMNS
    for row in ordered.values_list(*columns).iterator(chunk_size=_CHUNK):
        yield (*head, *row[:-1], url.format(row[-1]))


def _take(buffer: io.StringIO) -> str:
    """What was written to the buffer since the last take, and the buffer emptied."""
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


def export_csv(rows: Iterator[tuple[Any, ...]]) -> Iterator[str]:
    """`rows` from export_tuples(for_csv=True) as CSV, with a header line."""
    # csv.writer writes straight into a StringIO (C to C): a Python-level sink cost a call per row.
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(EXPORT_FIELDS)
    yield _take(buffer)
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == 500:
            writer.writerows(batch)
            batch.clear()
            yield _take(buffer)
    writer.writerows(batch)
    yield _take(buffer)


def export_json(round_: Round, view_query_text: str, rows: Iterator[tuple[Any, ...]]) -> Iterator[str]:
    """The same document as before streaming: round, view, derived_note, results (one object per row)."""
    head = json.dumps({"round": round_.slug, "view": view_query_text, "derived_note": DERIVED_NOTE}, indent=1)
    yield head[:-2] + ',\n "results": ['
    first = True
    for row in rows:
        yield ("\n  " if first else ",\n  ") + json.dumps(dict(zip(EXPORT_FIELDS, row, strict=True)))
        first = False
    yield "\n ]\n}" if not first else "]\n}"
