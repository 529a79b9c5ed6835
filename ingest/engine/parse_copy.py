"""A copy of what mlperf-logging's parser returned for a log, which no edit of the original can reach.

tool._ParseReuse hands the seed checker the parse the compliance checker got, so the copy must be taken before
any checker sees the original. A pickle of the whole parse did that, but it was the dearest step left in a
checker child on the way to an upload's verdict (6.5 ms to take and 7 ms to read back for a real 10-log BERT
item). The parser's records hold five fields (`full_string`, `timestamp`, `key`, `value`, `lineno`): the line's
text, a float and a line number are immutable and are shared, not copied; only the key and the value, which
the JSON decoder made and a checker could change in place, are copied, with `marshal` (the C serializer of
Python's own types, which is all `json.loads` makes: 2.0 ms to take, 3.6 to read back). Anything else (another
record type, a value marshal refuses, nesting past its depth) is pickled, as before.
"""

from __future__ import annotations

import dataclasses
import marshal
import pickle
from typing import Any, NamedTuple

# The record fields of every ruleset's parser in the pinned package (a namedtuple up to 3.0.0, a dataclass
# since), in the order their constructors take them.
FIELDS = ("full_string", "timestamp", "key", "value", "lineno")


class Copy(NamedTuple):
    size: int  # bytes held, about (what tool._ParseReuse counts against its limit)
    pickled: bool  # `data` is a pickle of the whole parse; the fields below are unused
    record: type | None  # the parser's record type (None: there is no record)
    shared: list[tuple[str, float, int]]  # each record's immutable fields
    data: bytes  # marshal of each record's (key, value), or the pickle
    failed: tuple[tuple[str, str], ...]  # the parser's (line, error) pairs


def take(parsed: Any) -> Copy | None:
    """A copy of `parsed` (the parser's (records, failures)), or None where none can be taken (the caller
    parses again next time, as the library would)."""
    quick = _marshalled(parsed)
    if quick is not None:
        return quick
    try:
        data = pickle.dumps(parsed, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # nesting too deep to pickle
        return None
    return Copy(len(data), True, None, [], data, ())


def restore(copy: Copy) -> Any:
    """A fresh parse equal to the one copied: new records, keys and values; each call its own."""
    if copy.pickled:
        return pickle.loads(copy.data)
    make = copy.record
    mutable = marshal.loads(copy.data)
    if make is None:  # no record was copied
        return [], list(copy.failed)
    records = [make(text, stamp, key, value, line) for (text, stamp, line), (key, value) in zip(copy.shared, mutable,
                                                                                                 strict=True)]
    return records, list(copy.failed)


def _marshalled(parsed: Any) -> Copy | None:
    if not (type(parsed) is tuple and len(parsed) == 2 and type(parsed[0]) is list and type(parsed[1]) is list):
        return None
    records, failed = parsed
    record = type(records[0]) if records else None
    if record is not None and not (_fields(record) == FIELDS and all(type(r) is record for r in records)):
        return None
    if not all(type(f) is tuple and len(f) == 2 and type(f[0]) is str and type(f[1]) is str for f in failed):
        return None
    shared = [(r.full_string, r.timestamp, r.lineno) for r in records]
    # What is shared must be immutable: the parser makes them so (str, float(...), enumerate's int); a record
    # made otherwise is pickled instead.
    if not all(type(t) is str and type(s) is float and type(n) is int for t, s, n in shared):
        return None
    try:
        data = marshal.dumps([(r.key, r.value) for r in records])
    except ValueError:  # a type marshal refuses, or nesting past its depth (2,000; the parser's json stops at 1,000)
        return None
    size = len(data) + sum(len(t) for t, _, _ in shared) + sum(len(a) + len(b) for a, b in failed)
    return Copy(size, False, record, shared, data, tuple(failed))


def _fields(record: type) -> tuple[str, ...] | None:
    if dataclasses.is_dataclass(record):
        return tuple(f.name for f in dataclasses.fields(record))
    fields = getattr(record, "_fields", None)  # a namedtuple
    return tuple(fields) if isinstance(fields, tuple) and issubclass(record, tuple) else None
