"""Each persona's tour from the home page in a real browser, by clicks (the login page is the only address
typed): a visitor reaches a benchmark, an organization, a result and the log line a finding cites; a submitter
uploads and reads the verdict; a reviewer flags a line from the log viewer; the chair decides the flag; an
operator finds the runners. A screenshot of each step is saved as tour-<persona>-<n>-<step>.png under
site_world.artifacts_dir("tours")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.site_world import CITED_LINE, artifacts_dir, build_site, demo_item, review_world, zip_of
from tests.people import make_people, open_round

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RULE = "compliance/eval_accuracy"
DESCRIPTION = "The evaluation at this line reports an accuracy the run could not have reached by then."
NOTE = "The accuracy follows from the reference's schedule; no issue."


class Tour:
    """One persona's walk: numbered screenshots, and every console error the pages raised."""

    def __init__(self, page: object, persona: str) -> None:
        self.page, self.persona, self.step = page, persona, 0
        self.shots = artifacts_dir("tours")
        for old in self.shots.glob(f"tour-{persona}-*.png"):
            old.unlink()  # a step renamed or removed must not leave a stale picture behind
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda error: self.errors.append(f"{page.url}: {error}"))

    def snap(self, name: str, *, full_page: bool = True) -> Path:
        self.step += 1
        path = self.shots / f"tour-{self.persona}-{self.step}-{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path



def _nav(page: object, label: str) -> None:
    """Follow a link of the signed-in header (what this persona can do)."""
    page.locator("nav.user").get_by_role("link", name=label, exact=True).click()


def test_a_visitor_reaches_a_benchmark_an_organization_a_result_and_a_cited_log_line(live_server, page) -> None:
    site = build_site()
    tour = Tour(page, "visitor")

    page.goto(f"{live_server.url}/")
    page.wait_for_selector("#highlights")
    assert "Tour v2: fastest results" in page.inner_text("h1")
    tour.snap("home")

    page.click("#highlights a[href='/benchmarks/resnet/']")
    page.wait_for_url("**/benchmarks/resnet/")
    page.wait_for_selector("#quality-target")
    page.wait_for_selector("[data-chart=history][data-state=ready], [data-chart=history][data-state=error]")
    assert page.get_attribute("[data-chart=history]", "data-state") == "ready"
    tour.snap("benchmark")

    page.click("#round-tour-v2 a[href='/organizations/acme-tour/']")
    page.wait_for_url("**/organizations/acme-tour/")
    assert "Tour v1" in page.inner_text("main") and "Tour v2" in page.inner_text("main")
    tour.snap("organization")

    page.click(f"a[href='{site.result.get_absolute_url()}']")
    page.wait_for_url(f"**{site.result.get_absolute_url()}")
    page.wait_for_selector("#findings")
    assert "No run was dropped" in page.inner_text("#why") or "Official score" in page.inner_text("#why")
    tour.snap("result")

    page.click(f"#findings a.log-line:has-text('line {CITED_LINE}')")
    page.wait_for_url(f"**#L{CITED_LINE}")
    target = page.locator(f"#L{CITED_LINE}")
    assert target.is_visible()
    assert page.evaluate("document.querySelector(':target') && document.querySelector(':target').id") == \
        f"L{CITED_LINE}"
    assert "the evaluation is logged only once" in target.inner_text()  # the finding sits on its line
    assert "<script>" in page.inner_text("#log")  # the hostile line is shown as text, not run
    assert page.locator("#flag-line-form").count() == 0  # a visitor flags nothing
    tour.snap("log-line", full_page=False)

    # A fold opens on click and shows its lines.
    fold = page.locator("details.fold").first
    fold.locator("summary").click()
    assert fold.get_attribute("open") is not None
    assert not tour.errors, tour.errors


def test_a_submitter_uploads_and_reads_the_verdict(live_server, sign_in, demo_tree, tmp_path) -> None:
    make_people()
    round_ = open_round()
    root, manifest = demo_tree
    # One resnet item whose run 3 never reaches the quality target: a verified result with a finding to read.
    folder = demo_item(root / manifest.round("demo-2024a").folder, "Larkspur_Compute", "atlas_lx4_n8", "resnet",
                       tmp_path)
    bundle = tmp_path / "larkspur.zip"
    bundle.write_bytes(zip_of(folder))

    page = sign_in("alice")
    tour = Tour(page, "submitter")
    assert page.locator("#unread-count").count() == 0
    tour.snap("home")

    _nav(page, "Submit")
    page.wait_for_url("**/submit/")
    assert round_.slug in page.inner_text("#upload-form select[name=round]")
    page.set_input_files("#bundle", str(bundle))
    assert "larkspur.zip" in page.inner_text("#chosen")
    tour.snap("upload")

    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")
    # Tasks run in-process in the tests, so the verdict is in by the time the page is; the page would poll.
    page.wait_for_selector("#state[data-state=verified]")
    results = page.locator("#status table.data").first
    assert "ResNet" in results.inner_text() or "resnet" in results.inner_text()
    score = results.locator("td.num").first.inner_text()
    assert re.fullmatch(r"\d+(\.\d+)?", score.strip()), score  # an official score, in minutes
    group = page.locator("details.file-findings", has_text="result_3.txt")
    if group.get_attribute("open") is None:
        group.locator("summary").click()
    finding = group.locator("tr.finding-row", has_text="quality target not reached").first
    assert finding.is_visible()
    tour.snap("verdict")

    # The finding's line opens the log there.
    cited = finding.locator("a.log-line")
    number = cited.inner_text().strip()
    cited.click()
    page.wait_for_url(f"**#L{number}")
    assert "eval_accuracy" in page.inner_text(f"#L{number}")
    assert "quality target not reached" in page.inner_text(f"#L{number}")
    tour.snap("finding-line", full_page=False)

    # The verdict is on the Notifications page too, counted in the header until it is read.
    assert page.inner_text("#unread-count") == "1"
    page.click("#notifications-link")
    page.wait_for_url("**/notifications/")
    item = page.locator("ul.notifications li.unread").first
    assert re.search(rf"Submission #\d+ \(.*\) to {re.escape(round_.name)} is verified", item.inner_text())
    assert page.locator("#unread-count").count() == 0
    tour.snap("notified")

    # From the notification back to the submission, then to the result and its score.
    item.locator("a").click()
    page.wait_for_url("**/submissions/*/")
    page.locator("#status table.data a").first.click()
    page.wait_for_url("**/results/*/")
    assert page.locator("#findings a.log-line").count() > 0  # each finding with a line opens the log there
    tour.snap("result")
    assert not tour.errors, tour.errors


