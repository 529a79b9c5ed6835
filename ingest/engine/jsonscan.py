"""Decoding untrusted JSON without being fooled by it: every oddity the standard decoder lets through
silently is returned as an `Anomaly`, and the value handed back holds nothing a database refuses.

`json.loads` keeps the *last* of two equal keys, reads `NaN`, `Infinity` and `1e400` as non-finite
floats, turns a 4,000-digit integer into an int no column can hold and raises a bare `ValueError`
(not a `JSONDecodeError`) past 4,300 digits. Here duplicate keys are reported (the last value is
kept, as mlperf-logging keeps it, so Podium reads what the checker reads), and non-finite numbers,
integers outside PostgreSQL's bigint and containers nested deeper than `MAX_DEPTH` are replaced by
None and reported with their path.

Most text holds none of these, and is decoded by orjson (with the checks that vouch for it, ~2.5x faster than the
standard decoder with the hooks below) where nothing it read could differ from what the standard decoder reads:
see `_quick`.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from typing import Any

import orjson

DUPLICATE_KEY = "duplicate-key"
NON_FINITE = "non-finite"
NUMBER_RANGE = "number-range"
TOO_DEEP = "too-deep"

# PostgreSQL bigint; jsonb would hold more, but no count, seed or timestamp of a training run needs it,
# and clients reading the API as JavaScript lose precision far below it.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
# Real MLLOG values and system descriptions nest three levels at most; deeper JSON only costs stack
# when it is stored and served (serializers recurse).
MAX_DEPTH = 32
# Python refuses to convert longer digit strings to int (sys.get_int_max_str_digits, 3.11+).
_MAX_INT_DIGITS = 4300


@dataclass(frozen=True)
class Anomaly:
    kind: str
    path: tuple[str | int, ...]  # () for the top-level value
    detail: str

    @property
    def where(self) -> str:
        return path_text(self.path)


def path_text(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


class _Bad:
    """Stands in for a number that cannot be kept, until the walk records where it was."""

    __slots__ = ("detail", "kind")

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail


class _Object(dict):  # type: ignore[type-arg]
    """A decoded object that remembers which of its keys were repeated."""

    __slots__ = ("repeated",)


class _Seen(threading.local):
    """Counts, per thread, what the decoder met that `clean` must see: a _Bad, an object with repeated keys."""

    count = 0


_SEEN = _Seen()


def _bad(kind: str, detail: str) -> _Bad:
    _SEEN.count += 1
    return _Bad(kind, detail)


# The hooks below are handed to the decoder as they are (no wrapper around them: a log line calls them a
# few times each, and each Python call in between was a tenth of its decoding) and count what they return
# that `clean` must see.


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    marked = _Object(pairs)
    seen: dict[str, int] = {}
    for key, _ in pairs:
        seen[key] = seen.get(key, 0) + 1
    marked.repeated = {k: n for k, n in seen.items() if n > 1}
    _SEEN.count += 1
    return marked


def _int(text: str) -> int | _Bad:
    if len(text) < 19:  # 18 digits at most: inside 64 bits
        return int(text)
    digits = len(text.lstrip("-"))
    if digits > _MAX_INT_DIGITS:
        return _bad(NUMBER_RANGE, f"an integer of {digits} digits")
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        return _bad(NUMBER_RANGE, f"an integer of {digits} digits, outside the 64-bit range")
    return value


def _float(text: str) -> float | _Bad:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        return _bad(NON_FINITE, f"{shown} overflows to {value}")
    return value


def _constant(text: str) -> _Bad:
    return _bad(NON_FINITE, text)  # NaN, Infinity, -Infinity: not JSON, but Python reads them


# One decoder for every call (json.loads builds one per call when given hooks: a tenth of the time of a log line).
_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_int=_int, parse_float=_float, parse_constant=_constant)


def loads(text: str | bytes) -> tuple[Any, list[Anomaly]]:
    """Decode like `json.loads` (same exceptions for malformed text: JSONDecodeError, RecursionError)
    and return the cleaned value with what was cleaned."""
    # What json.loads does before it decodes, word for word.
    if isinstance(text, str):
        if text.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        decoded = text
    elif isinstance(text, bytes | bytearray):
        decoded = text.decode(json.detect_encoding(text), "surrogatepass")
    else:
        return loads(json.loads(text))  # raises json.loads's own TypeError
    quick = _quick(decoded)
    if quick is not _UNSURE:
        return quick, []
    _SEEN.count = 0
    raw = _DECODER.decode(decoded)
    # Nothing to clean (a text _quick could not vouch for, yet clean): nothing met, and fewer brackets than
    # MAX_DEPTH in the whole text, so nothing nests that deep either; the decoder built plain dicts and lists.
    if not _SEEN.count and decoded.count("[") + decoded.count("{") < MAX_DEPTH:
        return raw, []
    return clean(raw)


_UNSURE = object()
# orjson reads an integer past 64 bits as a float: a float this large may have been written as an integer.
_FLOAT_BOUND = float(2**63)


def _quick(text: str) -> Any:
    """What `loads` returns for `text` when nothing in it needs cleaning, decoded by orjson; _UNSURE where that
    cannot be shown cheaply (the standard decoder then reads it, and raises or reports what it must).

    orjson refuses what the standard decoder reads as a non-finite number (NaN, Infinity, 1e400), lone surrogates
    and nesting past 1,024 levels (_UNSURE: the standard decoder decides). What it accepts it reads as the standard
    decoder does (the same values, types and key order; tests/ingest/engine/test_jsonscan_quick.py holds the two
    against each other), except that it keeps the last of two equal keys silently and reads an integer past 64 bits
    as a float. So the value is taken only if (1) nothing nests MAX_DEPTH deep, every integer is within bigint and
    no float reaches 2**63 (`_plain_keys`), and (2) the objects hold as many keys as the text holds colons: every
    key is followed by a colon of its own, so the text holds at least as many colons as keys, and a repeated key
    leaves its object one key short (a colon inside a string only sends the text to the standard decoder)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _UNSURE
    kind = type(value)
    if kind is dict or kind is list:
        if _plain_keys(value, 0) != text.count(":"):
            return _UNSURE
    elif kind is int:
        if not INT_MIN <= value <= INT_MAX:
            return _UNSURE
    elif kind is float and not -_FLOAT_BOUND < value < _FLOAT_BOUND:
        return _UNSURE
    return value


