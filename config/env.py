"""Typed readers for settings that come from the environment.

A bad value stops the process at start-up with a message naming the variable, rather than
surfacing later as a confusing failure on some request.
"""

from __future__ import annotations

import os


class ImproperlyConfiguredEnv(ValueError):
    pass


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfiguredEnv(f"{name}={value} is below the minimum {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_secret(name: str, default: str) -> str:
    """`name`, or the contents of the file `name_FILE` names (Docker and Kubernetes secrets)."""
    path = os.environ.get(f"{name}_FILE", "").strip()
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read().strip()
        except OSError as exc:
            raise ImproperlyConfiguredEnv(f"{name}_FILE={path!r} cannot be read: {exc.strerror}") from None
    return env_str(name, default)


def email_settings(url: str) -> dict[str, object]:
    """Django's e-mail settings from one URL: smtp://user:password@host:587 (STARTTLS), smtps://…:465
    (TLS), console:// or dummy://. User and password are percent-decoded."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if parts.scheme in ("console", "dummy"):
        return {"EMAIL_BACKEND": f"django.core.mail.backends.{parts.scheme}.EmailBackend"}
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ImproperlyConfiguredEnv(f"EMAIL_URL must be smtp://, smtps://, console:// or dummy://, not {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfiguredEnv(f"EMAIL_URL has a bad port: {url!r}") from None
    return {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": parts.hostname,
        "EMAIL_PORT": port or (465 if parts.scheme == "smtps" else 587),
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_SSL": parts.scheme == "smtps",
        "EMAIL_USE_TLS": parts.scheme == "smtp" and port != 25,
        "EMAIL_TIMEOUT": 10,
    }
