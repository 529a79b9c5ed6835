"""The one rule for how Podium prints numbers a person reads (pure functions, no Django import).

- Minutes (scores, run times): two decimals with thousands separators, `12.948949999999998` → `12.95`,
  `1234.5` → `1,234.50`. MLCommons publishes scores with two decimals, and a fixed number of decimals
  keeps a right-aligned column lined up on its decimal point; below 0.1 min, where two decimals would
  read `0.00`, two significant digits (`0.0042`).
- Energy: kWh with three significant digits (`1.23 kWh`, `12.3 kWh`, `123 kWh`, `1,234 kWh`): the power
  logs are not more precise than that.
- Derived figures (accelerator-minutes, ratios): three significant digits, never fewer than the integer
  part (`figure`).
- Counts: whole numbers with thousands separators (`1,024`).
- Missing or non-finite values print as an em dash.

The exact value goes on hover (`exact`, for a `title` attribute) and into the exports, which keep the raw
numbers. A derivation (the result page's "how the score is computed") prints its terms with `trimmed`:
enough digits to recompute by hand, none of the floating-point noise. Template filters of the same names
live in leaderboard/templatetags/podium.py.
"""

from __future__ import annotations

import math
import re
from typing import Any

MISSING = "—"
MINUTE_DECIMALS = 2
ENERGY_DIGITS = 3
FIGURE_DIGITS = 3
JOULES_PER_KWH = 3.6e6

# What submitters write in a system description when there is no accelerator.
_NO_MODEL = {"", "n/a", "na", "none", "null", "-", "—", "unknown", "not applicable"}


def _finite(value: Any) -> float | None:
    # The stored types first: a chart of a large round formats thousands of them per request.
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int:
        return float(value)
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def significant(value: float, digits: int) -> str:
    """`value` rounded to `digits` significant digits, with thousands separators; no exponent notation."""
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - magnitude, 0)
    text = f"{round(value, decimals):,.{decimals}f}"
    return text


def minutes(value: Any) -> str:
    if type(value) is float and 0.1 <= value < math.inf:  # the common case, at once
        return f"{value:,.{MINUTE_DECIMALS}f}"
    number = _finite(value)
    if number is None:
        return MISSING
    if number != 0 and abs(number) < 0.1:
        return significant(number, 2)
    return f"{number:,.{MINUTE_DECIMALS}f}"


def energy(joules: Any) -> str:
    """Joules (as stored) shown as kWh."""
    number = _finite(joules)
    if number is None:
        return MISSING
    return f"{significant(number / JOULES_PER_KWH, ENERGY_DIGITS)} kWh"


def figure(value: Any, digits: int = FIGURE_DIGITS) -> str:
    number = _finite(value)
    if number is None:
        return MISSING
    return significant(number, digits)


def percent(fraction: Any, decimals: int = 1) -> str:
    number = _finite(fraction)
    return MISSING if number is None else f"{number * 100:,.{decimals}f}%"


def count(value: Any) -> str:
    if type(value) is int:  # the common case, at once
        return f"{value:,d}"
    number = _finite(value)
    if number is None:
        return MISSING
    return f"{round(number):,d}"


def exact(value: Any) -> str:
    """The stored value, every digit: what a reader needs to recompute a score by hand."""
    if value is None:
        return MISSING
    if isinstance(value, float):
        return repr(value)
    return str(value)


TRIMMED_DIGITS = 12


def trimmed(value: Any) -> str:
    """A stored value for a derivation a reader recomputes by hand, without binary floating-point noise:
    rounded to 12 significant digits and printed in the shortest form that reads back the same
    (`12.948949999999998` → `12.94895`, `10.0` → `10.0`, `1.02` → `1.02`). `exact` keeps every digit."""
    number = _finite(value)
    if number is None:
        return MISSING
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return repr(float(f"{number:.{TRIMMED_DIGITS}g}"))


def has_model(model: Any) -> bool:
    return isinstance(model, str) and model.strip().lower() not in _NO_MODEL


def scale(accelerators: Any, model: Any, hosts: Any) -> str:
    """"8 × H100 on 1 host"; "Scale not given" instead of "0 × N/A on 1 host"."""
    n = _finite(accelerators)
    h = _finite(hosts)
    on_hosts = f" on {count(h)} host{'' if h == 1 else 's'}" if h is not None and h > 0 else ""
    if n is None or n <= 0:
        return "Scale not given"
    name = model.strip() if has_model(model) else "accelerators (model not given)"
    return f"{count(n)} × {name}{on_hosts}"


_WORD_BOUNDARY = re.compile(r"[_\-]+")


def human_label(key: Any) -> str:
    """A readable label for a machine key with no declared label: `system_type` → "System type"."""
    if key is None or key == "":
        return MISSING
    words = _WORD_BOUNDARY.sub(" ", str(key)).strip()
    return words[:1].upper() + words[1:]
