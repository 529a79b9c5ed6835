"""plotly.js as a static file: the copy the installed plotly package ships (no CDN, no copy in the
repository), under a name that carries plotly's version.

A staticfiles finder, so that whatever serves static files finds it with no build step: runserver and
WhiteNoise's finders in development (DEBUG), the live server of the browser tests, and collectstatic
for production, where WhiteNoise serves it compressed. The version in the name changes the URL on an
upgrade, so browsers may keep the file a year (WHITENOISE_IMMUTABLE_FILE_TEST in settings).
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage, Error
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = f"vendor/plotly-{plotly.__version__}.min.js"


class _PlotlyStorage(FileSystemStorage):
    """The plotly package's data folder, where PLOTLY_JS is its plotly.min.js."""

    def __init__(self) -> None:
        super().__init__(location=str(resources.files("plotly") / "package_data"))

    def path(self, name: str) -> str:
        return super().path("plotly.min.js" if name == PLOTLY_JS else name)


class PlotlyFinder(BaseFinder):
    storage = _PlotlyStorage()

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        if not Path(self.storage.path(PLOTLY_JS)).is_file():
            return [Error(f"the plotly package has no plotly.min.js at {self.storage.path(PLOTLY_JS)}",
                          hint="reinstall plotly", id="leaderboard.E001")]
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str] | None:
        find_all = find_all or bool(kwargs.get("all"))  # `all=` until Django 6.1
        found = [self.storage.path(PLOTLY_JS)] if path == PLOTLY_JS else []
        return found if find_all else next(iter(found), None)

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield PLOTLY_JS, self.storage
