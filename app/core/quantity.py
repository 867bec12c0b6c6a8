"""Kubernetes resource quantities, parsed and formatted the way the API server does.

The official client's ``kubernetes.utils.quantity.parse_quantity`` is not used: it goes
through ``Decimal``, so it accepts what the API server rejects (surrounding whitespace,
``_`` digit separators, ``NaN``/``Infinity``, and ``"1e3m"``). This module implements
the API server's grammar instead::

    <quantity> ::= <sign>? <number> <suffix>
    <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>   ::= "" | n | u | m | k | M | G | T | P | E        (decimal SI)
                 | Ki | Mi | Gi | Ti | Pi | Ei                  (binary SI)
                 | e<sign>?<digits> | E<sign>?<digits>          (decimal exponent)

Values are exact ``Fraction``s. Two deliberate narrowings of the server's parser, which
tolerates them by accident: a number must have at least one digit (the server reads
``"-"`` and ``"."`` as zero), and exponents are bounded so a hostile string cannot make
the arithmetic explode.
"""

import functools
import math
import re
from fractions import Fraction
from typing import Final

_NUMBER: Final = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")
_EXPONENT: Final = re.compile(r"[eE]([+-]?[0-9]+)")
# Suffix to multiplier: decimal SI from nano to exa, binary SI from kibi to exbi.
_DECIMAL_PREFIXES: Final = ("n", "u", "m", "", "k", "M", "G", "T", "P", "E")
_SUFFIXES: Final = {
    **{prefix: Fraction(1000) ** n for n, prefix in enumerate(_DECIMAL_PREFIXES, start=-3)},
    **{f"{prefix}i": Fraction(1024) ** n for n, prefix in enumerate("KMGTPE", start=1)},
}
# Far beyond any real resource amount, small enough that 10**exponent stays cheap.
_MAX_EXPONENT: Final = 1000


class QuantityError(ValueError):
    """A string that the API server would not accept as a quantity."""


# Clusters repeat a handful of quantity strings ("500m", "256Mi") across every pod; the
# cache turns a ~13 µs parse into a dictionary hit on the webhook's and the pod cache's
# hot paths. Results are immutable Fractions, so sharing them is safe.
@functools.lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Fraction:
    """Return the exact value of a Kubernetes quantity such as ``"500m"`` or ``"2Gi"``."""
    if not text:
        raise QuantityError("quantity is empty")
    if text != text.strip():
        raise QuantityError(f"quantity {text!r} has surrounding whitespace")
    number = _NUMBER.match(text)
    assert number is not None  # every part of the pattern is optional
    sign, whole, fraction = number.groups()
    if not whole and not fraction:
        raise QuantityError(f"quantity {text!r} does not start with a number")
    value = Fraction(int(whole + (fraction or "")), 10 ** len(fraction or ""))
    value *= _multiplier(text, text[number.end() :])
    return -value if sign == "-" else value


def _multiplier(text: str, suffix: str) -> Fraction:
    known = _SUFFIXES.get(suffix)
    if known is not None:
        return known
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        raise QuantityError(f"quantity {text!r} has an unknown suffix {suffix!r}")
    power = int(exponent.group(1))
    if abs(power) > _MAX_EXPONENT:
        raise QuantityError(f"quantity {text!r} has an exponent out of range")
    return Fraction(10) ** power


def parse_cpu_millis(text: str) -> int:
    """Return a CPU quantity in millicores, rounding sub-millicore values up.

    Rounding up matches ``Quantity.MilliValue()``, which the kubelet and scheduler use.
    Negative amounts are rejected: no request or limit may be negative.
    """
    # Canonical forms ("250m", "2") are nearly all the API server ever returns.
    if text.isascii() and text.isdigit():
        return int(text) * 1000
    if text.endswith("m") and text[:-1].isascii() and text[:-1].isdigit():
        return int(text[:-1])
    value = parse_quantity(text)
    if value < 0:
        raise QuantityError(f"CPU quantity {text!r} is negative")
    return math.ceil(value * 1000)


def format_cpu_millis(millis: int) -> str:
    """Canonical CPU quantity, as the API server prints it: ``"1500m"``, ``"2"``."""
    if millis % 1000 == 0:
        return str(millis // 1000)
    return f"{millis}m"


def format_cores(millis: int) -> str:
    """Cores with at most two decimals, half-up, no trailing zeros: ``"8"``, ``"8.5"``."""
    centi = (abs(millis) + 5) // 10
    sign = "-" if millis < 0 and centi else ""
    whole, hundredths = divmod(centi, 100)
    if hundredths == 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{hundredths:02d}".rstrip("0")
