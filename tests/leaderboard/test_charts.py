from __future__ import annotations

import gzip
import json
import re

import plotly
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from catalog.models import Round
from ingest.models import Result, System
from leaderboard import charts
from leaderboard.charts import ResultPoint, RoundEntry, RunCurve, RunTime
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, RunFactory, SystemFactory
from tests.people import PASSWORD, make_people, set_phase


def point(id: int, accelerators: int | None, minutes: float | None, submitter: str = "Acme", *,
          model: str = "X100", hosts: int | None = 1, cv: float | None = None, system: str = "") -> ResultPoint:
    return ResultPoint(id=id, url=f"/results/{id}/", submitter=submitter, system=system or f"sys-{id}",
                       accelerator_model=model, accelerators=accelerators, hosts=hosts, minutes=minutes, runs_cv=cv)


# --- Pareto front ------------------------------------------------------------------------------


def test_pareto_front_keeps_results_no_smaller_system_beats() -> None:
    points = [point(1, 8, 100), point(2, 16, 60), point(3, 16, 50), point(4, 32, 55), point(5, 64, 20),
              point(6, 128, 25), point(7, 256, 9)]
    assert [p.id for p in charts.pareto_front(points)] == [1, 3, 5, 7]


def test_pareto_front_ties_keep_one_point_per_scale_and_no_larger_equal_time() -> None:
    points = [point(1, 8, 30), point(2, 8, 30), point(3, 16, 30), point(4, 64, 10), point(5, 64, 10)]
    assert [p.id for p in charts.pareto_front(points)] == [1, 4]


def test_pareto_front_leaves_out_cpu_only_unknown_scale_and_unscored() -> None:
    points = [point(1, 0, 1.0), point(2, None, 2.0), point(3, 8, None), point(4, 8, 40)]
    assert [p.id for p in charts.pareto_front(points)] == [4]


# --- Time to train against scale ---------------------------------------------------------------


def test_scale_chart_has_a_trace_per_submitter_and_the_front_on_log_axes() -> None:
    chart = charts.scale_chart([point(1, 8, 100, "Acme"), point(2, 64, 20, "Zeta"), point(3, 16, 80, "Acme")],
                               title="t")
    names = [t["name"] for t in chart.figure["data"]]
    assert names == ["Acme", "Zeta", "Pareto front (fastest at this scale or fewer)"]
    assert chart.figure["data"][0]["x"] == [8, 16]
    assert chart.figure["data"][2]["x"] == [8, 16, 64]
    assert chart.figure["layout"]["xaxis"]["type"] == chart.figure["layout"]["yaxis"]["type"] == "log"
    assert chart.figure["data"][0]["customdata"][0][:2] == ["/results/1/", "sys-1"]
    assert len(chart.rows) == 3


def test_scale_chart_puts_cpu_only_results_on_a_host_axis_and_says_so() -> None:
    chart = charts.scale_chart([point(1, 8, 100), point(2, 0, 300, "Intel", hosts=4), point(3, None, 5)],
                               title="t")
    cpu = next(t for t in chart.figure["data"] if t["name"].startswith("CPU-only"))
    assert cpu["xaxis"] == "x2" and cpu["x"] == [4]
    assert chart.figure["layout"]["xaxis2"]["type"] == "log"
    assert any("CPU-only" in note and "not part of the Pareto front" in note for note in chart.notes)
    assert any("accelerator count unknown" in note and "sys-3" in note for note in chart.notes)
    front = next(t for t in chart.figure["data"] if t["name"].startswith("Pareto"))
    assert front["x"] == [8]


# --- Scaling efficiency ------------------------------------------------------------------------


def test_scaling_efficiency_against_the_smallest_size_of_each_family() -> None:
    rows = charts.scaling_efficiency([
        point(1, 8, 100), point(2, 16, 55), point(3, 64, 20), point(4, 16, 60),  # 4: slower twin of 2
        point(5, 8, 50, "Zeta"),  # a family of one size
        point(6, 16, 40, model="Y200"),  # Acme's other accelerator: its own family
    ])
    assert [(r.point.id, r.accelerators) for r in rows] == [(1, 8), (2, 16), (3, 64)]
    assert [round(r.speedup, 4) for r in rows] == [1.0, round(100 / 55, 4), 5.0]
    assert [round(r.efficiency, 4) for r in rows] == [1.0, round(100 / 55 / 2, 4), 0.625]
    assert {r.family for r in rows} == {"Acme · X100"}


