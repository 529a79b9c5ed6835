"""One error vocabulary. A service that says no raises a Refusal with a message for the person and an
HTTP status; the API maps it in one DRF exception handler (core.api) and HTML views in one decorator
(core.views). Forbidden and NotFound are also Django's PermissionDenied and Http404, so code and
middleware that know those keep working."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404


class Refusal(Exception):
    status = 400
    code = "refused"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return self.message


class BadRequest(Refusal):
    """What was asked cannot be done, as asked (400)."""

    status = 400
    code = "invalid"


class Forbidden(Refusal, PermissionDenied):
    """Who asked may not do it (403)."""

    status = 403
    code = "forbidden"


class NotFound(Refusal, Http404):
    """There is nothing of that name that the asker may see (404)."""

    status = 404
    code = "not_found"


class Conflict(Refusal):
    """The thing changed under the request: a stale attempt, a state that moved on (409)."""

    status = 409
    code = "conflict"


class TooMany(Refusal):
    """A rate limit (429)."""

    status = 429
    code = "throttled"
