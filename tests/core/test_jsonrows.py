"""core.jsonrows: new rows inserted as bulk_create inserts them, on PostgreSQL as one JSON document."""

from __future__ import annotations

import datetime
import math

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from accounts.models import AuditEvent
from core import jsonrows
from ingest.models import Run
from tests.factories import ResultFactory

pytestmark = pytest.mark.django_db
postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="the JSON document: PostgreSQL")

ODD_JSON = {"quote": 'a "b" \\c\' d', "unicode": "ÿ 𝄞 日本", "nested": [[1, 2.5e-7, -0.0, 1e300], {"x": None}],
            "bounds": [2**63 - 1, -(2**63)], "flags": [True, False], "empty": {}, "10": "a key that is a number"}
RUN_COLUMNS = ("position", "file", "sha256", "byte_count", "line_count", "run_start_ms", "run_stop_ms",
               "time_to_train_min", "status", "compliant", "counted", "dropped", "hyperparameters", "eval_curve",
               "seeds", "logged", "energy_j", "rerun_digest")


def _runs(result, offset: int = 0) -> list[Run]:
    return [Run(result=result, position=offset + i, file=f"org/results/s/b/result_{i}.txt\x7f'\"", sha256="a" * 64,
                byte_count=2**40 + i, line_count=i, run_start_ms=0.1 * i, run_stop_ms=None,
                time_to_train_min=1 / 3 + i, status="success" if i else "", compliant=None if i == 2 else bool(i % 2),
                counted=bool(i), dropped=Run.Dropped.SLOWEST if i == 1 else Run.Dropped.COUNTED,
                hyperparameters={**ODD_JSON, "i": i}, eval_curve=[{"epoch": i, "accuracy": 0.759}], seeds=[i, "x"],
                logged={"benchmark": "resnet"}, energy_j=None, rerun_digest="") for i in range(4)]


def _stored(result, positions: range) -> list[tuple]:
    return list(Run.objects.filter(result=result, position__in=positions).order_by("position")
                .values_list(*RUN_COLUMNS))


def test_rows_are_stored_as_bulk_create_stores_them_with_their_ids_set_in_order() -> None:
    result = ResultFactory()
    ours = jsonrows.bulk_insert(_runs(result))
    Run.objects.bulk_create(_runs(result, offset=10))
    assert [r.pk for r in ours] == sorted(r.pk for r in ours) and all(not r._state.adding for r in ours)
    assert {r.pk: r.position for r in ours} == dict(Run.objects.filter(pk__in=[r.pk for r in ours])
                                                     .values_list("pk", "position"))
    mine, django = _stored(result, range(4)), _stored(result, range(10, 14))
    assert [row[1:] for row in mine] == [row[1:] for row in django]
    stored = mine[0][RUN_COLUMNS.index("hyperparameters")]  # numbers as each database's JSON keeps them
    assert {k: stored[k] for k in ("quote", "unicode", "bounds", "flags", "empty", "10")} == \
        {k: ODD_JSON[k] for k in ("quote", "unicode", "bounds", "flags", "empty", "10")}


def test_nothing_to_insert_sends_nothing() -> None:
    with CaptureQueriesContext(connection) as queries:
        assert jsonrows.bulk_insert([]) == []
    assert len(queries) == 0


def test_datetimes_and_null_foreign_keys_round_trip() -> None:
    at = datetime.datetime(2026, 12, 7, 13, 30, 1, 123456, tzinfo=datetime.UTC)
    events = [AuditEvent(actor=None, actor_label="worker", action="x.y", subject_type="t", subject_id=i,
                         before={"s": i}, after={}, created_at=at + datetime.timedelta(microseconds=i))
              for i in range(3)]
    jsonrows.bulk_insert(events)
    stored = list(AuditEvent.objects.filter(pk__in=[e.pk for e in events]).order_by("pk")
                  .values_list("actor_id", "subject_id", "before", "created_at"))
    assert stored == [(None, i, {"s": i}, at + datetime.timedelta(microseconds=i)) for i in range(3)]


@postgresql_only
def test_on_postgresql_the_rows_go_as_one_statement_with_one_parameter() -> None:
    result = ResultFactory()
    with CaptureQueriesContext(connection) as queries:
        jsonrows.bulk_insert(_runs(result))
    (query,) = queries.captured_queries
    assert "jsonb_to_recordset" in query["sql"]


@postgresql_only
def test_on_postgresql_the_statement_is_prepared_once_per_connection() -> None:
    result = ResultFactory()
    for offset in (0, 10, 20):
        jsonrows.bulk_insert(_runs(result, offset))
    assert len(_stored(result, range(30))) == 12
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                       ['INSERT INTO "ingest_run"%jsonb_to_recordset%'])
        assert cursor.fetchone()[0] == 1


