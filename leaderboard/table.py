"""The round table: parse a view from the query string, build rows (systems) × columns (benchmarks).

Everything a visitor chooses (filters, columns, metric, sort, page) lives in the query string, so the
URL is a permalink of the view, and the CSV/JSON export of that URL is exactly what the page shows
(every page of it).

The table scales with the round by doing its work in SQL over Result's own columns (the facts copied
from the system description at write time): one grouped query picks the page's rows (systems), sorted
and filtered in the database, and one more loads only the cells of those rows and of the columns shown.
A page holds PAGE_ROWS systems, whatever the round's size; nothing decodes a description or reverses a
URL per row.
"""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    Max,
    OrderBy,
    OuterRef,
    QuerySet,
    Value,
    When,
    Window,
)
from django.db.models.expressions import Col
from django.db.models.functions import Coalesce, Lower, NullIf
from django.http import QueryDict
from django.utils.formats import get_format, localize
from django.utils.safestring import SafeString, mark_safe

from accounts.models import Organization
from accounts.viewer import Visitor
from catalog.models import Benchmark, Round
from core.release import release
from ingest.metrics import METRICS
from ingest.models import Result, System
from ingest.visibility import viewer_fingerprint, visible_round_results
from leaderboard.addresses import template
from leaderboard.cache import cached_public, freshness
from leaderboard.formatting import minutes

DIVISIONS = dict(System.Division.choices)
CATEGORIES = dict(System.Category.choices)
SYSTEM_TYPES = dict(System.SystemType.choices)
VERDICTS = dict(Result.Verdict.choices)
ROW_SORTS = {"submitter": "Submitter", "system": "System", "accelerators": "Accelerators", "hosts": "Hosts"}
SECTIONS = [*System.Division.choices, ("", "Division unknown (invalid system description)")]

# Systems per page: a screenful or two that a person reads and compares (MLCommons' own tables of a
# round hold 30–80 systems per division), and a bound on the page's size that the round cannot move.
# One page number runs over the division sections in order, so a division is still ranked on its own.
PAGE_ROWS = 50
# Pages of row keys kept per round and results generation (a few KB each): one per view, visitor's grant and
# page; the view holds free text (a framework, an accelerator model), so the count is bounded
# (leaderboard.cache.room_for_variant).
TABLE_ROWS_VARIANTS = 1000
MAX_PAGE = 100_000


