"""The code's release in every cached answer's key (core.release): an answer made by one version of the code
is never served by another, while the results generation stays shared between them."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from core.release import digest_of, release
from leaderboard import cache as keys
from leaderboard import selectors
from tests.leaderboard.test_query_counts import Data


def test_the_digest_follows_the_sources_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "app" / "__pycache__").mkdir(parents=True)
    (tmp_path / "app" / "views.py").write_text("A = 1\n")
    (tmp_path / "app" / "page.html").write_text("<p>one</p>\n")
    first = digest_of(tmp_path, ["app"])
    (tmp_path / "app" / "__pycache__" / "views.cpython-311.pyc").write_bytes(b"\0compiled")
    (tmp_path / "app" / "notes.log").write_text("not source")
    assert digest_of(tmp_path, ["app"]) == first
    (tmp_path / "app" / "page.html").write_text("<p>two</p>\n")
    assert digest_of(tmp_path, ["app"]) != first
    (tmp_path / "app" / "page.html").write_text("<p>one</p>\n")
    assert digest_of(tmp_path, ["app"]) == first
    (tmp_path / "app" / "more.py").write_text("")
    assert digest_of(tmp_path, ["app"]) != first


def test_this_checkouts_release_is_read_once() -> None:
    assert release() == release() and len(release()) == 16


@pytest.mark.django_db
def test_a_page_kept_by_one_release_is_made_again_by_another(monkeypatch: pytest.MonkeyPatch) -> None:
    Data()
    made: list[str] = []
    real = selectors.newest_published_round

    def counted(user):
        made.append(keys.release())
        return real(user)

    monkeypatch.setattr(selectors, "newest_published_round", counted)
    monkeypatch.setattr(keys, "release", lambda: "old")
    Client().get("/")
    Client().get("/")
    assert made == ["old"]
    monkeypatch.setattr(keys, "release", lambda: "new")
    Client().get("/")
    Client().get("/")
    assert made == ["old", "new"]
