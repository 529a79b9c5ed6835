"""Production settings come from the environment: with the documented production environment
`manage.py check --deploy` finds nothing, and a production start without what it needs stops at once
with a message that names it (issue 14; docs/operating.md)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def production_environment(tmp_path: Path) -> dict[str, str]:
    """What docs/operating.md tells an operator to set."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    return {
        **keep,
        "PODIUM_DEPLOYMENT": "production",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(48),
        "ALLOWED_HOSTS": "podium.example.org",
        "CSRF_TRUSTED_ORIGINS": "https://podium.example.org",
        "PODIUM_BASE_URL": "https://podium.example.org",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CACHE_URL": "redis://127.0.0.1:6379/9",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/8",
        "EMAIL_URL": "smtp://podium:secret%21@mail.example.org:587",
        "PODIUM_BEHIND_TLS_PROXY": "1",
        "PODIUM_VAR_DIR": str(tmp_path / "var"),
    }


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_check_deploy_finds_nothing_with_the_documented_environment(tmp_path) -> None:
    done = manage(production_environment(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_secrets_may_come_from_files(tmp_path) -> None:
    env = production_environment(tmp_path)
    key = tmp_path / "secret_key"
    key.write_text(env.pop("SECRET_KEY") + "\n")
    env["SECRET_KEY_FILE"] = str(key)
    done = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("change", "message"), [
    ({"SECRET_KEY": "django-insecure-podium-development-key-change-me"}, "SECRET_KEY"),
    ({"SECRET_KEY": "short"}, "SECRET_KEY"),
    ({"CACHE_URL": ""}, "CACHE_URL must name a shared cache"),
    ({"PODIUM_BASE_URL": None}, "PODIUM_BASE_URL must be set"),
    ({"EMAIL_URL": None}, "EMAIL_URL must be set"),
    ({"DEBUG": "1"}, "DEBUG must be 0"),
    ({"EMAIL_URL": "ftp://mail.example.org"}, "EMAIL_URL must be smtp://"),
    ({"SECRET_KEY_FILE": "/nonexistent/secret"}, "SECRET_KEY_FILE"),
])
def test_a_production_start_without_what_it_needs_stops_and_says_why(tmp_path, change, message) -> None:
    env = production_environment(tmp_path)
    for name, value in change.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    done = manage(env, "check")
    assert done.returncode != 0
    assert message in done.stderr, done.stderr[-2000:]


def test_email_url_gives_djangos_smtp_settings() -> None:
    from config.env import email_settings

    assert email_settings("smtp://podium:secret%21@mail.example.org:587") == {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend", "EMAIL_HOST": "mail.example.org",
        "EMAIL_PORT": 587, "EMAIL_HOST_USER": "podium", "EMAIL_HOST_PASSWORD": "secret!", "EMAIL_USE_SSL": False,
        "EMAIL_USE_TLS": True, "EMAIL_TIMEOUT": 10}
    assert email_settings("smtps://mail.example.org")["EMAIL_PORT"] == 465
    assert email_settings("console://")["EMAIL_BACKEND"].endswith("console.EmailBackend")
