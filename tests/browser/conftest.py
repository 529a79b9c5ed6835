from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import skip_or_fail

# Playwright's sync API runs an event loop in this thread; Django's async-safety guard must allow
# the ORM calls the tests make around it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    executable = os.environ.get("PODIUM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(executable):
        skip_or_fail(f"no Chromium at {executable}: apt-get install chromium (or set PODIUM_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.fixture
def sign_in(browser, live_server) -> Iterator[Callable[[str], object]]:
    """A page in a browser context of its own, signed in as `username` (password tests.people.PASSWORD)
    and back on the home page."""
    from tests.people import PASSWORD

    contexts = []

    def sign_in(username: str) -> object:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("form.stacked button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    yield sign_in
    for context in contexts:
        context.close()
