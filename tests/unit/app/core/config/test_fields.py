"""The field table against the CRD the chart installs: the same fields, with the same
types, bounds, enums and defaults, so the API server and the validator agree."""

import re
from typing import Any, Final

import pytest

from app.core.config import Operator, kinds, validate_config
from app.core.config.fields import MAX_NODE_POOLS, MAX_WEIGHT_RULES, NodePools, Owners, WeightRules
from tests.unit.app.builders import headroom_config
from tests.unit.app.core.config.rows import Row, Schema, crd_schema, field_rows, schema_fields

ROWS: Final = field_rows()
CRD_FIELDS: Final = dict(schema_fields(crd_schema()["properties"]["spec"], path="spec"))
TYPED: Final = [row for row in ROWS if row.kind is not None]


def _rows_of(kind: type[kinds.Kind]) -> list[Row]:
    return [row for row in TYPED if isinstance(row.kind, kind)]


# The schema keys that carry a type or a bound; a field's must be exactly the table's.
_SHAPE_KEYS: Final = (
    "type",
    "minimum",
    "maximum",
    "enum",
    "anyOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-map-type",
    "maxItems",
)
_INT_OR_STRING: Final = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}
_QUANTITY: Final = "isQuantity(string(self))"
_UNIQUE_NAMES: Final = "self.all(p, self.exists_one(q, q.name == p.name))"


def _above(bound: int) -> str:
    return f"quantity(string(self)).isGreaterThan(quantity('{bound}'))"


def _at_least(bound: int) -> str:
    return f"!quantity(string(self)).isLessThan(quantity('{bound}'))"


def _expected_shape(row: Row) -> dict[str, Any]:
    """The schema keys of ``_SHAPE_KEYS`` the row's kind implies, and its CEL rules."""
    kind = row.kind
    if isinstance(kind, kinds.Boolean):
        return {"type": "boolean"}
    if isinstance(kind, kinds.Integer):
        return {"type": "integer", "minimum": kind.low, "maximum": kind.high}
    if isinstance(kind, kinds.Millicores):
        sign = _above(0) if kind.positive else _at_least(0)
        return {**_INT_OR_STRING, "rules": [f"{_QUANTITY} && {sign}"]}
    if isinstance(kind, kinds.Multiplier):
        rule = f"{_QUANTITY} && {_at_least(kind.low)} && !{_above(kind.high)}"
        return {**_INT_OR_STRING, "rules": [rule]}
    if isinstance(kind, kinds.Duration):
        return {"type": "string"}
    if isinstance(kind, kinds.Selector):
        return {"type": "object", "x-kubernetes-map-type": "atomic"}
    if isinstance(kind, kinds.Enum):
        return {"type": "string", "enum": list(kind.values)}
    if isinstance(kind, NodePools):
        return {"type": "array", "maxItems": MAX_NODE_POOLS, "rules": [_UNIQUE_NAMES]}
    if isinstance(kind, WeightRules):
        return {"type": "array", "maxItems": MAX_WEIGHT_RULES}
    if isinstance(kind, kinds.ObjectName):
        return {"type": "string"}
    if isinstance(kind, Owners | kinds.StringList):
        return {"type": "array"}
    raise AssertionError(f"no schema is known for {kind!r}: add it here")


def _shape(schema: Schema) -> dict[str, Any]:
    shape = {key: schema[key] for key in _SHAPE_KEYS if key in schema}
    rules = [rule["rule"] for rule in schema.get("x-kubernetes-validations", [])]
    return {**shape, **({"rules": rules} if rules else {})}


def test_the_crd_has_exactly_the_tables_fields() -> None:
    table = [row.path for row in ROWS]
    assert len(table) == len(set(table))
    assert sorted(set(CRD_FIELDS) - set(table)) == [], "in the CRD, not in the table"
    assert sorted(set(table) - set(CRD_FIELDS)) == [], "in the table, not in the CRD"


@pytest.mark.parametrize("row", TYPED, ids=lambda row: row.path)
def test_the_crd_field_has_the_tables_type_and_bounds(row: Row) -> None:
    expected = {key: value for key, value in _expected_shape(row).items() if value is not None}
    assert _shape(CRD_FIELDS[row.path]) == expected


@pytest.mark.parametrize("row", [row for row in ROWS if row.section], ids=lambda row: row.path)
def test_sections_are_objects_that_default_to_empty_at_the_top(row: Row) -> None:
    schema = CRD_FIELDS[row.path]
    assert schema["type"] == "object"
    # A section defaulted to {} gets its fields' defaults; a pool's must stay unset.
    assert schema.get("default") == ({} if row.top else None)


@pytest.mark.parametrize("row", TYPED, ids=lambda row: row.path)
def test_the_crd_default_is_the_settings_default(row: Row) -> None:
    schema = CRD_FIELDS[row.path]
    if not row.top:
        # A pool's override left out keeps the top-level value.
        assert "default" not in schema
    elif isinstance(row.kind, kinds.Selector):
        # Unset has a meaning of its own (the managed label; no node excluded).
        assert "default" not in schema
    else:
        assert row.read(schema["default"]) == row.default


@pytest.mark.parametrize("row", _rows_of(kinds.Selector), ids=lambda row: row.path)
def test_selectors_have_the_label_selector_schema(row: Row) -> None:
    schema = CRD_FIELDS[row.path]
    assert set(schema["properties"]) == {"matchLabels", "matchExpressions"}
    expression = schema["properties"]["matchExpressions"]["items"]
    assert expression["properties"]["operator"]["enum"] == [op.value for op in Operator]


@pytest.mark.parametrize("row", _rows_of(kinds.StringList), ids=lambda row: row.path)
def test_string_lists_hold_strings(row: Row) -> None:
    assert CRD_FIELDS[row.path]["items"] == {"type": "string"}


# Go durations (time.ParseDuration) that are not negative; strings that are not durations,
# or are negative.
DURATIONS: Final = (
    *("2s", "5m", "1m30s", "500ms", "1.5h", "+2s", "0", "0s", ".5s", "1.s"),
    *("250ns", "250us", "250\u00b5s", "250\u03bcs"),
)
NOT_DURATIONS: Final = ("2", "-5m", "2 seconds", "1d", "", "s", ".s", "1m-5s", "0x")


@pytest.mark.parametrize("row", _rows_of(kinds.Duration), ids=lambda row: row.path)
def test_the_crd_and_the_validator_accept_the_same_durations(row: Row) -> None:
    pattern = re.compile(CRD_FIELDS[row.path]["pattern"])
    for text in (*DURATIONS, *NOT_DURATIONS):
        spec: Any = text
        for key in reversed(row.path.removeprefix("spec.").split(".")):
            spec = {key: spec}
        accepted = validate_config(headroom_config(spec=spec)).allowed
        assert accepted is (text in DURATIONS), text
        assert (pattern.search(text) is not None) is accepted, text
