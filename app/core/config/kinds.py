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
from app.core.config.selector import (
    DNS_SUBDOMAIN,
    LabelSelector,
    SelectorError,
    parse_label_selector,
)
from app.core.quantity import QuantityError, parse_quantity

MAX_NAME = 253


class Kind(ABC):
    @abstractmethod
    def parse(self, value: Any, path: str, findings: Findings) -> Any:
        """The typed value, or None when it breaks a rule (its errors are recorded).

        A list with some bad entries records them and keeps the others.
        """


class _Invalid(ValueError):
    """A set value that breaks its kind's rule; the message says how."""


class _Scalar(Kind):
    """A kind whose value breaks at most one rule: ``read`` raises, ``parse`` records it."""

    def parse(self, value: Any, path: str, findings: Findings) -> Any:
        try:
            return self.read(value)
        except (_Invalid, DurationError, QuantityError) as error:
            findings.error(path, str(error))
            return None

    @abstractmethod
    def read(self, value: Any) -> Any:
        """The typed value; raises ``_Invalid`` (or the parser's own error) on a bad one."""


@dataclass(frozen=True, slots=True)
class Boolean(_Scalar):
    def read(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        raise _Invalid("must be true or false")


@dataclass(frozen=True, slots=True)
class Integer(_Scalar):
    low: int
    high: int | None = None

    def read(self, value: Any) -> int:
        if not is_integer(value):
            raise _Invalid("must be an integer")
        if self.high is None and value < self.low:
            raise _Invalid(f"must be at least {self.low}")
        if self.high is not None and not self.low <= value <= self.high:
            raise _Invalid(f"must be between {self.low} and {self.high}")
        return int(value)


@dataclass(frozen=True, slots=True)
class Millicores(_Scalar):
    """A CPU quantity, rounded up to whole millicores; ``positive`` also rejects 0."""

    positive: bool

    def read(self, value: Any) -> int:
        exact = _quantity(value)
        if exact < 0 or (self.positive and exact == 0):
            raise _Invalid("must be greater than 0" if self.positive else "must not be negative")
        return math.ceil(exact * 1000)


@dataclass(frozen=True, slots=True)
class Multiplier(_Scalar):
    """A multiple of a request, kept exact; a ``low`` of 0 is the no-cap value."""

    low: int
    high: int

    def read(self, value: Any) -> Fraction:
        exact = _quantity(value)
        if not self.low <= exact <= self.high:
            no_cap = f"0 (no cap) or greater than 0 and at most {self.high}"
            bounds = no_cap if self.low == 0 else f"between {self.low} and {self.high}"
            raise _Invalid(f"must be {bounds}")
        return exact


@dataclass(frozen=True, slots=True)
class Duration(_Scalar):
    """A Go duration, in seconds; never negative."""

    def read(self, value: Any) -> float:
        if not isinstance(value, str):
            raise _Invalid('must be a duration string such as "2s", "1m30s" or "500ms"')
        seconds = parse_duration_seconds(value)
        if seconds < 0:
            raise _Invalid("must not be negative")
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
class Enum(_Scalar):
    values: tuple[str, ...]

    def read(self, value: Any) -> str:
        if value in self.values:
            return str(value)
        raise _Invalid(f"must be one of {', '.join(self.values)}")


@dataclass(frozen=True, slots=True)
class ObjectName(_Scalar):
    """The name of a cluster object, a DNS subdomain (what ``noun`` names)."""

    noun: str

    def read(self, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise _Invalid(f"must be a non-empty {self.noun}")
        if len(value) > MAX_NAME or not DNS_SUBDOMAIN.fullmatch(value):
            raise _Invalid(
                f"must be a {self.noun}: at most {MAX_NAME} lowercase alphanumerics, '-' or "
                "'.', starting and ending with an alphanumeric"
            )
        return value


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


def _quantity(value: Any) -> Fraction:
    if is_integer(value):
        return Fraction(value)
    if not isinstance(value, str):
        raise _Invalid('must be a quantity string such as "1", "500m" or "1.5"')
    return parse_quantity(value)


def is_integer(value: object) -> bool:
    # bool is an int subclass, but `true` is not a number in a config.
    return isinstance(value, int) and not isinstance(value, bool)
