"""Figures, and the charts page's rendered parts, are kept for signed-in visitors too (leaderboard.cache.cached_for):
under what the visitor may see beyond the public record, so a member's figure holding embargoed results of
their organization reaches only visitors granted exactly as much, and under the addresses' prefix."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import clear_script_prefix, set_script_prefix

from core.cache import bump_generation
from leaderboard import chart_views
from tests.leaderboard.test_charts import embargoed, people, published, signed_in  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

HISTORY = "/benchmarks/resnet/history.json?scale=8"
PAGE = "/rounds/training-v9.0/charts/?benchmark=resnet&scale=8"


def _sees_the_embargoed_round(client: Client) -> tuple[bool, bool]:
    """Whether the history figure and the charts page's history part hold the embargoed round's result."""
    figure = client.get(HISTORY)
    page = client.get(PAGE)
    assert figure.status_code == 200 and page.status_code == 200
    part = page.content.decode().split('id="chart-history"')[1].split("</section>")[0]
    return "12.0" in str(figure.json()["figure"]["data"][0]["y"]), "v9.1" in part


def test_a_members_kept_figures_reach_only_visitors_granted_as_much(people, embargoed) -> None:  # noqa: F811
    # Alice (Acme, which submitted to the round under review) first: her figures hold Acme's embargoed result.
    assert _sees_the_embargoed_round(signed_in(people.alice)) == (True, True)
    assert _sees_the_embargoed_round(Client()) == (False, False)
    assert _sees_the_embargoed_round(signed_in(people.carol)) == (False, False)  # Zeta did not submit
    assert _sees_the_embargoed_round(signed_in(people.dave)) == (False, False)
    assert _sees_the_embargoed_round(signed_in(people.alice)) == (True, True)
    member = signed_in(people.alice).get(HISTORY)
    assert "private" in member["Cache-Control"] and "no-store" in member["Cache-Control"]


def test_a_figure_is_built_once_per_grant_and_again_after_a_change(monkeypatch, people, published,  # noqa: F811
                                                                    django_capture_on_commit_callbacks) -> None:
    built: list[str] = []
    real = chart_views.scale_data

    def counted(user, *args, **kwargs):
        built.append(user.username or "anonymous")
        return real(user, *args, **kwargs)

    monkeypatch.setattr(chart_views, "scale_data", counted)
    alice = signed_in(people.alice)
    first = alice.get(PAGE).content
    assert alice.get(PAGE).status_code == 200
    assert alice.get("/rounds/training-v9.0/charts/scale.json?benchmark=resnet").status_code == 200
    assert built == ["alice"]  # the page's part, then the JSON endpoint, from the kept figure
    assert b'id="chart-scale"' in first
    signed_in(people.carol).get(PAGE)
    Client().get(PAGE)
    assert built == ["alice", "carol", "anonymous"]
    with django_capture_on_commit_callbacks(execute=True):
        bump_generation(round_id=published[0].pk)
    alice.get(PAGE)
    assert built[3:] == ["alice"], built


def test_a_kept_figure_carries_the_prefix_it_was_made_under(people, published) -> None:  # noqa: F811
    alice = signed_in(people.alice)
    url = "/rounds/training-v9.0/charts/scale.json?benchmark=resnet"
    plain = alice.get(url).content.decode()
    try:
        set_script_prefix("/podium/")
        prefixed = alice.get(url).content.decode()
    finally:
        clear_script_prefix()
    assert '"/podium/results/' in prefixed and '"/results/' not in prefixed
    assert '"/results/' in plain and "/podium/" not in plain
