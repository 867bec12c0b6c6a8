"""CPU caps a namespace's LimitRanges put on limits, which LimitRanger enforces on resize."""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from app.core.quantity import QuantityError, parse_quantity


@dataclass(frozen=True, slots=True)
class LimitRangeCaps:
    """The tightest ``max.cpu`` and ``maxLimitRequestRatio.cpu`` across LimitRanges.

    Container values bound each container's limit; Pod values bound the sum of the
    pod's container limits.
    """

    container_max_m: int | None = None
    container_ratio: Fraction | None = None
    pod_max_m: int | None = None
    pod_ratio: Fraction | None = None

    def container_cap_m(self, request_m: int) -> int | None:
        return _cap(self.container_max_m, self.container_ratio, request_m)

    def pod_cap_m(self, request_m: int) -> int | None:
        return _cap(self.pod_max_m, self.pod_ratio, request_m)


NO_LIMIT_RANGE_CAPS: Final = LimitRangeCaps()


def limit_range_caps(limit_ranges: Iterable[Mapping[str, Any]]) -> LimitRangeCaps:
    """Caps from the LimitRange objects of one namespace (the minimum of each kind)."""
    items = [
        item
        for limit_range in limit_ranges
        for item in (limit_range.get("spec") or {}).get("limits") or ()
    ]

    def tightest(kind: str, field: str) -> Fraction | None:
        """The least CPU value of ``field`` across the items of type ``kind``."""
        values = (
            _cpu((item.get(field) or {}).get("cpu")) for item in items if item.get("type") == kind
        )
        return min((value for value in values if value is not None), default=None)

    return LimitRangeCaps(
        container_max_m=_floor_millis(tightest("Container", "max")),
        container_ratio=tightest("Container", "maxLimitRequestRatio"),
        pod_max_m=_floor_millis(tightest("Pod", "max")),
        pod_ratio=tightest("Pod", "maxLimitRequestRatio"),
    )


def _floor_millis(value: Fraction | None) -> int | None:
    # Down, not up: a limit one sub-millicore over the maximum is refused.
    return None if value is None else math.floor(value * 1000)


def _cap(maximum_m: int | None, ratio: Fraction | None, request_m: int) -> int | None:
    caps = [] if maximum_m is None else [maximum_m]
    if ratio is not None:
        caps.append(math.floor(request_m * ratio))
    return min(caps, default=None)


def _cpu(value: object) -> Fraction | None:
    """A positive quantity, or None; the API server already rejected malformed ones."""
    if value is None:
        return None
    try:
        parsed = parse_quantity(str(value))
    except QuantityError:
        return None
    return parsed if parsed > 0 else None
