"""The round charts draw a bounded selection, chosen in SQL, whatever the size of the round: the scale
chart the fastest result of each submitter at each scale (its Pareto front is the one over every
result), the scaling chart the families with the most sizes, the spread chart the steadiest and the
least steady results; each says what it left out. The caps are made small here to reach them."""

from __future__ import annotations

import pytest
from django.test import Client

from catalog.models import Round
from ingest.models import Result, System
from leaderboard import chart_views, charts
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, SystemFactory
from tests.people import People, make_people

pytestmark = pytest.mark.django_db

URL = "/rounds/bounded-v1.0/charts/{}.json?benchmark=resnet"


def _result(round_: Round, organization, accelerators: int, score: float, *, cv: float | None = None,
            model: str = "Fictional X100") -> Result:
    system = SystemFactory(round=round_, organization=organization, accelerator_count=accelerators,
                           accelerator_model_name=model, division=System.Division.CLOSED)
    return ResultFactory(system=system, benchmark=round_.benchmarks.get(), score=score, submitter=organization.name,
                         accelerator_count=accelerators, accelerator_model=model, runs_cv=cv)


@pytest.fixture
def people() -> People:
    return make_people()


@pytest.fixture
def round_() -> Round:
    round_ = RoundFactory(slug="bounded-v1.0")
    BenchmarkFactory(round=round_, key="resnet")
    return round_


def test_scale_draws_each_submitter_s_fastest_per_scale_and_the_same_front(round_: Round, people: People) -> None:
    made = [_result(round_, people.acme, 8, 30.0), _result(round_, people.acme, 8, 20.0),
            _result(round_, people.acme, 64, 9.0), _result(round_, people.zeta, 8, 25.0),
            _result(round_, people.zeta, 64, 8.0), _result(round_, people.zeta, 64, 12.0)]
    body = Client().get(URL.format("scale")).json()
    drawn = {row[1] for row in body["table"]["rows"]}
    assert drawn == {made[1].system.name, made[2].system.name, made[3].system.name, made[4].system.name}
    every = [charts.ResultPoint(id=r.pk, url="", submitter=r.submitter, system=r.system.name, accelerator_model="",
                                accelerators=r.accelerator_count, hosts=1, minutes=r.score) for r in made]
    front = next(t for t in body["figure"]["data"] if t["name"].startswith("Pareto"))
    assert [row[1] for row in front["customdata"]] == [p.system for p in charts.pareto_front(every)]
    assert any("4 points for 6 results" in note for note in body["notes"])


def test_scale_draws_the_front_then_each_scale_s_fastest_up_to_its_cap(round_: Round, people: People,
                                                                       monkeypatch) -> None:
    monkeypatch.setattr(chart_views, "SCALE_POINTS", 3)
    omega = people.omega
    made = {
        "acme 8": _result(round_, people.acme, 8, 30.0),  # first at 8 and on the front
        "zeta 8": _result(round_, people.zeta, 8, 35.0),  # second at 8
        "omega 8": _result(round_, omega, 8, 50.0),  # third at 8
        "zeta 64": _result(round_, people.zeta, 64, 9.0),  # first at 64, on the front
        "acme 64": _result(round_, people.acme, 64, 40.0),  # second at 64, slower than zeta's 8
        "omega 64": _result(round_, omega, 64, 60.0),  # third at 64
    }
    body = Client().get(URL.format("scale")).json()
    drawn = {row[1] for row in body["table"]["rows"]}
    # The front (two first places), then the faster of the two second places.
    assert drawn == {made[name].system.name for name in ("acme 8", "zeta 64", "zeta 8")}
    front = next(t for t in body["figure"]["data"] if t["name"].startswith("Pareto"))
    assert [row[1] for row in front["customdata"]] == [made["acme 8"].system.name, made["zeta 64"].system.name]
    assert any("3 of the 6 points are drawn" in note for note in body["notes"])


def test_the_scale_cap_keeps_the_front_before_other_first_places() -> None:
    def point(id: int, accelerators: int, minutes: float) -> charts.ResultPoint:
        return charts.ResultPoint(id=id, url="", submitter=f"s{id}", system=f"sys-{id}", accelerator_model="X",
                                  accelerators=accelerators, hosts=1, minutes=minutes)

    # Four scales, each with one point: all first places, but only 8, 16 and 64 are on the front.
    points = [point(1, 8, 50.0), point(2, 16, 40.0), point(3, 32, 45.0), point(4, 64, 10.0), point(5, 8, 60.0)]
    kept = charts.scale_points_to_draw(points, 3)
    assert [p.id for p in kept] == [1, 2, 4]  # in the order given
    assert [p.id for p in charts.scale_points_to_draw(points, 4)] == [1, 2, 3, 4]
    assert charts.scale_points_to_draw(points, 5) == points


def test_scaling_draws_the_families_with_the_most_sizes(round_: Round, people: People, monkeypatch) -> None:
    monkeypatch.setattr(chart_views, "SCALING_FAMILIES", 1)
    for accelerators, score in ((8, 40.0), (16, 22.0), (64, 7.0)):
        _result(round_, people.acme, accelerators, score)
    _result(round_, people.acme, 16, 30.0)  # a slower twin: the family's 16 is the fastest one
    for accelerators, score in ((8, 50.0), (16, 30.0)):
        _result(round_, people.zeta, accelerators, score)
    body = Client().get(URL.format("scaling")).json()
    assert [(row[0].split(" · ")[0], row[2], row[3]) for row in body["table"]["rows"]] == [
        (people.acme.name, "8", "40.00"), (people.acme.name, "16", "22.00"), (people.acme.name, "64", "7.00")]
    assert any("The 1 families with the most sizes are drawn, of 2" in note for note in body["notes"])


def test_spread_draws_the_steadiest_and_the_least_steady(round_: Round, people: People, monkeypatch) -> None:
    monkeypatch.setattr(chart_views, "SPREAD_BARS", 4)
    for i in range(7):
        _result(round_, people.acme if i % 2 else people.zeta, 8, 10.0 + i, cv=0.01 * (i + 1))
    _result(round_, people.acme, 16, 5.0, cv=None)
    body = Client().get(URL.format("spread")).json()
    assert body["figure"]["data"][0]["x"] == pytest.approx([1.0, 2.0, 6.0, 7.0])
    assert any("The 2 steadiest and the 2 least steady of 7 results" in note for note in body["notes"])
    assert any("1 result(s) have fewer than two successful runs" in note for note in body["notes"])


def test_a_round_within_the_caps_is_drawn_whole(round_: Round, people: People) -> None:
    for i in range(5):
        _result(round_, people.acme, 8 * 2**i, 40.0 / (i + 1), cv=0.01 * (i + 1))
    spread = Client().get(URL.format("spread")).json()
    assert len(spread["figure"]["data"][0]["x"]) == 5
    assert not any("steadiest" in note for note in spread["notes"])
    scale = Client().get(URL.format("scale")).json()
    assert len(scale["table"]["rows"]) == 5 and not any("points for" in note for note in scale["notes"])
