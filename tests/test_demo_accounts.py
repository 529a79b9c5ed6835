"""The demo personas' password is public: they exist only in demo mode (PODIUM_DEMO_BANNER)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from accounts.demo import DemoModeOff, demo_accounts_create
from accounts.models import Organization

PERSONAS = ("submitter", "reviewer", "chair", "operator")


@pytest.mark.django_db
def test_demo_accounts_are_refused_outside_demo_mode(settings, tmp_path) -> None:
    settings.PODIUM_DEMO_BANNER = False
    with pytest.raises(CommandError, match="only in demo mode"):
        call_command("demo_data", "--out", str(tmp_path), "--accounts")
    assert not any(tmp_path.iterdir())  # refused before writing anything
    organization = Organization.objects.create(name="X", slug="x")
    with pytest.raises(DemoModeOff):
        demo_accounts_create(submitter_org=organization, reviewer_org=organization, chaired=[])
    assert not User.objects.filter(username__in=PERSONAS).exists()
