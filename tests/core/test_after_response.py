"""core.after_response: work a request leaves for after its response runs once the response has gone (Django's
request_finished), at once outside a request; a failing call is logged and the others run."""

from __future__ import annotations

import logging

import pytest
from django.core.signals import request_finished, request_started

from core import after_response


@pytest.fixture
def serving():
    """A request being served, as the WSGI handler brackets one (the real signals: no test transaction around)."""
    request_started.send(sender=None)
    yield
    request_finished.send(sender=None)


@pytest.mark.django_db(transaction=True)  # the signals' own handlers close connections that a test's transaction holds
def test_a_call_waits_for_the_response(serving) -> None:
    ran: list[str] = []
    after_response.later(lambda: ran.append("after"))
    assert ran == []
    request_finished.send(sender=None)
    assert ran == ["after"]
    request_started.send(sender=None)  # the next request: nothing left of the last one
    request_finished.send(sender=None)
    assert ran == ["after"]


def test_outside_a_request_a_call_runs_at_once() -> None:
    ran: list[str] = []
    after_response.later(lambda: ran.append("now"))
    assert ran == ["now"]


@pytest.mark.django_db(transaction=True)
def test_a_failing_call_is_logged_and_the_others_run(serving, caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    def fails() -> None:
        raise RuntimeError("the database went away")

    after_response.later(fails)
    after_response.later(lambda: ran.append("second"))
    with caplog.at_level(logging.INFO, logger="podium.requests"):
        request_finished.send(sender=None)
    assert ran == ["second"]
    assert [record.getMessage() for record in caplog.records] == ["work left for after a response failed"]


@pytest.mark.django_db(transaction=True)
def test_the_calls_of_a_request_that_never_finished_are_dropped() -> None:
    ran: list[str] = []
    request_started.send(sender=None)
    after_response.later(lambda: ran.append("lost"))
    request_started.send(sender=None)  # its process went on to the next request without finishing that one
    request_finished.send(sender=None)
    assert ran == []
