"""The one DRF exception handler: a service's Refusal becomes {"detail", "code"} with its status."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import Refusal


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Refusal):
        return Response({"detail": exc.message, "code": exc.code}, status=exc.status)
    return drf_exception_handler(exc, context)
