"""What a HeadroomConfig field may hold: each kind reads a set value and words its errors.

``parse`` gets a value that is set (not null) and returns it typed, or None once its
errors are recorded. Bounds are plain attributes, so the tests can hold them against the
CRD schema and the configuration reference.
"""

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from app.core.config.duration import DurationError, parse_duration_seconds
from app.core.config.errors import Findings
from app.core.config.selector import LabelSelector, SelectorError, parse_label_selector
from app.core.quantity import QuantityError, parse_quantity


class Kind(ABC):
    @abstractmethod
    def parse(self, value: Any, path: str, findings: Findings) -> Any:
        """The typed value, or None when it breaks a rule (its errors are recorded).

        A list with some bad entries records them and keeps the others.
        """


@dataclass(frozen=True, slots=True)
class Boolean(Kind):
    def parse(self, value: Any, path: str, findings: Findings) -> bool | None:
        if isinstance(value, bool):
            return value
        findings.error(path, "must be true or false")
        return None


@dataclass(frozen=True, slots=True)
class Integer(Kind):
    low: int
    high: int | None = None

    def parse(self, value: Any, path: str, findings: Findings) -> int | None:
        if not is_integer(value):
            findings.error(path, "must be an integer")
        elif self.high is None and value < self.low:
            findings.error(path, f"must be at least {self.low}")
        elif self.high is not None and not self.low <= value <= self.high:
            findings.error(path, f"must be between {self.low} and {self.high}")
        else:
            return int(value)
        return None


@dataclass(frozen=True, slots=True)
class Millicores(Kind):
    """A CPU quantity, rounded up to whole millicores; ``positive`` also rejects 0."""

    positive: bool

    def parse(self, value: Any, path: str, findings: Findings) -> int | None:
        exact = _quantity(value, path, findings)
        if exact is None:
            return None
        if exact < 0 or (self.positive and exact == 0):
            findings.error(
                path, "must be greater than 0" if self.positive else "must not be negative"
            )
            return None
        return math.ceil(exact * 1000)


@dataclass(frozen=True, slots=True)
class Multiplier(Kind):
    """A multiple of a request, kept exact; a ``low`` of 0 is the no-cap value."""

    low: int
    high: int

    def parse(self, value: Any, path: str, findings: Findings) -> Fraction | None:
        exact = _quantity(value, path, findings)
        if exact is None:
            return None
        if not self.low <= exact <= self.high:
            no_cap = f"0 (no cap) or greater than 0 and at most {self.high}"
            bounds = no_cap if self.low == 0 else f"between {self.low} and {self.high}"
            findings.error(path, f"must be {bounds}")
            return None
        return exact


@dataclass(frozen=True, slots=True)
class Duration(Kind):
    """A Go duration, in seconds; never negative."""

    def parse(self, value: Any, path: str, findings: Findings) -> float | None:
        if not isinstance(value, str):
            findings.error(path, 'must be a duration string such as "2s", "1m30s" or "500ms"')
            return None
        try:
            seconds = parse_duration_seconds(value)
        except DurationError as error:
            findings.error(path, str(error))
            return None
        if seconds < 0:
            findings.error(path, "must not be negative")
            return None
        return seconds


@dataclass(frozen=True, slots=True)
class Selector(Kind):
    """A label selector; its errors carry the paths inside it."""

    def parse(self, value: Any, path: str, findings: Findings) -> LabelSelector | None:
        try:
            return parse_label_selector(value, path=path)
        except SelectorError as error:
            findings.errors.extend(error.errors)
            return None


@dataclass(frozen=True, slots=True)
class Enum(Kind):
    values: tuple[str, ...]

    def parse(self, value: Any, path: str, findings: Findings) -> str | None:
        if value in self.values:
            return str(value)
        findings.error(path, f"must be one of {', '.join(self.values)}")
        return None


@dataclass(frozen=True, slots=True)
class StringList(Kind):
    """Non-empty strings, as a set; a bad entry is an error and the others still count."""

    noun: str

    def parse(self, value: Any, path: str, findings: Findings) -> frozenset[str] | None:
        if not isinstance(value, list):
            findings.error(path, f"must be a list of {self.noun}s")
            return None
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item:
                findings.error(f"{path}[{index}]", f"must be a non-empty {self.noun}")
        return frozenset(item for item in value if isinstance(item, str) and item)


def _quantity(value: Any, path: str, findings: Findings) -> Fraction | None:
    if is_integer(value):
        return Fraction(value)
    if not isinstance(value, str):
        findings.error(path, 'must be a quantity string such as "1", "500m" or "1.5"')
        return None
    try:
        return parse_quantity(value)
    except QuantityError as error:
        findings.error(path, str(error))
        return None


def is_integer(value: object) -> bool:
    # bool is an int subclass, but `true` is not a number in a config.
    return isinstance(value, int) and not isinstance(value, bool)
