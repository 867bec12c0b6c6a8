"""Go-style durations (``"2s"``, ``"1m30s"``, ``"500ms"``, ``"1.5h"``).

``kubernetes.utils.duration`` is not used: it parses the narrower GEP-2257 format,
which rejects durations Go's ``time.ParseDuration`` accepts (``"1.5s"``, ``"250us"``,
``"0"``), and the CRD documents Go durations.
"""

import re
from fractions import Fraction
from typing import Final

_COMPONENT: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")
_NANOS_PER_UNIT: Final = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,  # micro sign
    "\u03bcs": 10**3,  # Greek small letter mu
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_MAX_NANOS: Final = 2**63 - 1


class DurationError(ValueError):
    """A string Go's ``time.ParseDuration`` would reject."""


def parse_duration_seconds(text: str) -> float:
    """Return the duration in seconds; sub-nanosecond digits are truncated like Go does."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if body == "0":
        return 0.0
    if not body:
        raise DurationError(f"invalid duration {text!r}")
    nanos = Fraction(0)
    position = 0
    while position < len(body):
        component = _COMPONENT.match(body, position)
        assert component is not None  # every part of the pattern is optional
        whole, fraction, unit = component.groups()
        if not whole and not fraction:
            raise DurationError(f"invalid duration {text!r}")
        if unit not in _NANOS_PER_UNIT:
            problem = "missing unit" if not unit else f"unknown unit {unit!r}"
            raise DurationError(f"{problem} in duration {text!r}")
        number = Fraction(int(whole + (fraction or "")), 10 ** len(fraction or ""))
        nanos += number * _NANOS_PER_UNIT[unit]
        position = component.end()
    whole_nanos = int(nanos)
    if whole_nanos > _MAX_NANOS:
        raise DurationError(f"duration {text!r} is out of range")
    sign = -1 if text.startswith("-") else 1
    return sign * whole_nanos / 10**9
