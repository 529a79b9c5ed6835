"""What a checker child sends back to its parent: only what it added since its last answer."""

import pytest

from ingest.engine.sent_back import SentBack


def test_fresh_is_what_was_added_since_mark() -> None:
    kept = SentBack()
    for n in range(500):  # a preloaded process keeps hundreds of entries
        kept[("rules", n)] = n
    kept.mark()
    assert kept.fresh() == {}
    kept[("rules", 3)] = "again"  # replaced, not added: the parent has the key
    kept[("means", 1)] = 1.5
    kept[("means", 2)] = 2.5
    assert kept.fresh() == {("means", 1): 1.5, ("means", 2): 2.5}
    kept.mark()
    assert kept.fresh() == {}
    assert len(kept) == 502


def test_merge_keeps_new_entries_within_the_limit() -> None:
    parent = SentBack(limit=3)
    parent["a"] = 1
    assert parent.merge({"a": 9, "b": 2, "c": 3, "d": 4}) == ["b", "c"]
    assert dict(parent) == {"a": 1, "b": 2, "c": 3}
    assert parent.merge(None) == []


def test_forget_empties_and_nothing_added_before_is_fresh() -> None:
    kept = SentBack()
    kept["x"] = 1
    kept.forget()
    assert len(kept) == 0 and kept.fresh() == {}
    kept["y"] = 2
    assert kept.fresh() == {"y": 2}


@pytest.mark.parametrize("way_in", [lambda kept: kept.update({"k": 1}), lambda kept: kept.setdefault("k", 1)])
def test_entries_that_would_go_unnoted_are_refused(way_in) -> None:
    kept = SentBack()
    with pytest.raises(TypeError):
        way_in(kept)
    assert len(kept) == 0
