"""The pages a person finds their way by: the home page (the newest round's highlights, the benchmarks), a
page per benchmark and per organization, search, and the guides. Every read goes through the one
visibility rule (ingest.visibility, via leaderboard.selectors)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_safe

from accounts.models import Organization
from accounts.viewer import Visitor
from core.errors import NotFound
from core.views import shows_refusals
from ingest.models import Finding, Result, Run
from leaderboard import guides, logs, selectors
from leaderboard.cache import cached_for, kept_by_round, seen_by
from runners.selectors import result_badges


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    user = request.user

    def content() -> str:
        newest = selectors.newest_published_round(user)
        return render_to_string("leaderboard/_home.html", {
            "newest": newest,
            "highlights": selectors.round_highlights(user, newest) if newest else [],
            "benchmarks": selectors.benchmarks_overview(user),
            "rounds": selectors.rounds_overview(user),
        })

    # The most visited page, the same for every visitor granted as much: kept rendered (eight queries and
    # three tables were ~15 ms of every visit). The rounds the visitor may open are in the key: a member's
    # follow their organization's submissions, which move no generation (an anonymous visitor's follow the
    # clock, which the key holds already).
    opened = selectors.openable_round_ids(user) if user.is_authenticated else None
    kept = cached_for(user, "home-content", (opened,), content)
    # Rendered by a template, which escaped what it holds.
    return render(request, "leaderboard/home.html", {"content": mark_safe(kept)})


@require_safe
def benchmark_list(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/benchmarks.html", {"benchmarks": selectors.benchmarks_overview(request.user)})


def round_sections(user: Visitor, name: str, parts: tuple[Any, ...],
                   groups_of: Callable[[list[int]], list[selectors.RoundResults]],
                   render_group: Callable[[selectors.RoundResults], str]) -> list[SafeString]:
    """A page's part about each round (`render_group` of each of `groups_of(round ids)`), newest round first,
    each kept (kept_by_round) under `name`, `parts`, what the visitor may see and the addresses' prefix: after
    an upload only its round's part is read and rendered again. A benchmark's or an organization's page
    rendered 400-500 rows in Django's templates on every request, signed in or not (~30-40 ms of CPU at 20,000
    results); the page around the parts is small."""

    def compute(stale: list[int]) -> dict[int, str]:
        # "" for a round with nothing for this visitor: kept too, so that the next request asks again only
        # for rounds changed since.
        html = dict.fromkeys(stale, "")
        html.update((group.round.pk, render_group(group)) for group in groups_of(stale))
        return html

    kept = kept_by_round(name, (*seen_by(user), *parts), compute)
    # Each part was rendered by a template, which escaped what it holds.
    return [mark_safe(kept[pk]) for pk in selectors.newest_first(pk for pk, html in kept.items() if html)]


@require_safe
@shows_refusals
def benchmark_detail(request: HttpRequest, key: str) -> HttpResponse:
    user = request.user
    definitions = selectors.benchmark_definitions(user, key)
    definition = definitions[0] if definitions else None
    # A key that nothing names is answered without numbering every round or keeping an empty part for each,
    # whatever a visitor types.
    if definition is None and not selectors.benchmark_known(key):
        raise NotFound(f"No benchmark {key!r} in a round you may see.")
    # The rounds the visitor may open that define the benchmark are in the key: they follow the visitor's
    # organization's submissions too (ingest.visibility.visible_rounds), which no result moves.
    sections = round_sections(
        user, "benchmark-section", (key, definition.target_text if definition else None,
                                    [b.round_id for b in definitions], selectors.BENCHMARK_ROUND_ROWS),
        lambda ids: selectors.benchmark_rounds(user, key, definitions, ids),
        lambda group: render_to_string("leaderboard/_benchmark_round.html",
                                       {"group": group, "definition": definition, "key": key}))
    if not sections:
        raise NotFound(f"No benchmark {key!r} in a round you may see.")
    return render(request, "leaderboard/benchmark.html", {"key": key, "definition": definition, "sections": sections})


@require_safe
def organization_list(request: HttpRequest) -> HttpResponse:
    # From the counts kept round by round (the organizations of the visible current results), not a pass
    # over every result.
    organizations = Organization.objects.filter(pk__in=selectors.result_counts(request.user).organizations
                                                ).order_by("name")
    return render(request, "leaderboard/organizations.html", {"organizations": organizations})


@require_safe
@shows_refusals
def organization_detail(request: HttpRequest, slug: str) -> HttpResponse:
    user = request.user
    organization = Organization.objects.filter(slug=slug).first()
    if organization is None:
        raise NotFound("No organization of that name with results you may see.")
    sections = round_sections(
        user, "organization-section", (organization.pk, organization.slug, selectors.ORGANIZATION_ROUND_ROWS),
        lambda ids: selectors.organization_results(user, organization, ids),
        lambda group: render_to_string("leaderboard/_organization_round.html",
                                       {"group": group, "organization": organization}))

    def systems_part() -> tuple[str, bool]:
        systems, count = selectors.organization_systems(user, organization)
        return render_to_string("leaderboard/_organization_systems.html",
                                {"systems": systems, "system_count": count}), bool(systems)

    # Kept as the parts are, but about every round (the newest of each system): any change renews it. It was
    # half of the page once the parts were kept (two queries, a numbering of every system of the
    # organization, and 50 rows rendered).
    systems, any_system = cached_for(user, "organization-systems", (organization.pk, organization.slug), systems_part)
    # An organization whose every result is embargoed from this visitor is not there for them.
    if not (sections or any_system):
        raise NotFound("No organization of that name with results you may see.")
    # Rendered by a template, which escaped what it holds.
    return render(request, "leaderboard/organization.html", {
        "organization": organization, "sections": sections, "systems": mark_safe(systems),
    })


@require_safe
def search(request: HttpRequest) -> HttpResponse:
    hits = selectors.search(request.user, request.GET.get("q", ""))
    return render(request, "leaderboard/search.html", {"hits": hits, "min_length": 2})


@require_safe
def guide_list(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/guides.html", {"guides": list(guides.GUIDES.values())})


@require_safe
@shows_refusals
def guide(request: HttpRequest, name: str) -> HttpResponse:
    found = guides.load(name)
    if found is None or not found.path.is_file():
        raise NotFound("No guide of that name.")
    title, html = guides.render(found.path.read_text(encoding="utf-8"))
    # guides.render escapes every piece of source text itself and allows only safe link targets.
    return render(request, "leaderboard/guide.html", {
        "guide": found, "title": title or found.title, "body": mark_safe(html),
        "guides": list(guides.GUIDES.values()),
    })


# --- the result page's findings summary and links (leaderboard.views.result_detail adds these) ----------

SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}


@dataclass
class FindingGroup:
    """The findings about one file, errors first; open when it holds an error or a warning."""

    file: str
    findings: list[Finding]
    counts: dict[str, int]
    run: Run | None

    @property
    def open(self) -> bool:
        return bool(self.counts["error"] or self.counts["warning"])


def severity_counts(findings: list[Finding]) -> dict[str, int]:
    counts = {"error": 0, "warning": 0, "info": 0}
    for finding in findings:
        counts[finding.severity] = counts.get(finding.severity, 0) + 1
    return counts


def finding_groups(findings: list[Finding], runs: list[Run]) -> list[FindingGroup]:
    """Findings by file, errors first within each group and groups with errors first; a group holding an
    error or a warning is open, one holding only notes is folded."""
    by_file: dict[str, list[Finding]] = {}
    for finding in findings:
        by_file.setdefault(finding.file or "(the whole result)", []).append(finding)
    groups = []
    for file, items in by_file.items():
        items.sort(key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), f.line or 0, f.pk or 0))
        counts = severity_counts(items)
        run = next((r for r in runs if items[0].run_id == r.pk), None) or logs.run_for_file(runs, file)
        groups.append(FindingGroup(file=file, findings=items, counts=counts, run=run))
    groups.sort(key=lambda g: (-g.counts["error"], -g.counts["warning"], g.file))
    return groups


def why_line(result: Result, runs: list[Run], findings: list[Finding]) -> str:
    """One sentence: why there is no official score (or how the score was made) and which runs were dropped."""
    dropped = []
    for run in runs:
        if run.dropped == Run.Dropped.FAILED:
            error = next((f for f in findings if f.run_id == run.pk and f.severity == Finding.Severity.ERROR), None)
            reason = f"not a successful compliant run{': ' + error.message[:120] if error else ''}"
            dropped.append(f"run {run.position + 1} ({reason})")
        elif run.dropped:
            dropped.append(f"run {run.position + 1} ({run.dropped})")
    runs_part = f"Dropped: {'; '.join(dropped)}." if dropped else "No run was dropped."
    if result.is_official:
        counted = len(runs) - len(dropped)
        return f"Official score from {counted} counted run{'s' if counted != 1 else ''}. {runs_part}"
    if result.withdrawn_at:
        reason = "the round's chairs withdrew the result"
    elif result.verdict != Result.Verdict.VERIFIED:
        errors = severity_counts(findings)["error"]
        reason = (result.no_score_reason or f"the result is {result.get_verdict_display().lower()}") + (
            f" ({errors} error{'s' if errors != 1 else ''} below)" if errors else "")
    else:
        reason = result.no_score_reason or "no score was computed"
    return f"No official score: {reason}. {runs_part}"


def result_extras(user: Visitor, result: Result, runs: list[Run]) -> dict[str, Any]:
    """What the result page shows beyond the view's own context: findings first, the why line, badges."""
    findings = list(result.findings.all())
    return {
        "finding_counts": severity_counts(findings),
        "finding_groups": finding_groups(findings, runs),
        "why": why_line(result, runs, findings),
        "badges": result_badges(result),
    }