def _int(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class TableView:
    division: str = ""
    category: str = ""
    system_type: str = ""
    submitters: tuple[str, ...] = ()
    accelerator_model: str = ""
    framework: str = ""
    accelerators_min: int | None = None
    accelerators_max: int | None = None
    benchmark: str = ""
    columns: tuple[str, ...] = ()
    metric: str = "score"
    sort: str = ""
    descending: bool = False
    page: int = 1

    @classmethod
    def from_query(cls, params: QueryDict) -> TableView:
        """Unknown or malformed values are dropped, never an error: a shared link keeps working."""
        def one(name: str, allowed: dict[str, Any] | None = None) -> str:
            value = params.get(name, "").strip()
            return value if allowed is None or value in allowed else ""

        # One comma-separated `cols` (what static/filters.js writes) or one `cols` per ticked box (the form
        # submitted without JavaScript).
        columns = tuple(c for value in params.getlist("cols") for c in value.split(",") if c)
        return cls(
            division=one("division", DIVISIONS),
            category=one("category", CATEGORIES),
            system_type=one("system_type", SYSTEM_TYPES),
            submitters=tuple(s for s in params.getlist("submitter") if s)[:100],
            accelerator_model=one("accelerator_model")[:200],
            framework=one("framework")[:100],
            accelerators_min=_int(params.get("acc_min")),
            accelerators_max=_int(params.get("acc_max")),
            benchmark=one("benchmark")[:60],
            columns=columns[:100],
            metric=one("metric", METRICS) or "score",
            sort=one("sort")[:60],
            descending=params.get("order") == "desc",
            page=min(max(_int(params.get("page")) or 1, 1), MAX_PAGE),
        )

    @property
    def metric_label(self) -> str:
        return METRICS[self.metric][0]

    @property
    def metric_unit(self) -> str:
        return METRICS[self.metric][2]

    @property
    def metric_formula(self) -> str:
        return METRICS[self.metric][3]

    @property
    def is_derived(self) -> bool:
        return self.metric != "score"

    @property
    def narrows(self) -> bool:
        """Whether any filter narrows the round's rows (the columns offered then depend on them)."""
        return bool(self.division or self.category or self.system_type or self.submitters
                    or self.accelerator_model or self.framework or self.benchmark
                    or self.accelerators_min is not None or self.accelerators_max is not None)


def _in_int_range(value: int | None) -> int | None:
    # A number the database cannot compare (beyond 64 bits) is a filter that matches nothing sensible.
    return value if value is None or -(2**62) < value < 2**62 else None


def filtered_results(round_: Round, view: TableView, user: Visitor) -> QuerySet[Result]:
    """The current results of the round this visitor may see, narrowed by the view's filters; every
    filter reads a column of Result (indexed where it is selective: ingest.models.Result.Meta)."""
    results = visible_round_results(user, round_).current()
    if view.division:
        results = results.filter(division=view.division)
    if view.category:
        results = results.filter(category=view.category)
    if view.system_type:
        results = results.filter(system_type=view.system_type)
    if view.submitters:
        results = results.filter(organization_id__in=Organization.objects.filter(slug__in=view.submitters)
                                 .values("pk"))
    if view.accelerator_model:
        results = results.filter(accelerator_model=view.accelerator_model)
    if view.framework:
        results = results.filter(framework__icontains=view.framework)
    if (low := _in_int_range(view.accelerators_min)) is not None:
        results = results.filter(accelerator_count__gte=low)
    if (high := _in_int_range(view.accelerators_max)) is not None:
        results = results.filter(accelerator_count__lte=high)
    if view.benchmark:
        # Rows (systems) that ran this benchmark, with all their other results too.
        ran = results.filter(benchmark_key=view.benchmark, division=OuterRef("division"),
                             organization_id=OuterRef("organization_id"), system_slug=OuterRef("system_slug"))
        results = results.filter(Exists(ran))
    return results


# --- the page ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    pk: int
    url: str
    verdict: str
    no_score_reason: str
    score: float | None
    value: float | None  # the metric's value, only where the result is official (only those rank)
    is_official: bool
    reproduction: str

    @property
    def verdict_label(self) -> str:
        return VERDICTS.get(self.verdict, self.verdict)


_REPRO_MARK = {"reproduced": "✓", "mismatch": "✗"}


def cell_html(key: str, cell: Cell | None, label: str = "Compare") -> SafeString:
    """One score cell, the markup the template wrote before, built here: a page has hundreds of them
    and the template engine spent most of the page's time on their conditionals. `label` names the
    compare box for a screen reader ("Compare Acme 512 ResNet-50"): a column of boxes all called
    "compare" does not say which result each one picks.

    Every value is escaped with the standard library's html.escape, which replaces the same five
    characters as Django's escape and format_html, without their lazy-text checks on each argument
    (a third of a signed-in table page's time went to them: 400 cells of 8 arguments each); numbers
    written by `_number` or `minutes` hold none of those characters and are not escaped again."""
    if cell is None:
        return mark_safe(f'<td class="num score" data-benchmark="{_escaped(key)}"></td>')
    return mark_safe(_cell_markup(_escaped(key), cell, _escaped(label)))


def _cell_markup(key: str, cell: Cell, label: str) -> str:
    """cell_html's markup of a cell, `key` and `label` already escaped (a row escapes its name once)."""
    verdict_label = cell.verdict_label
    title = _escaped(verdict_label + (f": {cell.no_score_reason}" if cell.no_score_reason else ""))
    shown: str
    if cell.value is not None:
        shown = _escaped(minutes(cell.value))
    elif not cell.is_official and cell.score is not None:
        shown = (f'<s title="not official: {_escaped(verdict_label.lower())}">'
                 f'{_escaped(minutes(cell.score))}</s>')
    else:
        shown = "no score" if cell.score is None else "n/a"
    flag = '<span class="flag" title="noncompliant">!</span>' if cell.verdict == Result.Verdict.NONCOMPLIANT else ""
    repro = ""
    if cell.reproduction:
        note = " (could not be carried out; no verdict)" if cell.reproduction == "failed" else ""
        state = _escaped(cell.reproduction)
        repro = (f'<span class="repro repro-{state}" title="reproduction: {state}{note}">'
                 f'{_escaped(_REPRO_MARK.get(cell.reproduction, "?"))}</span>')
    value = "" if cell.value is None else _number(cell.value)
    pk = cell.pk if type(cell.pk) is int else _escaped(cell.pk)
    # Every value in it is escaped above or here; the rest is constant markup.
    return (f'<td class="num score" data-benchmark="{key}"><input type="checkbox" name="ids" '
            f'value="{pk}" form="compare-form" aria-label="{label}">'
            f'<a href="{_escaped(cell.url)}" class="{_verdict_class(cell.verdict)}" data-value="{value}" '
            f'title="{title}">{shown}</a>{flag}{repro}</td>')


def _escaped(value: Any) -> str:
    return html.escape(str(value), quote=True)


_VERDICT_CLASSES: dict[str, str] = {}


def _verdict_class(verdict: str) -> str:
    """A verdict escaped, kept: a page's few hundred cells hold a handful of verdicts."""
    escaped = _VERDICT_CLASSES.get(verdict)
    if escaped is None:
        escaped = _escaped(verdict)
        if len(_VERDICT_CLASSES) < 64:  # the choices, and at most a few odd stored values
            _VERDICT_CLASSES[verdict] = escaped
    return escaped


def _number(value: Any) -> str:
    """`localize(value)` escaped, as the template wrote a number: for this site's settings (no thousands
    separator, '.' before decimals) a float or an int as Python writes it, without localize's format
    lookups on each of a page's hundreds of numbers; a float Python writes with an exponent, and every
    other value or setting, through localize."""
    kind = type(value)
    if (kind is float or kind is int) and not settings.USE_THOUSAND_SEPARATOR \
            and get_format("DECIMAL_SEPARATOR") == ".":
        text = repr(value)
        if "e" not in text:
            return text
    return _escaped(localize(value))


def _or_dash(value: Any) -> str:
    """The template's `value|default:"—"`."""
    return _escaped(value) if value else "—"


def _count_or_dash(value: int | None) -> str:
    """The template's `value|default_if_none:"—"` (a number as the template prints it)."""
    return "—" if value is None else _number(value)


@dataclass
class Row:
    slug: str
    submitter: str
    name: str
    url: str
    accelerator_model: str
    accelerators: int | None
    hosts: int | None
    category: str
    system_type: str
    cells: list[tuple[str, Cell | None]] = field(default_factory=list)
    benchmark_names: dict[str, str] = field(default_factory=dict)  # one dict shared by the page's rows

    @property
    def html(self) -> SafeString:
        """The row's markup, as the template wrote it (without the whitespace between tags): one string
        per row instead of a template loop over its cells and a variable lookup per column."""
        # html.escape replaces characters one by one, so a label's parts are escaped apart: the name once.
        name = _escaped(self.name)
        cells = "".join(
            _cell_markup(_escaped(key), cell, f"Compare {name} {_escaped(self.benchmark_names.get(key, key))}")
            if cell is not None else cell_html(key, None) for key, cell in self.cells)
        return mark_safe(
            f'<tr data-system="{_escaped(self.slug)}"><th scope="row" class="system"><a href="{_escaped(self.url)}">'
            f'{name}</a></th><td>{_escaped(self.submitter)}</td>'
            f'<td class="wide-only">{_or_dash(self.accelerator_model)}</td>'
            f'<td class="num">{_count_or_dash(self.accelerators)}</td>'
            f'<td class="num wide-only">{_count_or_dash(self.hosts)}</td>'
            f'<td class="wide-only">{_or_dash(self.category)}</td>'
            f'<td class="wide-only">{_or_dash(self.system_type)}</td>{cells}</tr>')


@dataclass
class Section:
    division: str
    label: str
    rows: list[Row]


@dataclass(frozen=True)
class Column:
    benchmark: Benchmark
    link: str
    sorted: bool


@dataclass(frozen=True)
class PageLink:
    number: int
    url: str
    current: bool


@dataclass
class Paging:
    number: int
    pages: int
    rows: int
    first: int
    last: int
    previous: str
    next: str
    links: list[PageLink | None]  # None: a gap ("…")


@dataclass
class Table:
    round: Round
    view: TableView
    benchmarks: list[Benchmark]
    all_benchmarks: list[Benchmark]
    columns: list[Column]
    sort_links: dict[str, str]
    sections: list[Section]
    paging: Paging


def view_query(params: QueryDict) -> QueryDict:
    """The view's query string without its page number: what exports, sorting and page links start from."""
    query = params.copy()
    query.pop("page", None)
    return query


def _sort_link(query: QueryDict, view: TableView, key: str) -> str:
    """The current view, sorted by `key`, from its first page; a second click on the column reverses it."""
    params = query.copy()
    params["sort"] = key
    if view.sort == key and not view.descending:
        params["order"] = "desc"
    else:
        params.pop("order", None)
    return f"?{params.urlencode()}"


def _page_url(query: str, number: int) -> str:
    return f"?{query}&page={number}" if query else f"?page={number}"


def _paging(query: QueryDict, number: int, rows: int) -> Paging:
    pages = max(1, -(-rows // PAGE_ROWS))
    number = min(number, pages)
    encoded = query.urlencode()
    shown = sorted({1, pages, *range(max(1, number - 2), min(pages, number + 2) + 1)})
    links: list[PageLink | None] = []
    for previous, page in zip([0, *shown], shown, strict=False):
        if page - previous > 1:
            links.append(None)
        links.append(PageLink(page, _page_url(encoded, page), page == number))
    first = (number - 1) * PAGE_ROWS
    return Paging(number=number, pages=pages, rows=rows, first=first + 1 if rows else 0,
                  last=min(first + PAGE_ROWS, rows),
                  previous=_page_url(encoded, number - 1) if number > 1 else "",
                  next=_page_url(encoded, number + 1) if number < pages else "", links=links)


class _Section(Case):
    """A row's division section, by number. The rows are grouped by the division itself, not by this
    expression of it, so PostgreSQL groups a round's results in the order result_table_rows holds them (one
    sorted pass) rather than hashing each: 16 -> 12 ms for 20,000 results in a round."""

    def get_group_by_cols(self) -> list[Any]:
        return [expression for expression in self.flatten() if isinstance(expression, Col)]


def _row_order(view: TableView, sort_value: Any) -> list[Any]:
    """Division section first (each is ranked on its own), then the chosen key, then a stable tiebreak
    so that consecutive pages neither repeat nor skip a row."""
    order: list[Any] = ["section"]
    if sort_value is not None:
        key = F("row_sort")
        # Rows without a value (no official score on the sorted benchmark, no count) sink, either way.
        order.append(key.desc(nulls_last=True) if view.descending else key.asc(nulls_last=True))
    elif view.sort in ("submitter", "system"):
        key = F("row_submitter_key") if view.sort == "submitter" else F("row_name_key")
        order.append(OrderBy(key, descending=view.descending))
    order += ["row_submitter_key", "system_slug", "organization_id"]
    return order


def _sort_value(round_benchmarks: set[str], view: TableView) -> Any:
    if view.sort == "accelerators":
        return Max("accelerator_count")
    if view.sort == "hosts":
        return Max("host_count")
    if view.sort in round_benchmarks:
        # Only an official score ranks: a result that is not verified keeps its cell, without a value to
        # sort on (it sinks below the ranked ones), and shows its raw number as "not official".
        return Max(Case(When(benchmark_key=view.sort, verdict=Result.Verdict.VERIFIED, score__isnull=False,
                             then=F(METRICS[view.metric][1]))))
    return None


def _rows_signature(view: TableView) -> str:
    """What of the view decides which rows a page holds, in which order: all but the columns shown."""
    return repr(dataclasses.astuple(dataclasses.replace(view, columns=())))


CELL_COLUMNS = ("id", "division", "organization_id", "system_slug", "benchmark_key", "verdict", "no_score_reason",
                "score", "reproduction")
FACT_COLUMNS = ("submitter", "system_name", "system_id", "accelerator_model", "accelerator_count", "host_count",
                "category", "system_type")


def build_table(round_: Round, view: TableView, user: Visitor, query: QueryDict | None = None,
                offered: list[Benchmark] | None = None) -> Table:
    """One page of the table. `offered`: the round's benchmarks that have results this visitor may see
    (build_choices), reused as the columns when no filter narrows the rows."""
    query = view_query(query if query is not None else QueryDict())
    results = filtered_results(round_, view, user)
    round_benchmarks = list(round_.benchmarks.all()) if offered is None or view.narrows else offered
    if offered is not None and not view.narrows:
        all_benchmarks = offered
    else:
        used = set(results.order_by().values_list("benchmark_key", flat=True).distinct())
        all_benchmarks = [b for b in round_benchmarks if b.key in used]
    shown = [b for b in all_benchmarks if not view.columns or b.key in view.columns] or all_benchmarks

    keyed = results.order_by().values("division", "organization_id", "system_slug")
    sort_value = _sort_value({b.key for b in round_benchmarks}, view)
    # Only what orders the rows is computed over the round, from columns an index holds (result_table_rows:
    # PostgreSQL reads it alone); what a row shows is read for the page's rows only, below.
    ordering: dict[str, Any] = {
        "section": _Section(*(When(division=d, then=Value(i)) for i, (d, _) in enumerate(SECTIONS[:-1])),
                            default=Value(len(SECTIONS) - 1), output_field=IntegerField()),
        "row_submitter_key": Lower(Max("submitter")),
        # The number of rows (groups) rides along with the page: no second pass over the round.
        "row_total": Window(Count("*")),
    }
    if view.sort == "system":
        ordering["row_name_key"] = Lower(Coalesce(NullIf(Max("system_name"), Value("")), F("system_slug")))
    if sort_value is not None:
        ordering["row_sort"] = sort_value
    rows = keyed.annotate(**ordering).order_by(*_row_order(view, sort_value))

    def pick_page() -> tuple[list[dict[str, Any]], int, int]:
        number = view.page
        page = list(rows[(number - 1) * PAGE_ROWS:number * PAGE_ROWS])
        if page:
            total = page[0]["row_total"]
        else:  # an empty view, or a page past the end (an old link to a round that shrank): show the last one
            total = keyed.distinct().count()
            number = max(1, -(-total // PAGE_ROWS))
            if total and number != view.page:
                page = list(rows[(number - 1) * PAGE_ROWS:number * PAGE_ROWS])
        return page, total, number

    # Ordering the rows groups every result of the round the view keeps: the one part of the page whose
    # cost grows with the round (30 ms at 20,000 results in a round, bench/profile_api.py --path). Its
    # answer, a page of row keys and the number of rows, is kept like the filter choices: per data version
    # (in public_key), what the visitor may see beyond the public record, the view and the page. So only
    # the first request for a page after a change pays it; a signed-in visitor pays it no more than a
    # visitor whose page comes from the page cache.
    page, total, number = cached_public(
        "table-rows", (round_.pk, viewer_fingerprint(user), _rows_signature(view),
                       sorted(b.key for b in round_benchmarks)), pick_page, round_id=round_.pk,
        variants=TABLE_ROWS_VARIANTS)
    paging = _paging(query, number, total)

    result_url, system_url = template("leaderboard:result"), template("leaderboard:system")
    field_name = METRICS[view.metric][1]
    shown_keys = {b.key for b in shown}
    cells: dict[tuple[str, int, str], dict[str, Cell]] = {}
    facts: dict[tuple[str, int, str], dict[str, Any]] = {}
    if page:
        # Every result of the page's rows (a few hundred at most): the cells shown, and the row's facts
        # from its newest result (a row keeps its facts when the columns chooser hides its results).
        wanted = results.filter(organization_id__in={r["organization_id"] for r in page},
                                system_slug__in={r["system_slug"] for r in page})
        columns = [*CELL_COLUMNS, *FACT_COLUMNS, *([field_name] if field_name not in CELL_COLUMNS else [])]
        for c in wanted.order_by("id").values(*columns):
            key = (c["division"], c["organization_id"], c["system_slug"])
            facts[key] = c
            if c["benchmark_key"] not in shown_keys:
                continue
            official = c["verdict"] == Result.Verdict.VERIFIED and c["score"] is not None  # current: not withdrawn
            cells.setdefault(key, {})[c["benchmark_key"]] = Cell(
                pk=c["id"], url=result_url.format(c["id"]), verdict=c["verdict"],
                no_score_reason=c["no_score_reason"], score=c["score"],
                value=c[field_name] if official else None, is_official=official, reproduction=c["reproduction"])

    sections: list[Section] = []
    benchmark_names = {b.key: b.name for b in shown}
    for r in page:
        division, label = SECTIONS[r["section"]]
        if not sections or sections[-1].division != division:
            sections.append(Section(division=division, label=label, rows=[]))
        key = (r["division"], r["organization_id"], r["system_slug"])
        mine, fact = cells.get(key, {}), facts.get(key, {})
        sections[-1].rows.append(Row(
            slug=r["system_slug"], submitter=fact.get("submitter", ""),
            name=fact.get("system_name") or r["system_slug"], url=system_url.format(fact.get("system_id")),
            accelerator_model=fact.get("accelerator_model", ""), accelerators=fact.get("accelerator_count"),
            hosts=fact.get("host_count"), category=CATEGORIES.get(fact.get("category", ""), ""),
            system_type=SYSTEM_TYPES.get(fact.get("system_type", ""), ""),
            cells=[(b.key, mine.get(b.key)) for b in shown], benchmark_names=benchmark_names))
    return Table(
        round=round_, view=view, benchmarks=shown, all_benchmarks=all_benchmarks,
        columns=[Column(b, _sort_link(query, view, b.key), view.sort == b.key) for b in shown],
        sort_links={key: _sort_link(query, view, key) for key in ROW_SORTS},
        sections=sections, paging=paging)


@dataclass
class Choices:
    submitters: list[tuple[str, str]]
    accelerators: list[str]
    benchmarks: list[Benchmark]


def build_choices(round_: Round, user: Visitor) -> Choices:
    """What the filter form offers: only values present among the results this visitor may see. Kept in
    the cache per round, data version (leaderboard.cache.freshness) and what the visitor may see beyond
    the public record (ingest.visibility.viewer_fingerprint): paging or sorting a round reads it once."""
    key = f"podium:table-choices:{release()}:{round_.pk}:{freshness(round_.pk)}:{viewer_fingerprint(user)}"
    choices = cache.get(key)
    if choices is None:
        choices = _choices(round_, user)
        cache.set(key, choices, 3600)
    return choices


def _choices(round_: Round, user: Visitor) -> Choices:
    """One pass over the round's visible results (distinct combinations, not rows)."""
    base = visible_round_results(user, round_).current()
    combos = set(base.order_by().values_list("organization_id", "accelerator_model", "benchmark_key").distinct())
    names = Organization.objects.filter(pk__in={o for o, _, _ in combos}).values_list("slug", "name")
    submitters = sorted(names, key=lambda p: p[1].lower())
    accelerators = sorted({a for _, a, _ in combos if a})
    keys = {k for _, _, k in combos}
    return Choices(submitters=submitters, accelerators=accelerators,
                   benchmarks=[b for b in round_.benchmarks.all() if b.key in keys])
