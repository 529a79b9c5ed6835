from __future__ import annotations

import shutil

import pytest

from tests.people import PASSWORD, make_people, open_round, tar_gz_of

pytestmark = [pytest.mark.browser, pytest.mark.real_worker, pytest.mark.django_db(transaction=True)]


def test_log_in_upload_and_watch_the_verdict_arrive(live_server, page, start_worker, demo_tree, tmp_path) -> None:
    make_people()
    open_round()
    root, manifest = demo_tree
    source = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    folder = tmp_path / "Larkspur_Compute"
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(source / "systems/atlas_lx4_n8.json", folder / "systems/atlas_lx4_n8.json")
    shutil.copytree(source / "results/atlas_lx4_n8/resnet", folder / "results/atlas_lx4_n8/resnet")  # one run aborts
    bundle = tmp_path / "larkspur.tar.gz"
    bundle.write_bytes(tar_gz_of(folder))
    start_worker()

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")

    page.goto(f"{live_server.url}/submit/")
    page.set_input_files("#bundle", str(bundle))
    assert "larkspur.tar.gz" in page.inner_text("#chosen")
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/submissions/*/")
    page.evaluate("window.__notReloaded = true")
    first_state = page.get_attribute("#state", "data-state")
    # Generous: verification is CPU work, and only a verdict that never comes may fail the test.
    page.wait_for_selector("#state[data-state=verified]", timeout=600_000)
    assert page.evaluate("window.__notReloaded === true"), "the page reloaded instead of updating itself"
    assert first_state in {"received", "verifying", "verified"}

    # A group holding an error is open from the start: nothing important is collapsed.
    group = page.locator("details.file-findings", has=page.locator("summary", has_text="result_3.txt"))
    assert group.get_attribute("open") is not None
    row = page.locator("tr.finding-row", has_text="quality target not reached").first
    assert row.is_visible()
    assert "eval_accuracy" in row.inner_text()
