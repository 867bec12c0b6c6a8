"""Reasoning about label selectors without nodes: can two match one node, does one imply another.

Every requirement of a selector constrains one label key independently, so a selector is
a per-key domain: the set of values that key may take, "absent" counted as a value. A
domain is either a finite set of values or everything but a finite set. Two selectors can
match one node iff every key's intersected domain is non-empty; ``a`` implies ``b`` iff
each of ``b``'s requirements allows every value ``a`` leaves its key.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from app.core.config.selector import LabelSelector, Operator, Requirement

# Never a label value (those are at most 63 alphanumerics, '-', '_' and '.').
_ABSENT: Final = "\x00absent"


@dataclass(frozen=True, slots=True)
class _Domain:
    """Exactly ``values`` when ``finite``, otherwise every value but ``values``."""

    values: frozenset[str]
    finite: bool

    @property
    def empty(self) -> bool:
        return self.finite and not self.values

    def intersect(self, other: "_Domain") -> "_Domain":
        if self.finite and other.finite:
            return _Domain(self.values & other.values, finite=True)
        if self.finite:
            return _Domain(self.values - other.values, finite=True)
        if other.finite:
            return _Domain(other.values - self.values, finite=True)
        return _Domain(self.values | other.values, finite=False)

    def within(self, other: "_Domain") -> bool:
        if self.finite and other.finite:
            return self.values <= other.values
        if self.finite:
            return not self.values & other.values
        if other.finite:
            return False
        return other.values <= self.values


_ANY: Final = _Domain(frozenset(), finite=False)


def _domain(requirement: Requirement) -> _Domain:
    operator = requirement.operator
    # In and NotIn: the values, or all but them; Exists and DoesNotExist: all but absent,
    # or absent alone.
    if operator in (Operator.IN, Operator.NOT_IN):
        return _Domain(requirement.values, finite=operator is Operator.IN)
    return _Domain(frozenset({_ABSENT}), finite=operator is Operator.DOES_NOT_EXIST)


def _domains(requirements: Iterable[Requirement]) -> Mapping[str, _Domain]:
    domains: dict[str, _Domain] = {}
    for requirement in requirements:
        domains[requirement.key] = domains.get(requirement.key, _ANY).intersect(
            _domain(requirement)
        )
    return domains


def can_match_together(*selectors: LabelSelector) -> bool:
    """Whether some set of labels satisfies every one of ``selectors``."""
    domains = _domains(r for selector in selectors for r in selector.requirements)
    return not any(domain.empty for domain in domains.values())


def implies(a: LabelSelector, b: LabelSelector) -> bool:
    """Whether every set of labels ``a`` matches is also matched by ``b``."""
    domains = _domains(a.requirements)
    if any(domain.empty for domain in domains.values()):
        # ``a`` matches nothing, so there is nothing ``b`` could miss.
        return True
    return all(
        domains.get(requirement.key, _ANY).within(_domain(requirement))
        for requirement in b.requirements
    )
