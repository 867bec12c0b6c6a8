"""Kubernetes label selectors (matchLabels and matchExpressions) with the API's semantics."""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from app.core.config.errors import FieldError, FieldErrors

_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN: Final = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_SELECTOR_FIELDS: Final = frozenset({"matchLabels", "matchExpressions"})
_EXPRESSION_FIELDS: Final = frozenset({"key", "operator", "values"})


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement of a label selector, as `matchExpressions` states it."""

    key: str
    operator: Operator
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator is Operator.IN:
            return labels.get(self.key) in self.values
        if self.operator is Operator.NOT_IN:
            return labels.get(self.key) not in self.values
        if self.operator is Operator.EXISTS:
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """All requirements must hold; no requirements (``{}``) matches everything."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


OPERATORS: Final = {operator.value: operator for operator in Operator}


class SelectorError(FieldErrors):
    """A malformed selector; carries every error with its field path."""


def parse_label_selector(obj: object, *, path: str = "selector") -> LabelSelector:
    """Parse a ``metav1.LabelSelector`` object; raise ``SelectorError`` if malformed."""
    if not isinstance(obj, Mapping):
        raise SelectorError((FieldError(path, "must be an object"),))
    errors = _unknown_fields(obj, _SELECTOR_FIELDS, path=path)
    requirements = _match_labels(obj.get("matchLabels"), path=f"{path}.matchLabels", errors=errors)
    expressions = obj.get("matchExpressions")
    if expressions is not None and not isinstance(expressions, list):
        errors.append(FieldError(f"{path}.matchExpressions", "must be a list"))
    elif expressions is not None:
        for index, expression in enumerate(expressions):
            requirement = _expression(
                expression, path=f"{path}.matchExpressions[{index}]", errors=errors
            )
            if requirement is not None:
                requirements.append(requirement)
    if errors:
        raise SelectorError(tuple(errors))
    return LabelSelector(tuple(requirements))


def _unknown_fields(
    obj: Mapping[str, object], known: frozenset[str], *, path: str
) -> list[FieldError]:
    return [
        FieldError(f"{path}.{field}", "unknown field")
        for field in sorted(set(obj) - known, key=str)
    ]


def _match_labels(obj: object, *, path: str, errors: list[FieldError]) -> list[Requirement]:
    if obj is None:
        return []
    if not isinstance(obj, Mapping):
        errors.append(FieldError(path, "must be a map of label keys to values"))
        return []
    requirements = []
    for key, value in obj.items():
        problems = [p for p in (label_key_error(key), label_value_error(value)) if p]
        errors.extend(FieldError(f"{path}[{key}]", problem) for problem in problems)
        if not problems:
            requirements.append(Requirement(key, Operator.IN, frozenset({value})))
    return requirements


def _expression(obj: object, *, path: str, errors: list[FieldError]) -> Requirement | None:
    if not isinstance(obj, Mapping):
        errors.append(FieldError(path, "must be an object"))
        return None
    before = len(errors)
    errors.extend(_unknown_fields(obj, _EXPRESSION_FIELDS, path=path))
    key = obj.get("key")
    key_error = "is required" if key is None else label_key_error(key)
    if key_error:
        errors.append(FieldError(f"{path}.key", key_error))
    raw_operator = obj.get("operator")
    operator = OPERATORS.get(raw_operator) if isinstance(raw_operator, str) else None
    if operator is None:
        errors.append(FieldError(f"{path}.operator", f"must be one of {', '.join(Operator)}"))
    values = _values(obj.get("values"), operator=operator, path=f"{path}.values", errors=errors)
    if len(errors) > before:
        return None
    # No new errors means both were valid.
    assert isinstance(key, str)
    assert operator is not None
    return Requirement(key, operator, values)


def _values(
    obj: object, *, operator: Operator | None, path: str, errors: list[FieldError]
) -> frozenset[str]:
    if obj is None:
        obj = []
    if not isinstance(obj, list):
        errors.append(FieldError(path, "must be a list of strings"))
        return frozenset()
    for index, value in enumerate(obj):
        if value_error := label_value_error(value):
            errors.append(FieldError(f"{path}[{index}]", value_error))
    if operator in (Operator.IN, Operator.NOT_IN) and not obj:
        errors.append(FieldError(path, f"must be non-empty for operator {operator}"))
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and obj:
        errors.append(FieldError(path, f"must be empty for operator {operator}"))
    return frozenset(value for value in obj if isinstance(value, str))


def label_key_error(key: object) -> str | None:
    """Why ``key`` is not a valid label key (``[prefix/]name``), or None if it is."""
    if not isinstance(key, str):
        return "label key must be a string"
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"label key {key!r} has an invalid prefix (must be a DNS subdomain)"
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return (
            f"label key {key!r} has an invalid name (at most 63 alphanumerics, '-', '_' "
            "or '.', starting and ending with an alphanumeric)"
        )
    return None


def label_value_error(value: object) -> str | None:
    """Why ``value`` is not a valid label value, or None if it is."""
    if not isinstance(value, str):
        return "label value must be a string"
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        return (
            f"label value {value!r} is invalid (at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric)"
        )
    return None
