"""The shape of what each admission handler reads, checked before the handler runs.

The API server sends only objects it has decoded, so their types are right; any other
caller can put anything inside a well-formed envelope: ``metadata`` a string, ``labels`` a
list, a container a number. Each handler declares the fields it reads, with their types;
``problems`` lists every field that does not fit, by path, and the endpoint answers 422
with that list before a handler could trip over it.

A shape is derived from the msgspec schema the handler decodes with (`shape_of`), so a
field is declared once, and `merged` with what the handler reads besides.

Every declared field is optional and may be null, as the handlers treat null as unset.
Fields a handler does not read are not looked at, so a check never walks further into
an object than the handler would, and nesting depth costs nothing. Each shape first
answers whether a value fits, allocating nothing; only a value that does not is walked
again to name every misfit by path. Hand-written rather than pydantic models: a typical
pod's check is a few microseconds, and the messages name paths the way the API server's
own errors do.
"""

from collections.abc import Mapping
from typing import Final, TypeGuard, TypeVar

import msgspec.inspect as wire

T = TypeVar("T")
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


def _walkable(value: object, kind: type[T], path: str, problems: list[str]) -> TypeGuard[T]:
    """Whether ``value`` is a ``kind`` with members to check. Null has none (it fits); a
    value of another type is a misfit, noted in ``problems``."""
    if value is None:
        return False
    if type(value) is kind:
        return True
    _misfit(problems, path, _NOUNS[kind], value)
    return False


class Shape:
    """What a value must look like; null (unset) always fits. This base shape is any
    value at all (``ANYTHING``); each subclass narrows both methods."""

    __slots__ = ()

    def fits(self, value: object) -> bool:
        return True

    def misfits(self, value: object, path: str, problems: list[str]) -> None:
        """Append a message for each part of ``value`` that does not fit."""


class _Scalar(Shape):
    __slots__ = ("_noun", "_types")

    def __init__(self, *types: type, noun: str) -> None:
        # Exact types: a JSON boolean is never a number here.
        self._types = frozenset(types)
        self._noun = noun

    def fits(self, value: object) -> bool:
        return value is None or type(value) in self._types

    def misfits(self, value: object, path: str, problems: list[str]) -> None:
        if not self.fits(value):
            _misfit(problems, path, self._noun, value)


class Fields(Shape):
    """An object whose named fields have these shapes; other fields are not read."""

    __slots__ = ("_items",)

    def __init__(self, **declared: Shape) -> None:
        self._items = tuple(declared.items())

    def fits(self, value: object) -> bool:
        if value is None:
            return True
        if type(value) is not dict:
            return False
        # Loops rather than all(): a generator per level doubled the check's cost.
        for key, shape in self._items:  # noqa: SIM110
            if not shape.fits(value.get(key)):
                return False
        return True

    def misfits(self, value: object, path: str, problems: list[str]) -> None:
        if _walkable(value, dict, path, problems):
            for key, shape in self._items:
                shape.misfits(value.get(key), f"{path}.{key}", problems)


class ListOf(Shape):
    """A list whose elements have one shape; an element is never null."""

    __slots__ = ("_item",)

    def __init__(self, item: Shape) -> None:
        self._item = item

    def fits(self, value: object) -> bool:
        if value is None:
            return True
        if type(value) is not list:
            return False
        item = self._item
        for element in value:  # noqa: SIM110
            if element is None or not item.fits(element):
                return False
        return True

    def misfits(self, value: object, path: str, problems: list[str]) -> None:
        if _walkable(value, list, path, problems):
            for index, element in enumerate(value):
                if element is None:
                    problems.append(f"{path}[{index}]: must not be null")
                else:
                    self._item.misfits(element, f"{path}[{index}]", problems)


class MapOf(Shape):
    """An object used as a map (labels, quantities by resource name)."""

    __slots__ = ("_value",)

    def __init__(self, value: Shape) -> None:
        self._value = value

    def fits(self, value: object) -> bool:
        if value is None:
            return True
        if type(value) is not dict:
            return False
        check = self._value
        for element in value.values():  # noqa: SIM110
            if not check.fits(element):
                return False
        return True

    def misfits(self, value: object, path: str, problems: list[str]) -> None:
        if _walkable(value, dict, path, problems):
            for key, element in value.items():
                self._value.misfits(element, _member(path, key), problems)


STRING: Final[Shape] = _Scalar(str, noun="a string")
BOOLEAN: Final[Shape] = _Scalar(bool, noun="a boolean")
INTEGER: Final[Shape] = _Scalar(int, noun="an integer")
# A quantity is a string or a number (int-or-string), never a boolean.
QUANTITY: Final[Shape] = _Scalar(str, int, float, noun="a quantity (a string or a number)")
ANYTHING: Final = Shape()


# Labels and annotations: string values only. The values of a JSON object are checked
# whatever their keys; keys are always strings.
STRING_MAP: Final[Shape] = MapOf(_Scalar(str, noun="a string"))


def shape_of(schema: type) -> Shape:
    """The shape of what the msgspec ``schema`` decodes: its fields, by their names on the
    wire, with their types."""
    return _from_info(wire.type_info(schema))


_QUANTITY_TYPES: Final = frozenset({wire.StrType, wire.IntType, wire.FloatType})
_SCALARS: Final[Mapping[type, Shape]] = {
    wire.StrType: STRING,
    wire.IntType: INTEGER,
    wire.BoolType: BOOLEAN,
}


def _from_info(info: wire.Type) -> Shape:
    if isinstance(info, wire.UnionType):
        kinds = [t for t in info.types if not isinstance(t, wire.NoneType)]
        if {type(t) for t in kinds} == _QUANTITY_TYPES:
            return QUANTITY
        if len(kinds) == 1:
            return _from_info(kinds[0])
    elif isinstance(info, wire.StructType):
        return Fields(**{f.encode_name: _from_info(f.type) for f in info.fields})
    elif isinstance(info, wire.ListType):
        return ListOf(_from_info(info.item_type))
    elif isinstance(info, wire.DictType):
        return MapOf(_from_info(info.value_type))
    elif type(info) in _SCALARS:
        return _SCALARS[type(info)]
    raise TypeError(f"no shape for {info}")


def merged(base: Shape, extra: Shape) -> Shape:
    """``base`` with ``extra``'s fields added: where both name a field of an object their
    shapes are merged, and elsewhere ``extra``'s shape replaces ``base``'s."""
    if not (isinstance(base, Fields) and isinstance(extra, Fields)):
        return extra
    items = dict(base._items)
    for key, shape in extra._items:
        items[key] = merged(items[key], shape) if key in items else shape
    return Fields(**items)


def problems(value: object, shape: Shape, *, path: str) -> list[str]:
    """Every misfit of ``value`` against ``shape``; empty when it fits."""
    if shape.fits(value):
        return []
    found: list[str] = []
    shape.misfits(value, path, found)
    return found


def summary(found: list[str], *, limit: int = 10) -> str:
    """The first ``limit`` misfits, and how many more there are."""
    shown = "; ".join(found[:limit])
    rest = len(found) - limit
    return f"{shown}; and {rest} more" if rest > 0 else shown