def test_a_reviewer_flags_a_line_and_the_chair_decides(live_server, sign_in, demo_tree, tmp_path) -> None:
    root, manifest = demo_tree
    world = review_world(root / manifest.round("demo-2024a").folder, tmp_path)
    flagged = world.flagged

    # carol reviews for Zeta: the round, Acme's result, one of its run logs, a line of it.
    carol = sign_in("carol")
    reviewer = Tour(carol, "reviewer")
    carol.locator("#rounds").get_by_role("link", name=world.round.name).click()
    carol.wait_for_url(f"**/rounds/{world.round.slug}/**")
    reviewer.snap("round")

    carol.locator(f"main a[href='{flagged.get_absolute_url()}']").first.click()
    carol.wait_for_url(f"**{flagged.get_absolute_url()}")
    reviewer.snap("result")

    run = flagged.runs.order_by("position").first()
    carol.locator("table.runs a.run-log").first.click()
    carol.wait_for_url(f"**/results/{flagged.pk}/runs/{run.position}/")
    line = carol.locator(".ln.mllog", has_text="eval_accuracy").first
    number = int(line.get_attribute("id")[1:])
    line.locator("a.no").click()
    carol.wait_for_url(f"**#L{number}")
    # Clicking the number cites the line (logview.js, on the hashchange the click fires, which may come a
    # moment after the address changes: wait for it).
    carol.wait_for_function("n => document.getElementById('flag-line-number').value === n", arg=str(number))
    carol.fill("#flag-line-form input[name=rule]", RULE)
    carol.fill("#flag-line-form textarea[name=description]", DESCRIPTION)
    reviewer.snap("flag-a-line", full_page=False)

    carol.click("#flag-line-form button[type=submit]")
    carol.wait_for_url("**/flags/*/")
    flag_url = carol.url
    assert carol.get_attribute("#flag-state", "data-state") == "open"
    where = carol.inner_text("#flag-where")
    assert f"{run.file}:{number}" in where
    assert "eval_accuracy" in carol.inner_text("#flag-where pre.excerpt")  # the cited line itself
    reviewer.snap("flag")
    assert not reviewer.errors, reviewer.errors

    # The chair finds it on the review dashboard, opens the cited line, and decides.
    chair = sign_in("chair")
    deciding = Tour(chair, "chair")
    _nav(chair, f"Review {world.round.name}")
    chair.wait_for_url(f"**/rounds/{world.round.slug}/review/")
    row = chair.locator("#unresolved tr", has_text=RULE)
    assert row.is_visible()
    deciding.snap("dashboard")

    row.locator("a").click()
    chair.wait_for_url(flag_url)
    chair.click("#flag-where a.log-line")
    chair.wait_for_url(f"**#L{number}")
    assert chair.evaluate("document.querySelector(':target').id") == f"L{number}"
    deciding.snap("cited-line", full_page=False)

    chair.go_back()
    chair.wait_for_url(flag_url)
    chair.select_option("#decision-form select[name=outcome]", label="Rejected: no issue")
    chair.fill("#decision-form textarea[name=note]", NOTE)
    deciding.snap("decide")
    chair.click("#decision-form button[type=submit]")
    chair.wait_for_selector("#flag-state[data-state=resolved]")
    assert chair.inner_text("#flag-state") == "Resolved: Rejected: no issue"
    assert "by chair chair" in chair.inner_text("#flag-decided")  # the decision names who took it
    assert NOTE in chair.inner_text("#flag-decided")
    deciding.snap("decided")
    assert not deciding.errors, deciding.errors

    # Both organizations hear of it, with the chair's name.
    for username in ("alice", "carol"):
        told = sign_in(username)
        told.click("#notifications-link")
        told.wait_for_url("**/notifications/")
        assert told.locator("ul.notifications li", has_text="decided by chair chair").count() == 1, username


def test_an_operator_finds_the_runners_and_registers_one(live_server, sign_in) -> None:
    from runners.services import runner_create

    people = make_people()
    runner_create(name="gpu-host-1", actor=people.staff)

    page = sign_in("staff")
    tour = Tour(page, "operator")
    tour.snap("home")
    _nav(page, "Runners")
    page.wait_for_url("**/operators/runners/")
    assert page.locator("#runners tr[data-runner='gpu-host-1']").is_visible()
    tour.snap("runners")

    page.fill("input[name=name]", "tour-runner")
    page.click("button:has-text('Register a runner')")
    page.wait_for_selector("#new-runner-token")
    assert "tour-runner" in page.inner_text("#new-runner-token")
    assert page.locator("#runners tr[data-runner='tour-runner']").is_visible()
    tour.snap("registered")
    assert not tour.errors, tour.errors
