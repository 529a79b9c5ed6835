"""The one number-formatting rule (leaderboard.formatting) and the template filters built on it."""

from __future__ import annotations

import math

import pytest
from django.template import Context, Template

from leaderboard import formatting


@pytest.mark.parametrize(("value", "shown"), [
    (12.948949999999998, "12.95"), (2.5, "2.50"), (1234.5, "1,234.50"), (0.0042317, "0.0042"), (0.0, "0.00"),
    (None, "—"), (math.nan, "—"), (math.inf, "—"), ("12.5", "12.50"), ("garbage", "—"), (True, "—"),
])
def test_minutes_have_two_decimals_and_never_print_float_noise(value, shown) -> None:
    assert formatting.minutes(value) == shown


@pytest.mark.parametrize(("joules", "shown"), [
    (3.6e6, "1.00 kWh"), (4.4388e6, "1.23 kWh"), (44.388e6, "12.3 kWh"), (443.88e6, "123 kWh"),
    (4443.88e6, "1,234 kWh"), (None, "—"), (math.nan, "—"),
])
def test_energy_is_kwh_with_three_significant_digits(joules, shown) -> None:
    assert formatting.energy(joules) == shown


@pytest.mark.parametrize(("value", "shown"), [
    (0.012345, "0.0123"), (9.85396, "9.85"), (98.5396, "98.5"), (985.396, "985"), (98539.6, "98,540"), (0, "0"),
    (-1.23456, "-1.23"),
])
def test_figures_have_three_significant_digits_and_keep_the_integer_part(value, shown) -> None:
    assert formatting.figure(value) == shown


def test_counts_have_thousands_separators() -> None:
    assert [formatting.count(v) for v in (1, 1024, 1_000_000, None, 8.0)] == ["1", "1,024", "1,000,000", "—", "8"]


def test_the_exact_value_keeps_every_digit() -> None:
    assert formatting.exact(12.948949999999998) == "12.948949999999998"
    assert formatting.exact(None) == "—" and formatting.exact(8) == "8"


@pytest.mark.parametrize(("args", "shown"), [
    ((8, "H100", 1), "8 × H100 on 1 host"),
    ((1024, "TPU v5p", 128), "1,024 × TPU v5p on 128 hosts"),
    ((0, "N/A", 1), "Scale not given"),
    ((None, "", None), "Scale not given"),
    ((16, "n/a", None), "16 × accelerators (model not given)"),
])
def test_scale_never_reads_zero_times_nothing(args, shown) -> None:
    assert formatting.scale(*args) == shown


def test_keys_without_a_declared_label_read_as_words() -> None:
    assert formatting.human_label("system_type") == "System type"
    assert formatting.human_label("cloud-scale") == "Cloud scale"
    assert formatting.human_label("") == "—"


def test_template_filters_use_the_same_rule() -> None:
    html = Template(
        "{% load podium %}<td class=\"num\" title=\"{{ v|exact }}\">{{ v|minutes }}</td> {{ j|energy }} "
        "{{ n|count }} {{ f|figure }} {% scale_text 0 'N/A' 1 %} {{ k|human }}"
    ).render(Context({"v": 12.948949999999998, "j": 4.4388e6, "n": 4096, "f": 9.85396, "k": "system_type"}))
    assert html == ('<td class="num" title="12.948949999999998">12.95</td> 1.23 kWh 4,096 9.85 Scale not given '
                    "System type")