def _plain_keys(container: dict[str, Any] | list[Any], depth: int) -> int:
    """The keys of every object in `container` (at `depth`), or -1 where it holds what `clean` would change or
    orjson may have read otherwise (see _quick). Recursive, written for speed: it sees every value of every log
    line; the recursion ends at MAX_DEPTH."""
    if depth >= MAX_DEPTH:
        return -1
    if type(container) is dict:
        keys = len(container)
        values: Any = container.values()
    else:
        keys = 0
        values = container
    for value in values:
        kind = type(value)
        if kind is str:
            continue
        if kind is int:
            if value > INT_MAX or value < INT_MIN:
                return -1
        elif kind is dict or kind is list:
            inner = _plain_keys(value, depth + 1)
            if inner < 0:
                return -1
            keys += inner
        elif kind is float and not -_FLOAT_BOUND < value < _FLOAT_BOUND:
            return -1
    return keys


def storable(value: Any, depth: int = 0) -> bool:
    """True where `clean` would report nothing in `value` (its copy is then not needed); False where it may, and
    the caller cleans. For values that almost always hold nothing to clean (a run's hyperparameters, evaluation
    curve, seeds, read with `loads`), checked before they are stored: several times faster than `clean`, which
    copies as it looks. Conservative: a tuple, a subclass of a JSON type or a key that is not a string sends the
    value to `clean` too. Recursive, written for speed as `_plain_keys` is; the recursion ends at MAX_DEPTH."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return INT_MIN <= value <= INT_MAX
    if kind is float:
        return -math.inf < value < math.inf  # False for NaN too
    if kind is dict:  # exactly dict: an object with repeated keys (_Object) is clean's to report
        if depth >= MAX_DEPTH:
            return False
        for key in value:
            if type(key) is not str:
                return False
        items: Any = value.values()
    elif kind is list:
        if depth >= MAX_DEPTH:
            return False
        items = value
    else:
        return False
    for item in items:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if item > INT_MAX or item < INT_MIN:
                return False
        elif kind is float:
            if not -math.inf < item < math.inf:
                return False
        elif not storable(item, depth + 1):
            return False
    return True


def clean(value: Any) -> tuple[Any, list[Anomaly]]:
    """Any decoded JSON value (or one built in Python) made storable, and what was changed.

    Iterative, so a value nested as deep as the decoder allows cannot exhaust the stack here.
    """
    anomalies: list[Anomaly] = []
    root: list[Any] = [None]
    # (container to write into, its key or index, value to place, path, depth)
    stack: list[tuple[Any, Any, Any, tuple[str | int, ...], int]] = [(root, 0, value, (), 0)]
    while stack:
        parent, slot, item, path, depth = stack.pop()
        if isinstance(item, _Bad):
            anomalies.append(Anomaly(item.kind, path, item.detail))
            parent[slot] = None
        elif isinstance(item, bool) or item is None or isinstance(item, str):
            parent[slot] = item
        elif isinstance(item, int):
            if INT_MIN <= item <= INT_MAX:
                parent[slot] = item
            else:
                anomalies.append(Anomaly(NUMBER_RANGE, path, "an integer outside the 64-bit range"))
                parent[slot] = None
        elif isinstance(item, float):
            if math.isfinite(item):
                parent[slot] = item
            else:
                anomalies.append(Anomaly(NON_FINITE, path, repr(item)))
                parent[slot] = None
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                anomalies.append(Anomaly(TOO_DEEP, path, f"nested more than {MAX_DEPTH} levels"))
                parent[slot] = None
                continue
            if isinstance(item, dict):
                for key, count in getattr(item, "repeated", {}).items():
                    anomalies.append(Anomaly(DUPLICATE_KEY, (*path, str(key)),
                                             f"the key {str(key)!r} appears {count} times; the last one is read"))
                out: dict[str, Any] = {str(k): None for k in item}
                parent[slot] = out
                stack.extend((out, str(k), v, (*path, str(k)), depth + 1) for k, v in item.items())
            else:
                seq: list[Any] = [None] * len(item)
                parent[slot] = seq
                stack.extend((seq, i, v, (*path, i), depth + 1) for i, v in enumerate(item))
        else:
            anomalies.append(Anomaly(NUMBER_RANGE, path, f"a {type(item).__name__}, not a JSON value"))
            parent[slot] = None
    anomalies.sort(key=lambda a: tuple(str(p) for p in a.path))
    return root[0], anomalies
