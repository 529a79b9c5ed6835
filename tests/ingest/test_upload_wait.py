"""POST /api/v1/submissions/?wait=S: the upload's own request waits for the verdict (ingest.api, ingest.waiting)."""

from __future__ import annotations

import pytest

from ingest import waiting
from ingest.models import Submission
from tests.ingest.test_status_wait import THREADED, fake_time  # noqa: F401  (fake_time: a fixture)
from tests.ingest.test_uploads import _file, acme_bundle, api, upload  # noqa: F401  (acme_bundle: a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def bundle(request) -> bytes:
    return request.getfixturevalue("acme_bundle")


@pytest.fixture
def clock(request):
    """The waiting loop's clock and sleep (test_status_wait's fake_time): no real wait."""
    return request.getfixturevalue("fake_time")


def _upload(people, data: bytes, query: str, **extra):
    # On-commit callbacks do not run here: the submission stays "received" until the test moves it.
    return api(people.alice).post(f"/api/v1/submissions/{query}",
                                  {"round": "open-v4.0", "bundle": _file(data, "b.tgz")}, format="multipart", **extra)


def _only_submission() -> Submission:
    (submission,) = Submission.objects.all()
    return submission


def test_the_answer_carries_the_verdict_once_it_is_in_not_the_claim(people, round_open, bundle,
                                                                    clock) -> None:
    def worker(sleeps: int) -> None:
        moved = {2: Submission.State.VERIFYING, 4: Submission.State.VERIFIED}.get(sleeps)
        if moved:
            Submission.objects.update(state=moved)
    clock.on_sleep = worker

    response = _upload(people, bundle, "?wait=10", **THREADED)

    assert response.status_code == 201
    body = response.json()
    # The upload as it was accepted, and beside it the status once final: the claim did not end the wait.
    assert (body["id"], body["state"], body["created"]) == (_only_submission().pk, "received", True)
    assert body["status"]["state"] == "verified"
    assert body["status"]["id"] == body["id"] and body["status"]["results"] == []
    assert response[waiting.HEADER] == "true"
    assert clock.sleeps == [waiting.CHECK_S] * 4


def test_a_wait_that_runs_out_answers_the_status_as_it_is(people, round_open, bundle, clock) -> None:
    response = _upload(people, bundle, "?wait=0.5", **THREADED)

    assert response.status_code == 201
    assert response.json()["status"]["state"] == "received"
    assert response[waiting.HEADER] == "true"
    assert sum(clock.sleeps) == pytest.approx(0.5)


def test_without_a_slot_the_upload_answers_at_once_without_a_status(people, round_open, bundle, clock,
                                                                     settings) -> None:
    single = _upload(people, bundle, "?wait=10", **{"wsgi.multithread": False})
    settings.PODIUM_STATUS_WAITERS = 0
    busy = _upload(people, bundle, "?wait=10", **THREADED)  # the same bytes again: 200

    assert (single.status_code, busy.status_code) == (201, 200)
    for response in (single, busy):
        assert "status" not in response.json() and response.json()["state"] == "received"
        assert waiting.HEADER not in response
    assert clock.sleeps == []


def test_bytes_already_verified_answer_their_verdict_at_once(people, round_open, bundle, clock) -> None:
    upload(api(people.alice), bundle)
    Submission.objects.update(state=Submission.State.VERIFIED)

    response = _upload(people, bundle, "?wait=10", **THREADED)

    assert response.status_code == 200
    assert response.json()["status"]["state"] == "verified"
    assert waiting.HEADER not in response  # nothing was waited for
    assert clock.sleeps == []


@pytest.mark.parametrize("value", ["soon", "nan", "-1", "1e400"])
def test_a_bad_wait_is_refused_before_anything_is_stored(people, round_open, bundle, clock,
                                                         value) -> None:
    response = _upload(people, bundle, f"?wait={value}", **THREADED)

    assert response.status_code == 400
    assert "wait must be" in response.json()["detail"]
    assert not Submission.objects.exists()


def test_a_submission_that_leaves_sight_while_waited_for_leaves_the_upload_answered(people, round_open,
                                                                                     bundle, clock) -> None:
    clock.on_sleep = lambda sleeps: Submission.objects.all().delete()

    response = _upload(people, bundle, "?wait=10", **THREADED)

    # The upload was stored and answered; only its verdict cannot be told.
    assert response.status_code == 201
    assert "status" not in response.json()
    assert len(clock.sleeps) == 1


def test_the_schema_documents_the_wait_and_the_status(people) -> None:
    schema = api(people.alice).get("/api/schema/?format=json").json()
    upload_operation = schema["paths"]["/api/v1/submissions/"]["post"]

    assert "wait" in [parameter["name"] for parameter in upload_operation["parameters"]]
    assert "status" in schema["components"]["schemas"]["UploadOutput"]["properties"]
