"""No page loads anything from another host: the API documentation (Swagger UI), the charts'
plotly.js and the site's own assets are all served by Podium (issue 14). A request to any other host
fails the test."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.people import make_people

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAGES = {
    "/api/docs/": "Podium API",  # Swagger UI renders the schema's title
    "/": "Podium",
    "/accounts/password_reset/": "",
    "/accounts/login/": "",
}


@pytest.mark.parametrize("path", list(PAGES))
def test_a_page_loads_nothing_from_another_host(path, live_server, page) -> None:
    make_people()
    home = urlsplit(live_server.url).netloc
    foreign: list[str] = []
    failed: list[str] = []

    def watch(route) -> None:
        host = urlsplit(route.request.url).netloc
        if route.request.url.startswith(("data:", "blob:")) or host == home:
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort()

    page.route("**/*", watch)
    page.on("requestfailed", lambda request: failed.append(f"{request.url} {request.failure}"))
    response = page.goto(live_server.url + path, wait_until="networkidle")
    assert response is not None and response.status < 400
    assert foreign == [], foreign
    assert failed == [], failed
    if PAGES[path]:
        page.get_by_text(PAGES[path]).first.wait_for()