@postgresql_only
def test_what_the_json_text_cannot_carry_goes_to_bulk_create_as_before() -> None:
    result = ResultFactory()
    nan_run, with_pk, without = _runs(result)[:3]
    nan_run.run_start_ms = math.nan  # PostgreSQL's double precision holds NaN; the JSON text cannot say it
    with CaptureQueriesContext(connection) as queries:
        jsonrows.bulk_insert([nan_run])
    assert "jsonb_to_recordset" not in queries.captured_queries[0]["sql"]
    assert math.isnan(Run.objects.get(pk=nan_run.pk).run_start_ms)
    with_pk.pk = nan_run.pk + 1000
    with CaptureQueriesContext(connection) as queries:  # some with an id, some without
        jsonrows.bulk_insert([with_pk, without])
    assert "jsonb_to_recordset" not in queries.captured_queries[0]["sql"]
    assert Run.objects.filter(pk=nan_run.pk + 1000, position=1).exists()


@postgresql_only
def test_ids_drawn_ahead_are_written() -> None:
    result = ResultFactory()
    runs = _runs(result)
    for n, run in enumerate(runs):
        run.pk = 10_000_000 + n
    with CaptureQueriesContext(connection) as queries:
        jsonrows.bulk_insert(runs)
    assert "jsonb_to_recordset" in queries.captured_queries[0]["sql"]
    assert dict(Run.objects.filter(result=result).values_list("pk", "position")) == {10_000_000 + n: n
                                                                                        for n in range(4)}


def test_a_related_object_saved_since_gives_its_id_and_an_unsaved_one_is_refused() -> None:
    saved = ResultFactory()
    fresh = ResultFactory.build(round=saved.round, organization=saved.organization, submission=saved.submission,
                                system=saved.system, benchmark=saved.benchmark, is_current=False)
    runs = _runs(fresh)  # its result has no id yet
    with pytest.raises(ValueError, match="unsaved related object"):
        jsonrows.bulk_insert(runs)
    fresh.save()
    jsonrows.bulk_insert(runs)
    assert {run.result_id for run in Run.objects.filter(pk__in=[r.pk for r in runs])} == {fresh.pk}


def test_an_auto_now_add_field_is_stamped_as_bulk_create_stamps_it() -> None:
    from ingest.models import Submission
    from tests.factories import SubmissionFactory
    model = SubmissionFactory.build()
    model.round.save()
    model.organization.save()
    model.round_id, model.organization_id = model.round.pk, model.organization.pk
    jsonrows.bulk_insert([model])
    stored = Submission.objects.get(pk=model.pk)
    assert stored.created_at is not None and stored.created_at == model.created_at


@postgresql_only
def test_a_value_postgresql_refuses_is_refused_as_before() -> None:
    result = ResultFactory()
    for bad in ({"v": math.inf}, {"v": "a\x00b"}):
        run = _runs(result)[0]
        run.hyperparameters = bad
        with pytest.raises(DataError), transaction.atomic():
            jsonrows.bulk_insert([run])
    too_long = _runs(result)[0]
    too_long.status = "x" * 41
    with pytest.raises(DataError), transaction.atomic():
        jsonrows.bulk_insert([too_long])
    assert not Run.objects.filter(result=result).exists()


@postgresql_only
def test_an_expression_and_a_text_too_long_go_to_bulk_create(monkeypatch) -> None:
    from django.db.models import Value

    result = ResultFactory()
    expression, large, ours, theirs = _runs(result)
    expression.status = Value("from an expression")
    with CaptureQueriesContext(connection) as queries:
        jsonrows.bulk_insert([expression])
    assert "jsonb_to_recordset" not in queries.captured_queries[0]["sql"]
    assert Run.objects.get(pk=expression.pk).status == "from an expression"
    ours.run_start_ms = theirs.run_start_ms = -0.0  # stored alike: as 0 (numeric literals have no negative zero)
    jsonrows.bulk_insert([ours])
    Run.objects.bulk_create([theirs])
    assert [math.copysign(1.0, Run.objects.get(pk=r.pk).run_start_ms) for r in (ours, theirs)] == [1.0, 1.0]
    monkeypatch.setattr(jsonrows, "MAX_TEXT", 100)
    with CaptureQueriesContext(connection) as queries:
        jsonrows.bulk_insert([large])
    assert "jsonb_to_recordset" not in queries.captured_queries[0]["sql"]


@postgresql_only
def test_a_failed_insert_leaves_its_transaction_to_be_rolled_back() -> None:
    result = ResultFactory()
    run = _runs(result)[0]
    run.status = "x" * 41
    with transaction.atomic():
        with pytest.raises(DataError):
            jsonrows.bulk_insert([run])
        assert transaction.get_rollback()  # as save() and bulk_create leave it: nothing after it is committed
        transaction.set_rollback(False)  # (the test's own way out: PostgreSQL has aborted the transaction)
        transaction.set_rollback(True)


@postgresql_only
def test_a_lone_surrogate_in_text_fails_as_through_the_orm() -> None:
    result = ResultFactory()
    ours, theirs = _runs(result)[:2]
    ours.status = theirs.status = "a\udc80"
    with pytest.raises(UnicodeEncodeError), transaction.atomic():
        Run.objects.bulk_create([theirs])
    with pytest.raises(UnicodeEncodeError), transaction.atomic():
        jsonrows.bulk_insert([ours])
