"""Every page type in a real browser, at 1400 px and at a phone's 390 px: axe-core finds no serious or
critical violation, nothing but an explicit scroll container is wider than the phone, the console stays
free of errors, and a screenshot of each is kept (tests/browser/axe.py says where).

The pages are visited once (the `survey` fixture) and each test asserts one of those properties, so a
failure names every page and rule at once. Pages come from PAGES: a new page type is one line there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from catalog.models import Round
from ingest.models import Result
from runners.models import ReproductionJob
from tests.browser.axe import Violation, artifacts_dir, axe_violations, sideways_overflow
from tests.browser.site_world import demo_item, upload_verified
from tests.people import PASSWORD, make_people, open_round, set_phase

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE, PHONE = (1400, 900), (390, 844)
# Pages also checked with the system's dark colour scheme (prefers-color-scheme: dark): contrast differs.
DARK = ("home", "round", "result", "log", "job", "system", "benchmark", "compare", "charts", "login")


@dataclass(frozen=True)
class PageType:
    name: str
    path: Callable[[dict[str, Any]], str]
    user: str = ""  # "" for an anonymous visitor


# Each page type once; `ids` is built by the `site` fixture below.
PAGES = [
    PageType("home", lambda ids: "/"),
    PageType("round", lambda ids: f"/rounds/{ids['round']}/"),
    PageType("result", lambda ids: f"/results/{ids['result']}/"),
    PageType("log", lambda ids: f"/results/{ids['result']}/runs/0/"),
    PageType("job", lambda ids: f"/reproductions/{ids['job']}/"),
    PageType("system", lambda ids: f"/systems/{ids['system']}/"),
    PageType("benchmark", lambda ids: f"/benchmarks/{ids['benchmark']}/"),
    PageType("compare", lambda ids: f"/compare/?ids={ids['result']},{ids['other']}"),
    PageType("compare-one", lambda ids: f"/compare/?ids={ids['result']}"),
    PageType("charts", lambda ids: f"/rounds/{ids['round']}/charts/"),
    PageType("organizations", lambda ids: "/organizations/"),
    PageType("organization", lambda ids: f"/organizations/{ids['organization']}/"),
    PageType("benchmarks", lambda ids: "/benchmarks/"),
    PageType("guides", lambda ids: "/guides/"),
    PageType("guide", lambda ids: "/guides/submitting/"),
    PageType("search", lambda ids: "/search/?q=Larkspur"),
    PageType("login", lambda ids: "/accounts/login/"),
    PageType("password-reset", lambda ids: "/accounts/password_reset/"),
    PageType("upload", lambda ids: "/submit/", "alice"),
    PageType("submissions", lambda ids: "/submissions/", "alice"),
    PageType("submission", lambda ids: f"/submissions/{ids['submission']}/", "alice"),
    PageType("tokens", lambda ids: "/accounts/tokens/", "alice"),
    PageType("members", lambda ids: f"/accounts/organizations/{ids['organization']}/members/", "alice"),
    PageType("notifications", lambda ids: "/notifications/", "alice"),
    PageType("review-dashboard", lambda ids: f"/rounds/{ids['round']}/review/", "chair"),
    PageType("operators", lambda ids: "/operators/runners/", "staff"),
]


@dataclass
class Visit:
    page: str
    width: int
    status: int = 0
    violations: list[Violation] = field(default_factory=list)
    overflow: dict[str, Any] | None = None
    console: list[str] = field(default_factory=list)
    screenshot: Path | None = None
    broken_charts: int = 0



@pytest.fixture
def site(demo_tree, tmp_path) -> dict[str, Any]:
    """Two verified bert results from real demo logs in a published round; alice, chair and staff can sign in."""
    people = make_people()
    round_ = open_round()
    round_.chairs.add(people.chair)
    root, manifest = demo_tree
    demo = root / manifest.round("demo-2024a").folder
    acme = demo_item(demo, "Larkspur_Compute", "atlas_lx4_n1", "bert", tmp_path)
    submission = upload_verified(people.alice, acme, round_)
    upload_verified(people.carol, demo_item(demo, "Tessellate_Cloud", "tc2-accel-8x32", "bert", tmp_path), round_)
    set_phase(round_, Round.Phase.PUBLISHED)
    acme = Result.objects.current().get(organization=people.acme)
    zeta = Result.objects.current().get(organization=people.zeta)
    # A queued reproduction (written directly: queueing one needs a runnable implementation), with a
    # config as the job page prints it.
    job = ReproductionJob.objects.create(result=acme, kind=ReproductionJob.Kind.TIMING, created_by=people.staff,
                                         accelerator_model="H100-SXM5-80GB", accelerator_count=8,
                                         config={"global_batch_size": 256, "opt_base_learning_rate": 0.0004,
                                                 "seed": 1234})
    return {"round": round_.slug, "result": acme.pk, "other": zeta.pk, "system": acme.system_id,
            "benchmark": acme.benchmark_key, "submission": submission.pk, "job": job.pk,
            "organization": acme.organization.slug}


def _sign_in(context: Any, base: str, username: str) -> None:
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}/")
    page.close()


def _settle(page: Any) -> None:
    """Wait for what the page draws after load: charts end in data-state ready or error."""
    page.wait_for_load_state("networkidle")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-chart]')).every(c => c.dataset.state === 'ready' "
        "|| c.dataset.state === 'error')", timeout=15_000)


def _visit(context: Any, base: str, page_type: PageType, ids: dict[str, Any], size: tuple[int, int],
           scheme: str = "light") -> Visit:
    visit = Visit(page_type.name + ("-dark" if scheme == "dark" else ""), size[0])
    page = context.new_page()
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.on("console", lambda m: visit.console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: visit.console.append(f"uncaught: {e}"))
    response = page.goto(base + page_type.path(ids))
    visit.status = response.status if response else 0
    _settle(page)
    visit.broken_charts = page.locator("[data-chart][data-state=error]").count()
    visit.violations = axe_violations(page)
    if size == PHONE:
        visit.overflow = sideways_overflow(page)
    visit.screenshot = artifacts_dir() / f"{visit.page}-{size[0]}.png"
    page.screenshot(path=str(visit.screenshot), full_page=True)
    page.close()
    return visit


_SURVEY: dict[str, list[Visit]] = {}


@pytest.fixture
def survey(request, browser) -> list[Visit]:
    """Every page type at both widths, visited once per test session (the data are built the first time)."""
    if "visits" not in _SURVEY:
        live_server = request.getfixturevalue("live_server")
        ids = request.getfixturevalue("site")
        visits = []
        contexts: dict[str, Any] = {}
        try:
            for page_type in PAGES:
                if page_type.user not in contexts:
                    contexts[page_type.user] = browser.new_context(viewport={"width": WIDE[0], "height": WIDE[1]})
                    if page_type.user:
                        _sign_in(contexts[page_type.user], live_server.url, page_type.user)
                for size in (WIDE, PHONE):
                    visits.append(_visit(contexts[page_type.user], live_server.url, page_type, ids, size))
            contexts["dark"] = browser.new_context(color_scheme="dark")
            for page_type in PAGES:
                if page_type.name in DARK:
                    visits.append(_visit(contexts["dark"], live_server.url, page_type, ids, WIDE, "dark"))
        finally:
            for context in contexts.values():
                context.close()
        _SURVEY["visits"] = visits
    return _SURVEY["visits"]


def _report(lines: list[str]) -> str:
    return "\n".join(lines)


def test_every_page_type_loads(survey) -> None:
    failed = [f"{v.page} at {v.width} px: HTTP {v.status}" for v in survey if v.status != 200]
    failed += [f"{v.page} at {v.width} px: {v.broken_charts} chart(s) could not be drawn"
               for v in survey if v.broken_charts]
    assert not failed, _report(failed)


def test_no_serious_or_critical_axe_violation_on_any_page(survey) -> None:
    found = [f"{v.page} at {v.width} px: {violation}" for v in survey for violation in v.violations]
    assert not found, _report(found)


def test_no_page_scrolls_sideways_on_a_phone(survey) -> None:
    wide = [f"{v.page}: {v.overflow['scrollWidth']} px wide in a {v.overflow['clientWidth']} px viewport; "
            f"{', '.join(v.overflow['culprits'])}" for v in survey if v.overflow]
    assert not wide, _report(wide)


def test_no_console_error_on_any_page(survey) -> None:
    errors = [f"{v.page} at {v.width} px: {line}" for v in survey for line in v.console]
    assert not errors, _report(errors)


def test_axe_is_really_injected_and_reports_a_known_violation(page) -> None:
    # Guards the checks above against passing because axe-core never ran.
    page.set_content('<html lang="en"><head><title>t</title></head><body><main><input type="text">'
                     '<button></button></main></body></html>')
    rules = {v.rule for v in axe_violations(page)}
    assert {"label", "button-name"} <= rules


def test_a_screenshot_of_every_page_type_at_both_widths(survey) -> None:
    shots = {v.screenshot.name for v in survey if v.screenshot and v.screenshot.stat().st_size > 1000}
    expected = {f"{p.name}-{w}.png" for p in PAGES for w in (WIDE[0], PHONE[0])}
    expected |= {f"{name}-dark-{WIDE[0]}.png" for name in DARK}
    assert shots == expected
    assert all(re.fullmatch(r"[a-z-]+-\d+\.png", name) for name in shots)