def test_scaling_chart_draws_speedup_and_efficiency_and_a_table() -> None:
    chart = charts.scaling_chart([point(1, 8, 100), point(2, 32, 30)], title="t")
    efficiency = next(t for t in chart.figure["data"] if t["yaxis"] == "y2")
    assert efficiency["y"] == pytest.approx([100.0, 100 / 30 / 4 * 100])
    assert chart.rows[1][-2:] == ["3.33", "83.3%"]
    assert "not an official score" in chart.notes[0]


# --- Round over round --------------------------------------------------------------------------


def _entry(label: str, model: str, *results: ResultPoint) -> RoundEntry:
    return RoundEntry(label=label, model=model, comparable=(model, "data", 0.5), results=results)


def test_history_splits_the_series_where_the_benchmark_model_changed() -> None:
    entries = [_entry("v1.0", "SSD-ResNet34", point(1, 8, 10), point(2, 64, 2)),
               _entry("v1.1", "SSD-ResNet34", point(3, 8, 8)),
               _entry("v2.0", "RetinaNet", point(4, 8, 60), point(5, 1024, 1.5)),
               _entry("v2.1", "RetinaNet", point(6, 16, 30))]
    assert [len(s) for s in charts.comparable_segments(entries)] == [2, 2]
    chart = charts.history_chart(entries, scale=8, title="t")
    traces = chart.figure["data"]
    assert len(traces) == 4
    assert traces[0]["name"] == "Fastest on 8 accelerators — SSD-ResNet34"
    assert traces[0]["x"] == ["v1.0", "v1.1"] and traces[0]["y"] == [10, 8]
    assert traces[1]["yaxis"] == "y2" and traces[1]["y"] == [64, 8]
    assert traces[2]["x"] == ["v2.0", "v2.1"] and traces[2]["y"] == [60, None]
    assert traces[3]["y"] == [1024, 16]
    assert chart.figure["layout"]["xaxis"]["categoryarray"] == ["v1.0", "v1.1", "v2.0", "v2.1"]
    assert any("SSD-ResNet34 → RetinaNet" in note for note in chart.notes)
    assert any("exactly 8 accelerators in: v2.1" in note for note in chart.notes)


def test_history_keeps_one_series_while_the_benchmark_is_unchanged() -> None:
    chart = charts.history_chart([_entry("v3.0", "BERT", point(1, 8, 20)), _entry("v3.1", "BERT", point(2, 8, 15))],
                                 scale=8, title="t")
    assert [t["name"] for t in chart.figure["data"]] == ["Fastest on 8 accelerators",
                                                          "Accelerators of the round's fastest result"]
    assert "shapes" not in chart.figure["layout"]


# --- Convergence -------------------------------------------------------------------------------


def _curve(position: int, values: list, *, dropped: str = "", axis: str = "epoch", **extra) -> RunCurve:
    return RunCurve(position=position, dropped=dropped,
                    points=tuple({axis: i + 1, "minutes": i * 2.0, "value": v, **extra} for i, v in enumerate(values)))


def _convergence(curves: list[RunCurve], key: str = "resnet", target: float = 0.759, direction: str = "higher"):
    return charts.convergence_chart(curves, benchmark_key=key, quality_target=target, target_direction=direction,
                                    target_text="target", metric_label="Top-1 accuracy", title="t")


def test_convergence_draws_every_run_with_dropped_ones_dashed_and_the_target_line() -> None:
    chart = _convergence([_curve(0, [0.5, 0.7, 0.76]), _curve(1, [0.6, 0.77], dropped="fastest")])
    run_1, run_2, target = chart.figure["data"]
    assert run_1["x"] == [1, 2, 3] and run_1["y"] == [0.5, 0.7, 0.76] and run_1["line"]["dash"] == "solid"
    assert run_2["name"] == "Run 2 (dropped: fastest)" and run_2["line"]["dash"] == "dash"
    assert target["y"] == [0.759, 0.759] and target["x"] == [1, 3]
    assert chart.figure["layout"]["xaxis"]["title"]["text"] == "Epoch"
    assert chart.rows[0][-1] == "yes"


