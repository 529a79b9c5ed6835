"""An item's logs are taken in natural order (result_2 before result_10), whatever their names hold: a name
with a character that is a digit to str.isdigit() but not a number to int() ('²') crashed the parse, and names
whose numbers read alike (result_1, result_01, other scripts' digits) sort one way, not in the folder's order."""

from __future__ import annotations

from pathlib import Path

from ingest.engine.tree import items_of


def _item(tmp_path: Path, names: list[str]) -> list[str]:
    org = tmp_path / "org"
    bench = org / "results" / "box" / "resnet"
    bench.mkdir(parents=True)
    (org / "systems").mkdir()
    (org / "systems" / "box.json").write_text("{}")
    for name in names:
        (bench / name).write_text("")
    (item,) = items_of(org)
    return [path.name for path in item.result_files]


def test_logs_come_in_natural_order(tmp_path: Path) -> None:
    names = ["result_10.txt", "result_2.txt", "result_0.txt", "result_1.txt"]
    assert _item(tmp_path, names) == ["result_0.txt", "result_1.txt", "result_2.txt", "result_10.txt"]


def test_odd_digits_in_a_log_s_name_do_not_crash_the_parse(tmp_path: Path) -> None:
    names = ["result_1²1.txt", "result_².txt", "result_١٢.txt", "result_12.txt", "result_01.txt", "result_1.txt"]
    first = _item(tmp_path / "a", names)
    assert sorted(first) == sorted(names)
    # The same files created in the other order: the same order.
    assert _item(tmp_path / "b", names[::-1]) == first
    assert first.index("result_1.txt") < first.index("result_12.txt")
