"""Whole numbers read from addresses and forms.

Why not `text.isdigit()` then `int(text)`: isdigit() holds for characters int() refuses ('²', '³', '①'), so
that pair raised on `?scale=²` or `?line=²` (a 500 in four views); and int() takes other scripts' digits
('١٢'), which no link of Podium's writes. Only ASCII digits count here.
"""

from __future__ import annotations


def ascii_whole(text: str | None, *, max_digits: int = 18) -> int | None:
    """`text` as a non-negative whole number written in ASCII digits (surrounding blanks allowed), at most
    `max_digits` of them; None for anything else."""
    if text is None:
        return None
    digits = text.strip()
    if not digits or len(digits) > max_digits or not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits)
