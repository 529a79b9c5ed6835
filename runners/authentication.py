"""Runner tokens (`Authorization: Bearer prn_…`): the agent API's only credential, good nowhere else."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from runners.models import Runner, RunnerToken


class RunnerPrincipal:
    """request.user on the agent API: a runner, not a person (no permissions outside this API)."""

    is_authenticated = True
    is_staff = False
    is_anonymous = False

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        # What DRF's throttles key on: one bucket per runner (never equal to a person's integer pk).
        self.pk = f"runner:{runner.pk}"

    def __str__(self) -> str:
        return f"runner {self.runner.name}"


class RunnerTokenAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[RunnerPrincipal, RunnerToken] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != b"bearer":
            return None
        if len(header) != 2:
            raise AuthenticationFailed("Malformed Authorization header: use 'Bearer <runner token>'.")
        parts = RunnerToken.split(header[1].decode("ascii", "replace"))
        token = RunnerToken.objects.select_related("runner").filter(prefix=parts[0]).first() if parts else None
        if token is None or parts is None or not token.matches(parts[1]):
            raise AuthenticationFailed("Unknown runner token.")
        if token.revoked_at is not None or token.runner.disabled_at is not None:
            raise AuthenticationFailed("This runner token was revoked or the runner disabled.")
        return RunnerPrincipal(token.runner), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class IsRunner(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, RunnerToken)
