"""Row addresses from one reversal (leaderboard.addresses) are the URLs reverse() gives, under any script prefix."""

from __future__ import annotations

import pytest
from django.urls import clear_script_prefix, reverse, set_script_prefix

from leaderboard.addresses import around_id, template


@pytest.mark.parametrize(("view", "arg"), [("leaderboard:result", 1), ("leaderboard:system", 987654320),
                                           ("leaderboard:organization", "acme-2_b"), ("api:result-detail", 42)])
@pytest.mark.parametrize("prefix", ["/", "/podium/"])
def test_an_address_made_from_the_template_is_the_reversed_one(view: str, arg: object, prefix: str) -> None:
    set_script_prefix(prefix)
    try:
        before, after = around_id(view)
        assert template(view).format(arg) == f"{before}{arg}{after}" == reverse(view, args=[arg])
        assert reverse(view, args=[arg]).startswith(prefix)
    finally:
        clear_script_prefix()
