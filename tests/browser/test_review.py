"""The review in a real browser: a reviewer flags, the flagged organization answers, a chair decides, the
public sees the outcome once the round is published; and a borrowing the rules refuse leaves the entry as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounts.models import Membership
from accounts.services import membership_add
from catalog.models import Round
from ingest.models import Result
from reviews.models import Borrowing
from tests.browser.site_world import demo_item, upload_verified
from tests.people import make_people, open_round, set_phase, tar_gz_of

# No `real_worker`: with no broker the verification runs in-process, after the upload's commit.
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RULE = "compliance/eval_accuracy"
DESCRIPTION = "The quality target is reached only once, at the very end of every run."
ANSWER = "We evaluate every epoch as the rules ask; see the eval_accuracy lines of result_0.txt."
NOTE = "The evaluation schedule follows the reference; no issue."




@pytest.fixture
def in_review(demo_tree, tmp_path) -> tuple[object, Round, Result, Result, Path]:
    """Acme (alice) and Zeta (carol, also its reviewer) submitted bert to a round now in review; chair chairs."""
    people = make_people()
    membership_add(user=people.carol, organization=people.zeta, role=Membership.Role.REVIEWER)
    round_ = open_round()
    round_.chairs.add(people.chair)
    root, manifest = demo_tree
    demo = root / manifest.round("demo-2024a").folder
    acme_folder = demo_item(demo, "Larkspur_Compute", "atlas_lx4_n1", "bert", tmp_path)
    upload_verified(people.alice, acme_folder, round_)
    upload_verified(people.carol, demo_item(demo, "Tessellate_Cloud", "tc2-accel-8x32", "bert", tmp_path), round_)
    set_phase(round_, Round.Phase.REVIEW)
    acme = Result.objects.current().get(organization=people.acme)
    zeta = Result.objects.current().get(organization=people.zeta)
    return people, round_, acme, zeta, acme_folder


def test_flag_answer_decide_and_the_public_outcome(live_server, sign_in, page, in_review) -> None:
    _people, round_, acme, _zeta, _folder = in_review

    # carol, a reviewer for Zeta, flags Acme's result from its page.
    carol = sign_in("carol")
    carol.goto(f"{live_server.url}/results/{acme.pk}/")
    raise_flag = carol.locator("details.raise-flag")
    if not raise_flag.evaluate("details => details.open"):
        raise_flag.locator("summary", has_text="Raise a flag").click()
    carol.fill("#flag-form input[name=rule]", RULE)
    carol.fill("#flag-form textarea[name=description]", DESCRIPTION)
    carol.click("#flag-form button[type=submit]")
    carol.wait_for_url("**/flags/*/")
    flag_url = carol.url
    assert carol.get_attribute("#flag-state", "data-state") == "open"
    assert carol.inner_text("#flag-state") == "Open"
    assert DESCRIPTION in carol.inner_text(".flag-description")
    assert carol.locator("#decision-form").count() == 0  # not a chair

    # alice learns of it on her notifications page and answers.
    alice = sign_in("alice")
    alice.goto(f"{live_server.url}/notifications/")
    alice.click(f"ul.notifications a:has-text('was flagged: {RULE}')")
    alice.wait_for_url(flag_url)
    assert alice.get_attribute("#flag-state", "data-state") == "open"
    alice.fill("#comment-form textarea[name=body]", ANSWER)
    alice.click("#comment-form button[type=submit]")
    alice.wait_for_selector("#flag-state[data-state=answered]")
    assert alice.inner_text("#flag-state") == "Answered"
    assert ANSWER in alice.inner_text("ol.thread")

    # The chair finds it on the round's review dashboard and rejects it with a note.
    chair = sign_in("chair")
    chair.goto(f"{live_server.url}/rounds/{round_.slug}/review/")
    chair.locator("#unresolved tr", has_text=RULE).locator("a").click()
    chair.wait_for_url(flag_url)
    chair.select_option("#decision-form select[name=outcome]", label="Rejected: no issue")
    chair.fill("#decision-form textarea[name=note]", NOTE)
    chair.click("#decision-form button[type=submit]")
    chair.wait_for_selector("#flag-state[data-state=resolved]")
    assert chair.inner_text("#flag-state") == "Resolved: Rejected: no issue"
    assert NOTE in chair.inner_text("dl.facts")
    assert chair.locator("#decision-form, #comment-form").count() == 0  # the thread is closed

    # Once the round is published, anyone (`page`: nobody signed in) sees the outcome on the result page.
    set_phase(round_, Round.Phase.PUBLISHED)
    page.goto(f"{live_server.url}/results/{acme.pk}/")
    row = page.locator("#review tr.flag-row", has_text=RULE)
    assert row.is_visible()
    assert "Resolved" in row.inner_text() and "Rejected: no issue" in row.inner_text()
    assert "Tessellate Cloud" in row.inner_text()
    row.locator("a").click()
    page.wait_for_url(flag_url)
    assert page.get_attribute("#flag-state", "data-state") == "resolved"
    assert ANSWER in page.inner_text("ol.thread") and NOTE in page.inner_text("dl.facts")
    assert page.locator("#comment-form, #decision-form, #resubmit-form").count() == 0


def test_a_refused_borrowing_leaves_the_previous_version_current(live_server, sign_in, in_review, tmp_path) -> None:
    people, _round, acme, zeta, folder = in_review
    system = folder / "systems/atlas_lx4_n1.json"
    system.write_text(system.read_text().replace('"cooling": "', '"cooling": "water, '))  # not allowed
    bundle = tmp_path / "borrowed.tar.gz"
    bundle.write_bytes(tar_gz_of(folder))

    alice = sign_in("alice")
    alice.goto(f"{live_server.url}/results/{acme.pk}/")
    alice.click("text=Borrow hyperparameters for this entry")
    alice.locator("tr", has_text=zeta.system_name).locator("a", has_text="Compare").click()
    alice.wait_for_selector("#borrow-form")
    alice.set_input_files("#borrow-form input[name=bundle]", str(bundle))
    alice.click("#borrow-form button[type=submit]")
    alice.wait_for_url("**/submissions/*/")

    borrowing = Borrowing.objects.get()
    assert borrowing.submission is not None
    assert borrowing.state == Borrowing.State.REFUSED, borrowing.state
    assert Result.objects.current().get(organization=people.acme).pk == acme.pk
