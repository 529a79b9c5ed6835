"""What the operator commands share: refusals become exit code 2 with the reason, and every change is
audited under the command's name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from core.errors import Refusal

T = TypeVar("T")
BAD_INPUT = 2


def refuse(message: str) -> CommandError:
    return CommandError(message, returncode=BAD_INPUT)


def attempt(action: Callable[..., T], **kwargs: Any) -> T:
    """Call a service; its refusal, or a validation error, is the command's clear failure."""
    try:
        return action(**kwargs)
    except Refusal as refusal:
        raise refuse(refusal.message) from None
    except ValidationError as error:
        raise refuse("; ".join(error.messages)) from None
