"""Reproduction logs stored before the storage API kept absolute paths; the data migration turns them into keys
of the `bundles` storage, and the judged log is still found under its new key."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings

from ingest import storage
from runners import services
from runners.models import Attempt, ReproductionJob
from tests.runners.test_agent_api import CPU, _agent, _claim, _result
from tests.runners.test_judging import _finish, _log, operator  # noqa: F401  (operator: a fixture)

pytestmark = pytest.mark.django_db

migration = importlib.import_module("runners.migrations.0004_attempt_log_key")


def test_absolute_log_paths_become_storage_keys_and_back(operator) -> None:  # noqa: F811
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    client, _ = _agent(operator)
    _finish(client, _claim(client, CPU), _log(seed=1))
    attempt = Attempt.objects.get(job=job)
    key = attempt.log_path
    assert key.startswith("reproductions/")
    absolute = str(Path(settings.PODIUM_BUNDLE_DIR).parent / key)
    assert Path(absolute).is_file()  # the filesystem storage keeps the file where the old code put it
    Attempt.objects.filter(pk=attempt.pk).update(log_path=absolute)

    migration.to_keys(apps, None)
    attempt.refresh_from_db()
    assert attempt.log_path == key
    with storage.fetched(attempt.log_path, attempt.log_sha256) as path:
        assert path.read_bytes() == _log(seed=1)

    migration.to_paths(apps, None)
    attempt.refresh_from_db()
    assert attempt.log_path == absolute