def test_convergence_uses_samples_when_the_log_has_no_epochs() -> None:
    chart = _convergence([_curve(0, [0.5, 0.8], axis="samples")])
    assert chart.figure["layout"]["xaxis"]["title"]["text"] == "Training samples"


def test_convergence_of_maskrcnn_plots_box_map_and_says_so() -> None:
    chart = _convergence([_curve(0, [{"BBOX": 0.2, "SEGM": 0.19}, {"BBOX": 0.378, "SEGM": 0.34}])],
                         key="maskrcnn", target=0.377)
    assert chart.figure["data"][0]["y"] == [0.2, 0.378]
    assert any("BBOX" in note and "SEGM" in note for note in chart.notes)
    assert chart.figure["layout"]["yaxis"]["title"]["text"] == "Box mAP (BBOX)"


def test_convergence_of_stable_diffusion_plots_fid_only() -> None:
    tagged = RunCurve(position=0, dropped="", points=(
        {"samples": 1, "value": 109.8, "metric": "FID"}, {"samples": 1, "value": 0.13, "metric": "CLIP"},
        {"samples": 2, "value": 85.4, "metric": "FID"}, {"samples": 2, "value": 0.16, "metric": "CLIP"}))
    untagged = _curve(1, [109.8, 0.13, 85.4, 0.16], axis="samples")
    dict_valued = _curve(2, [{"FID": 95.0, "CLIP": 0.14}, {"FID": 80.0, "CLIP": 0.17}], axis="samples")
    chart = _convergence([tagged, untagged, dict_valued], key="stable_diffusion", target=90.0, direction="lower")
    assert [t["y"] for t in chart.figure["data"][:3]] == [[109.8, 85.4], [109.8, 85.4], [95.0, 80.0]]
    assert any("FID" in note and "CLIP" in note for note in chart.notes)
    assert any("Lower is better" in note for note in chart.notes)
    assert chart.rows[0][-1] == "yes"


def test_convergence_skips_non_numeric_values_and_says_so() -> None:
    chart = _convergence([_curve(0, [0.5, "nan", None])])
    assert chart.figure["data"][0]["y"] == [0.5]
    assert any("2 evaluation point(s)" in note for note in chart.notes)


# --- Spread ------------------------------------------------------------------------------------


def test_spread_chart_sorts_results_by_cv_and_notes_those_without() -> None:
    chart = charts.spread_chart([point(1, 8, 10, cv=0.05), point(2, 8, 12, cv=0.01), point(3, 8, 9, cv=None)],
                                title="t")
    bar = chart.figure["data"][0]
    assert bar["x"] == pytest.approx([1.0, 5.0])
    assert bar["y"][0].startswith("Acme · sys-2")
    assert any("fewer than two successful runs" in note for note in chart.notes)


def test_run_times_chart_separates_counted_and_dropped_runs() -> None:
    chart = charts.run_times_chart([RunTime(0, 10.0, "fastest"), RunTime(1, 11.0, ""), RunTime(2, 12.0, ""),
                                    RunTime(3, None, "failed")], raw_score=11.5, title="t")
    counted, dropped, mean = chart.figure["data"]
    assert counted["x"] == [2, 3] and dropped["x"] == [1]
    assert mean["y"] == [11.5, 11.5]
    assert any("run(s) 4" in note for note in chart.notes)


def test_figures_serialize_to_plain_json() -> None:
    chart = charts.scale_chart([point(1, 8, 100)], title="t")
    assert json.loads(json.dumps(chart.as_json()))["figure"]["data"][0]["name"] == "Acme"


# --- Endpoints ---------------------------------------------------------------------------------

@pytest.fixture
def people():
    return make_people()


