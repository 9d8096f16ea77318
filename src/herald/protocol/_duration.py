"""Go-style duration strings (``1m0s``, ``1h30m``, ``10ms``), as Gazette's YAML uses.

Durations are float seconds in Herald; these convert to and from Go's text form
through integer nanoseconds so formatting is exact.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from herald.protocol.errors import ValidationError

_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_RE_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def _fraction(value: int, digits: int) -> str:
    whole, rest = divmod(value, 10**digits)
    frac = str(rest).rjust(digits, "0").rstrip("0")
    return f"{whole}.{frac}" if frac else str(whole)


def format_duration(seconds: float) -> str:
    """Format like Go's ``time.Duration.String``: ``60`` → ``"1m0s"``."""
    ns = round(seconds * 1_000_000_000)
    if ns == 0:
        return "0s"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_fraction(ns, 3)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_fraction(ns, 6)}ms"
    minutes, sec_ns = divmod(ns, _UNIT_NS["m"])
    hours, minutes = divmod(minutes, 60)
    out = f"{_fraction(sec_ns, 9)}s"
    if minutes or hours:
        out = f"{minutes}m{out}"
    if hours:
        out = f"{hours}h{out}"
    return sign + out


#: Go's ``time.Duration`` is int64 nanoseconds: about 292 years either way.
MAX_DURATION_NS = (1 << 63) - 1


def parse_duration(text: str | float | int, field: str | None = None) -> float:
    """Parse a Go duration string (or a plain number of seconds) to float seconds.
    Raises `ValidationError` for anything else, e.g. a unitless ``"300"``, and for a
    duration Go could not hold (beyond ±292 years, NaN, infinite)."""
    if isinstance(text, bool):
        raise ValidationError(field, f"invalid duration ({text!r})")
    if isinstance(text, (int, float)):
        return _in_range(Fraction(text) * 1_000_000_000 if math.isfinite(text) else None, text, field)
    if not isinstance(text, str):
        raise ValidationError(field, f"invalid duration ({text!r})")
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    total, pos = Fraction(0), 0
    while pos < len(body):
        m = _RE_PART.match(body, pos)
        if not m:
            raise ValidationError(field, f"invalid duration ({text!r}; e.g. 1m0s, 300s, 10ms)")
        total += Fraction(m[1]) * _UNIT_NS[m[2]]
        pos = m.end()
    if pos == 0:
        raise ValidationError(field, f"invalid duration ({text!r})")
    return _in_range(sign * total, text, field)


def _in_range(ns: Fraction | None, text: object, field: str | None) -> float:
    if ns is None or abs(ns) > MAX_DURATION_NS:
        raise ValidationError(field, f"duration out of range ({text!r}; at most 2562047h47m16s)")
    return float(ns / 1_000_000_000)
