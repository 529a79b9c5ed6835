from __future__ import annotations

import pytest

from ingest.engine import tool


@pytest.fixture(autouse=True)
def _warm_ups_beside_the_tests_files(monkeypatch, tmp_path_factory) -> None:
    """A spare's warm-up writes its sample here, as a worker's writes it in its scratch folder (tool.enable_spares):
    a spare a test closes in the middle of its warm-up leaves nothing in the system's temporary folder."""
    monkeypatch.setattr(tool, "_WARM_UP_ROOT", tmp_path_factory.mktemp("warm-up"))
