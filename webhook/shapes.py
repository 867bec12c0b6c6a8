"""The shape of what each admission handler reads, checked before the handler runs.

The API server sends only objects it has decoded, so their types are right; any other
caller can put anything inside a well-formed envelope: ``metadata`` a string, ``labels`` a
list, a container a number. Each handler declares the fields it reads, with their types;
``problems`` lists every field that does not fit, by path, and the endpoint answers 422
with that list before a handler could trip over it.

Every declared field is optional and may be null, as the handlers treat null as unset.
Fields a handler does not read are not looked at, so a check never walks further into
an object than the handler would, and nesting depth costs nothing. Plain functions
rather than pydantic models: a pod's check is a few microseconds, and the messages can
name the path the way the API server's own errors do.
"""

from collections.abc import Callable, Mapping
from typing import Final

# Checks ``value`` found at ``path``, appending one message per misfit to ``problems``.
Check = Callable[[object, str, list[str]], None]

_LONGEST_KEY: Final = 63
_NOUNS: Final[Mapping[type, str]] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def kind_of(value: object) -> str:
    """What a JSON value is, in words; never its contents (which may be huge or deep)."""
    return "null" if value is None else _NOUNS.get(type(value), type(value).__name__)


def _member(path: str, key: str) -> str:
    """``labels['app']``; a key is cut short in the path, since a caller chose it."""
    shown = key if len(key) <= _LONGEST_KEY else f"{key[:_LONGEST_KEY]}..."
    return f"{path}[{shown!r}]"


def _misfit(problems: list[str], path: str, expected: str, value: object) -> None:
    problems.append(f"{path}: must be {expected}, got {kind_of(value)}")


def _string(value: object, path: str, problems: list[str]) -> None:
    if value is not None and type(value) is not str:
        _misfit(problems, path, "a string", value)


def _boolean(value: object, path: str, problems: list[str]) -> None:
    if value is not None and type(value) is not bool:
        _misfit(problems, path, "a boolean", value)


def _quantity(value: object, path: str, problems: list[str]) -> None:
    # A quantity is a string or a number (int-or-string), never a boolean.
    if value is not None and type(value) not in (str, int, float):
        _misfit(problems, path, "a quantity (a string or a number)", value)


def _anything(value: object, path: str, problems: list[str]) -> None:
    return


STRING: Final[Check] = _string
BOOLEAN: Final[Check] = _boolean
QUANTITY: Final[Check] = _quantity
ANYTHING: Final[Check] = _anything


def fields(**declared: Check) -> Check:
    """An object whose named fields have these shapes; other fields are not read."""
    items = tuple(declared.items())

    def check(value: object, path: str, problems: list[str]) -> None:
        if value is None:
            return
        if type(value) is not dict:
            _misfit(problems, path, "an object", value)
            return
        for key, field in items:
            field(value.get(key), f"{path}.{key}", problems)

    return check


def list_of(item: Check) -> Check:
    """A list whose elements have the shape ``item``; an element is never null."""

    def check(value: object, path: str, problems: list[str]) -> None:
        if value is None:
            return
        if type(value) is not list:
            _misfit(problems, path, "a list", value)
            return
        for index, element in enumerate(value):
            if element is None:
                problems.append(f"{path}[{index}]: must not be null")
            else:
                item(element, f"{path}[{index}]", problems)

    return check


def map_of(value_check: Check) -> Check:
    """An object used as a map (labels, quantities by resource name)."""

    def check(value: object, path: str, problems: list[str]) -> None:
        if value is None:
            return
        if type(value) is not dict:
            _misfit(problems, path, "an object", value)
            return
        if value_check is _anything:
            return
        for key, element in value.items():
            value_check(element, _member(path, key), problems)

    return check


def string_map(value: object, path: str, problems: list[str]) -> None:
    """Labels and annotations: string values only; the common all-strings case is one pass."""
    if value is None:
        return
    if type(value) is not dict:
        _misfit(problems, path, "an object", value)
        return
    if all(type(element) is str for element in value.values()):
        return
    for key, element in value.items():
        if type(element) is not str:
            _misfit(problems, _member(path, key), "a string", element)


def problems(value: object, check: Check, *, path: str) -> list[str]:
    """Every misfit of ``value`` against ``check``; empty when it fits."""
    found: list[str] = []
    check(value, path, found)
    return found


def summary(found: list[str], *, limit: int = 10) -> str:
    """The first ``limit`` misfits, and how many more there are."""
    shown = "; ".join(found[:limit])
    rest = len(found) - limit
    return f"{shown}; and {rest} more" if rest > 0 else shown