def _result(round_, benchmark, organization, slug: str, accelerators: int, score: float, **extra) -> Result:
    system = SystemFactory(round=round_, organization=organization, slug=slug, name=slug.upper(),
                           accelerator_count=accelerators, division=extra.pop("division", System.Division.CLOSED))
    return ResultFactory(system=system, benchmark=benchmark, score=score, submitter=organization.name,
                         system_name=system.name, accelerator_model="X100", accelerator_count=accelerators,
                         host_count=max(1, accelerators // 8), category=System.Category.AVAILABLE, **extra)


@pytest.fixture
def published(people):
    round_ = RoundFactory(slug="training-v9.0", name="MLPerf Training v9.0", ruleset="9.0.0")
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50")
    small = _result(round_, resnet, people.acme, "acme-8", 8, 30.0, runs_cv=0.02)
    _result(round_, resnet, people.acme, "acme-64", 64, 5.0, runs_cv=0.04)
    _result(round_, resnet, people.zeta, "zeta-16", 16, 20.0, runs_cv=0.01)
    _result(round_, resnet, people.zeta, "zeta-open-8", 8, 3.0, division=System.Division.OPEN)
    for position, minutes in enumerate([29.0, 30.0, 31.0]):
        RunFactory(result=small, position=position, time_to_train_min=minutes,
                   dropped=["fastest", "", "slowest"][position],
                   eval_curve=[{"epoch": 1, "samples": None, "minutes": 1.0, "value": 0.5},
                               {"epoch": 2, "samples": None, "minutes": 2.0, "value": 0.76}])
    return round_, small


@pytest.fixture
def embargoed(people, published):
    """A later round, in review: Acme submitted to it, so Acme's members see it; the public does not."""
    round_ = RoundFactory(slug="training-v9.1", name="MLPerf Training v9.1", ruleset="9.1.0")
    set_phase(round_, Round.Phase.REVIEW)
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50")
    return _result(round_, resnet, people.acme, "acme-8-next", 8, 12.0, runs_cv=0.03)


def signed_in(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.mark.django_db
def test_scale_json_has_one_trace_per_submitter_and_the_front(client: Client, published) -> None:
    response = client.get("/rounds/training-v9.0/charts/scale.json?benchmark=resnet")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert [t["name"] for t in body["figure"]["data"]] == ["Larkspur Compute", "Tessellate Cloud",
                                                           "Pareto front (fastest at this scale or fewer)"]
    assert body["figure"]["data"][2]["x"] == [8, 16, 64]
    assert body["table"]["columns"][0] == "Submitter" and len(body["table"]["rows"]) == 3  # closed only
    assert "Cookie" in response["Vary"] and "public" in response["Cache-Control"]


@pytest.mark.django_db
def test_division_parameter_keeps_open_results_apart(client: Client, published) -> None:
    body = client.get("/rounds/training-v9.0/charts/scale.json?benchmark=resnet&division=open").json()
    zeta = body["figure"]["data"][0]
    assert zeta["name"] == "Tessellate Cloud" and zeta["x"] == [8] and zeta["y"] == [3.0]
    assert "Larkspur Compute" not in {t["name"] for t in body["figure"]["data"]}


@pytest.mark.django_db
@pytest.mark.parametrize(("query", "status"), [("benchmark=resnet&division=both", 400), ("", 400),
                                               ("benchmark=bert", 404)])
def test_bad_chart_parameters_are_answered_in_json(client: Client, published, query: str, status: int) -> None:
    response = client.get(f"/rounds/training-v9.0/charts/scale.json?{query}")
    assert response.status_code == status
    assert response.json()["error"]


@pytest.mark.django_db
def test_scaling_and_spread_json(client: Client, published) -> None:
    scaling = client.get("/rounds/training-v9.0/charts/scaling.json?benchmark=resnet").json()
    assert [row[2] for row in scaling["table"]["rows"]] == ["8", "64"]
    assert scaling["table"]["rows"][1][-2:] == ["6.00", "75.0%"]
    spread = client.get("/rounds/training-v9.0/charts/spread.json?benchmark=resnet").json()
    assert spread["figure"]["data"][0]["x"] == pytest.approx([1.0, 2.0, 4.0])


@pytest.mark.django_db
def test_convergence_and_run_times_json(client: Client, published) -> None:
    _, small = published
    body = client.get(f"/results/{small.pk}/convergence.json").json()
    assert len(body["figure"]["data"]) == 4  # three runs and the target
    assert sum(t["line"]["dash"] == "dash" for t in body["figure"]["data"][:3]) == 2
    runs = client.get(f"/results/{small.pk}/runs.json").json()
    assert [t["name"] for t in runs["figure"]["data"]] == [
        "In the olympic mean", "Dropped (fastest, slowest or failed)", "Olympic mean (10.00 min)"]


@pytest.mark.django_db
def test_an_unpublished_round_never_reaches_anonymous_callers(client: Client, embargoed) -> None:
    assert client.get("/rounds/training-v9.1/charts/scale.json?benchmark=resnet").status_code == 404
    assert client.get("/rounds/training-v9.1/charts/").status_code == 404
    assert client.get(f"/results/{embargoed.pk}/convergence.json").status_code == 404
    assert client.get(f"/results/{embargoed.pk}/runs.json").status_code == 404
    history = client.get("/benchmarks/resnet/history.json?scale=8").content.decode()
    assert "v9.1" not in history and "ACME-8-NEXT" not in history


@pytest.mark.django_db
def test_cached_answers_do_not_leak_between_anonymous_and_members(client: Client, people, embargoed) -> None:
    url = "/benchmarks/resnet/history.json?scale=8"
    alice = signed_in(people.alice)

    def fastest_at_8(response) -> list:
        return response.json()["figure"]["data"][0]["y"]

    assert fastest_at_8(client.get(url)) == [30.0]  # fills the public cache
    member = alice.get(url)
    assert fastest_at_8(member) == [30.0, 12.0]
    assert member.json()["figure"]["layout"]["xaxis"]["categoryarray"] == ["v9.0", "v9.1 (embargoed)"]
    assert "private" in member["Cache-Control"] and "no-store" in member["Cache-Control"]
    assert fastest_at_8(client.get(url)) == [30.0]  # the member's answer was not cached for the public
    assert alice.get("/rounds/training-v9.1/charts/scale.json?benchmark=resnet").status_code == 200
    assert signed_in(people.dave).get(f"/results/{embargoed.pk}/convergence.json").status_code == 404


@pytest.mark.django_db
def test_history_splits_where_the_benchmark_model_changed(client: Client, people) -> None:
    for slug, ruleset, model, score in [("v1", "1.0.0", "SSD-ResNet34", 10.0), ("v2", "2.0.0", "RetinaNet", 40.0)]:
        round_ = RoundFactory(slug=f"training-{slug}", ruleset=ruleset)
        ssd = BenchmarkFactory(round=round_, key="ssd", name="SSD", model=model)
        _result(round_, ssd, people.acme, f"acme-{slug}", 8, score)
    body = client.get("/benchmarks/ssd/history.json?scale=8").json()
    assert [t["name"] for t in body["figure"]["data"][::2]] == ["Fastest on 8 accelerators — SSD-ResNet34",
                                                                "Fastest on 8 accelerators — RetinaNet"]
    assert any("SSD-ResNet34 → RetinaNet" in note for note in body["notes"])


@pytest.mark.django_db
def test_charts_page_has_a_container_per_chart_and_readable_tables(client: Client, published) -> None:
    response = client.get("/rounds/training-v9.0/charts/?benchmark=resnet")
    html = response.content.decode()
    assert response.status_code == 200
    for key in ("scale", "scaling", "spread", "history", "runs", "convergence"):
        assert f'data-chart="{key}"' in html
    assert f'src="/static/vendor/plotly-{plotly.__version__}.min.js"' in html and "charts.js" in html
    assert html.count("plotly-") == 1
    assert 'data-table="scaling"' in html and "75.0%" in html
    assert "<noscript>" in html
    assert "cdn." not in html


@pytest.mark.django_db
def test_charts_page_without_results_says_so(client: Client) -> None:
    RoundFactory(slug="training-v0.1")
    html = client.get("/rounds/training-v0.1/charts/").content.decode()
    assert "No scored results" in html and "data-chart" not in html


PLOTLY_URL = f"/static/vendor/plotly-{plotly.__version__}.min.js"


def test_plotly_js_is_served_from_the_package_in_development_and_cached_a_year(settings) -> None:
    # What DEBUG turns on: WhiteNoise looks files up through the staticfiles finders on each request.
    settings.WHITENOISE_USE_FINDERS = settings.WHITENOISE_AUTOREFRESH = True
    response = Client().get(PLOTLY_URL)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert "max-age=315360000" in response["Cache-Control"] and "immutable" in response["Cache-Control"]
    assert b"plotly.js" in b"".join(response.streaming_content)[:2000]
    again = Client().get(PLOTLY_URL, HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304


def test_plotly_js_is_collected_for_production_and_served_compressed(settings, tmp_path) -> None:
    from django.core.management import call_command

    settings.STATIC_ROOT = tmp_path
    settings.WHITENOISE_USE_FINDERS = False  # as in production, whatever DEBUG says
    settings.STATICFILES_FINDERS = ["leaderboard.static_files.PlotlyFinder"]  # collect only plotly.js: fast
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"}}
    call_command("collectstatic", interactive=False, verbosity=0)
    assert (tmp_path / "vendor" / f"plotly-{plotly.__version__}.min.js.gz").is_file()

    response = Client().get(PLOTLY_URL, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "immutable" in response["Cache-Control"]
    assert b"plotly.js" in gzip.decompress(b"".join(response.streaming_content))[:2000]


@pytest.mark.django_db
def test_convergence_partial_needs_only_the_result(published) -> None:
    from django.template.loader import render_to_string

    _, small = published
    html = render_to_string("leaderboard/_convergence.html", {"result": small})
    assert f'data-src="/results/{small.pk}/convergence.json"' in html and 'data-chart="convergence"' in html
    assert PLOTLY_URL in html and "charts.js" in html
    assert "75.90% top-1 accuracy" in html


def _reads_scales(sql: str) -> bool:
    return sql.startswith('SELECT DISTINCT "ingest_result"."round_id"')


def _scale_options(client: Client, slug: str = "training-v9.0") -> list[int]:
    page = client.get(f"/rounds/{slug}/charts/?benchmark=resnet").content.decode()
    select = page.split('id="option-scale"', 1)[1].split("</select>", 1)[0]
    return [int(value) for value in re.findall(r'<option value="(\d+)"', select)]


@pytest.mark.django_db
def test_the_scale_choices_are_every_rounds_kept_round_by_round(people, published, embargoed,
                                                                django_capture_on_commit_callbacks) -> None:
    """Every round's accelerator counts the visitor may see (the embargoed round's only to its submitter),
    each round's kept in the cache: a second page reads none again, a result stored in one round reads that
    round again."""
    from core.cache import bump_generation

    alice, dave = signed_in(people.alice), signed_in(people.dave)
    _result(embargoed.round, embargoed.benchmark, people.acme, "acme-128-next", 128, 4.0)
    assert _scale_options(alice) == [8, 16, 64, 128]  # the embargoed round's 128 is Acme's
    assert _scale_options(dave) == [8, 16, 64]
    with CaptureQueriesContext(connection) as again:
        assert _scale_options(alice) == [8, 16, 64, 128]
    assert not any(_reads_scales(q["sql"]) for q in again.captured_queries)
    round_, _ = published
    with django_capture_on_commit_callbacks(execute=True):
        _result(round_, round_.benchmarks.get(key="resnet"), people.zeta, "zeta-256", 256, 2.0)
        bump_generation(round_id=round_.pk)
    with CaptureQueriesContext(connection) as after:
        assert _scale_options(dave) == [8, 16, 64, 256]
    read = [q["sql"] for q in after.captured_queries if _reads_scales(q["sql"])]
    assert len(read) == 1 and f'"round_id" IN ({round_.pk})' in read[0]


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["²", "١٦", "①"])
def test_a_scale_or_result_in_digits_int_refuses_or_other_scripts_is_no_number(client: Client, published,
                                                                             value: str) -> None:
    """str.isdigit() holds for '²' and int() refuses it: the charts page and history.json answered 500.
    Now the page falls back to its default scale and selection, the JSON says what scale must be."""
    page = client.get("/rounds/training-v9.0/charts/", {"benchmark": "resnet", "scale": value, "result": value})
    assert page.status_code == 200 and 'data-chart="history"' in page.content.decode()
    history = client.get("/benchmarks/resnet/history.json", {"scale": value})
    assert history.status_code == 400 and "scale must be a whole number" in history.json()["error"]
