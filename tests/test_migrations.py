"""The move of the catalog (rounds, benchmarks) and of organizations and the audit trail into their own
apps keeps every row of a database made before it, with every foreign key still pointing at its row."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# The schema as it stood before catalog/ and the accounts-owned organization existed.
BEFORE = [
    ("leaderboard", "0002_round_chairs_round_closes_at"),
    ("ingest", "0006_result_reproduction"),
    ("accounts", "0001_initial"),
    ("reviews", "0001_initial"),
    ("runners", "0001_initial"),
    ("catalog", None),
]


def _migrate(targets: list[tuple[str, str | None]]):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def _latest() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] in {a for a, _ in BEFORE}]


def _seed(apps) -> dict[str, int]:
    user_model = apps.get_model("auth", "User")
    chair = user_model.objects.create(username="chair")
    submitter = user_model.objects.create(username="submitter")
    organization = apps.get_model("ingest", "Organization").objects.create(name="Acme", slug="acme")
    apps.get_model("accounts", "Membership").objects.create(user=submitter, organization=organization, role="submitter")
    round_ = apps.get_model("leaderboard", "Round").objects.create(slug="r1", name="Round 1", ruleset="4.0.0")
    round_.chairs.add(chair)
    benchmark = apps.get_model("leaderboard", "Benchmark").objects.create(
        round=round_, key="bert", name="BERT", required_runs=10)
    system = apps.get_model("ingest", "System").objects.create(round=round_, organization=organization, slug="s1")
    submission = apps.get_model("ingest", "Submission").objects.create(
        organization=organization, round=round_, source="upload", sha256="a" * 64, state="verified",
        uploaded_by=submitter)
    result = apps.get_model("ingest", "Result").objects.create(
        submission=submission, round=round_, organization=organization, system=system, benchmark=benchmark,
        system_slug="s1", benchmark_key="bert", digest="b" * 64, runs_count=10, runs_compliant=10, olympic_k=1,
        raw_score=12.5, scaling_factor=1.0, score=12.5, verdict="verified", tool_version="4.1.68")
    run = apps.get_model("ingest", "Run").objects.create(
        result=result, position=1, file="result_0.txt", sha256="c" * 64, byte_count=10, line_count=2)
    apps.get_model("ingest", "Finding").objects.create(
        submission=submission, result=result, run=run, severity="warning", checker="compliance", message="m")
    apps.get_model("ingest", "AuditEvent").objects.create(
        actor=chair, actor_label="chair", action="round.open", subject_type="round", subject_id=round_.pk)
    flag = apps.get_model("reviews", "Flag").objects.create(
        round=round_, result=result, raised_by=chair, rule="r", description="d")
    apps.get_model("reviews", "Comment").objects.create(flag=flag, author=submitter, organization=organization,
                                                        body="answer")
    runner = apps.get_model("runners", "Runner").objects.create(name="gpu-1", organization=organization,
                                                                created_by=chair)
    return {"round": round_.pk, "benchmark": benchmark.pk, "organization": organization.pk, "result": result.pk,
            "runner": runner.pk, "flag": flag.pk, "chair": chair.pk}


@pytest.mark.django_db(transaction=True)
def test_moving_catalog_and_organizations_keeps_every_row():
    old = _migrate(BEFORE)
    ids = _seed(old)

    new = _migrate(_latest())

    round_ = new.get_model("catalog", "Round").objects.get(pk=ids["round"])
    assert round_.slug == "r1"
    assert list(round_.chairs.values_list("pk", flat=True)) == [ids["chair"]]
    assert new.get_model("catalog", "Benchmark").objects.get(pk=ids["benchmark"]).round_id == round_.pk
    organization = new.get_model("accounts", "Organization").objects.get(pk=ids["organization"])
    assert organization.slug == "acme"
    assert organization.memberships.count() == 1
    result = new.get_model("ingest", "Result").objects.get(pk=ids["result"])
    assert (result.round_id, result.benchmark_id, result.organization_id) == (
        ids["round"], ids["benchmark"], ids["organization"])
    assert result.score == 12.5
    assert result.runs.get().findings.count() == 1
    assert new.get_model("accounts", "AuditEvent").objects.get().action == "round.open"
    flag = new.get_model("reviews", "Flag").objects.get(pk=ids["flag"])
    assert flag.round_id == ids["round"] and flag.comments.get().organization_id == ids["organization"]
    assert new.get_model("runners", "Runner").objects.get(pk=ids["runner"]).organization_id == ids["organization"]
    content_types = new.get_model("contenttypes", "ContentType").objects
    assert content_types.filter(app_label="catalog", model="round").exists()
    assert not content_types.filter(app_label="leaderboard", model="round").exists()
    assert content_types.filter(app_label="accounts", model="organization").exists()
    # New rows keep numbering after the moved ones (the sequences followed the tables).
    new_round = new.get_model("catalog", "Round").objects.create(slug="r2", name="Round 2", ruleset="4.0.0")
    assert new_round.pk > round_.pk
    table_names = connection.introspection.table_names()
    assert {"catalog_round", "catalog_round_chairs", "accounts_organization", "accounts_auditevent"} <= set(
        table_names)
    assert "leaderboard_round" not in table_names


@pytest.mark.django_db(transaction=True)
def test_moving_sessions_to_accounts_signs_nobody_out_and_moving_back_neither():
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore as DjangoStore
    from django.contrib.sessions.models import Session as DjangoSession
    from django.test import Client

    from accounts.models import Session

    _migrate([("accounts", "0003_organization_auditevent_tables")])
    alice = User.objects.create_user("alice", password="x" * 20)
    signed_in = DjangoStore()
    signed_in.update({SESSION_KEY: str(alice.pk), BACKEND_SESSION_KEY: "django.contrib.auth.backends.ModelBackend",
                      HASH_SESSION_KEY: alice.get_session_auth_hash()})
    signed_in.create()
    anonymous = DjangoStore()
    anonymous["theme"] = "dark"
    anonymous.create()
    forged = DjangoSession.objects.create(session_key="f" * 32, session_data="not signed data",
                                          expire_date=signed_in.get_expiry_date())

    _migrate([("accounts", "0004_session")])
    moved = {row.session_key: row for row in Session.objects.all()}
    assert set(moved) == {signed_in.session_key, anonymous.session_key}  # the forged one signs nobody in
    assert moved[signed_in.session_key].user_id == alice.pk and moved[anonymous.session_key].user_id is None
    assert not DjangoSession.objects.exists()
    client = Client()
    client.cookies["sessionid"] = signed_in.session_key
    assert client.get("/accounts/tokens/").status_code == 200  # a signed-in page, not a redirect to sign in

    _migrate([("accounts", "0003_organization_auditevent_tables")])
    back = DjangoStore(signed_in.session_key)
    assert back[SESSION_KEY] == str(alice.pk)
    assert back[BACKEND_SESSION_KEY] == "django.contrib.auth.backends.ModelBackend"
    assert DjangoStore(anonymous.session_key)["theme"] == "dark"
    assert forged.session_key not in {s.session_key for s in DjangoSession.objects.all()}
    _migrate(_latest())
