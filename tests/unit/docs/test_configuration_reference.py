"""docs/configuration.md has every HeadroomConfig field of the CRD schema and of the field
table, with its type, default and rule."""

import json
import re
from typing import Final

import pytest

from app.core.config import kinds, validate_config
from app.core.config.fields import MAX_NODE_POOLS, MAX_WEIGHT_RULES, NodePools, Owners, WeightRules
from tests.unit.app.builders import headroom_config
from tests.unit.app.core.config.rows import Row, Schema, crd_schema, field_rows, schema_fields
from tests.unit.docs.markdown import CONFIGURATION, code_spans, section, table_rows

UNSET: Final = "unset"

SPEC_FIELDS: Final = dict(schema_fields(crd_schema()["properties"]["spec"], path="spec"))
STATUS_FIELDS: Final = [
    f"status.{name}" for name in crd_schema()["properties"]["status"]["properties"]
]


def _documented(title: str) -> dict[str, list[str]]:
    rows = table_rows(section(CONFIGURATION.read_text(), title))
    return {code_spans(row[0])[0]: row for row in rows}


def _default_cell(field: Schema) -> str:
    if "default" not in field:
        return UNSET
    return f"`{json.dumps(field['default'])}`"


@pytest.mark.parametrize("path", list(SPEC_FIELDS))
def test_spec_field_is_documented_with_its_default(path: str) -> None:
    documented = _documented("Spec")
    assert path in documented, f"{path} is missing from docs/configuration.md"
    assert documented[path][2] == _default_cell(SPEC_FIELDS[path])


@pytest.mark.parametrize("path", [p for p, f in SPEC_FIELDS.items() if "enum" in f])
def test_enum_rule_names_every_value(path: str) -> None:
    rule = _documented("Spec")[path][3]
    assert set(code_spans(rule)) == set(SPEC_FIELDS[path]["enum"])


def test_no_documented_spec_field_is_missing_from_the_crd() -> None:
    assert set(_documented("Spec")) <= set(SPEC_FIELDS)


def test_status_fields_are_documented() -> None:
    assert set(_documented("Status")) == set(STATUS_FIELDS)


# Between them these trip every warning validate_config gives.
RISKY_CONFIGS: Final = (
    headroom_config(
        spec={
            "dryRun": False,
            "maxMultiplier": "0",
            "quantum": "1",
            "deadband": {"growPercent": 0},
            "debouncePeriod": "0s",
            "backoffPeriod": "0s",
            "namespaceSelector": {},
            "excludedNamespaces": [],
        }
    ),
    headroom_config(spec={"maxMultiplier": "0.5"}),
    headroom_config(spec={"webhook": {"initialMultiplier": "20"}}),
    headroom_config(
        spec={
            "weights": [
                {"podSelector": {"matchLabels": {"tier": "gold"}}, "weight": 4},
                {"podSelector": {"matchLabels": {"tier": "gold", "app": "web"}}, "weight": 2},
                {"namespaceSelector": {"matchLabels": {"kube-headroom.dev/mode": "off"}}},
            ],
            "nodePools": [
                {
                    "name": "weighted",
                    "nodeSelector": {},
                    "weights": [{"weight": 2}, {"priorityClassName": "critical"}],
                }
            ],
        }
    ),
    headroom_config(
        spec={
            "nodePools": [
                {"name": "plain", "nodeSelector": {"matchLabels": {"pool": "plain"}}},
                {
                    "name": "risky",
                    "nodeSelector": {"matchLabels": {"pool": "plain"}},
                    "maxMultiplier": "0.5",
                    "quantum": "1",
                    "deadband": {"growPercent": 0},
                    "dryRun": False,
                },
            ]
        }
    ),
)
# Warnings about a pool name its index; the table writes it as [i].
_INDEX: Final = re.compile(r"\[\d+\]")


def test_warnings_table_lists_the_fields_validation_warns_about() -> None:
    warned = {
        _INDEX.sub("[i]", w.path)
        for config in RISKY_CONFIGS
        for w in validate_config(config).warnings
    }
    assert set(_documented("Validation")) == warned


# How the reference writes each kind of the field table.
_TYPE_NAMES: Final[dict[type[kinds.Kind], str]] = {
    kinds.Boolean: "boolean",
    kinds.Integer: "integer",
    kinds.Millicores: "quantity",
    kinds.Multiplier: "quantity",
    kinds.Duration: "duration",
    kinds.Selector: "label selector",
    kinds.Enum: "string",
    kinds.StringList: "list of strings",
    kinds.ObjectName: "string",
    Owners: "list of objects",
    NodePools: "list of objects",
    WeightRules: "list of objects",
}


def _rule(kind: kinds.Kind) -> str:
    """The reference's rule cell for a kind, from the kind's bounds."""
    if isinstance(kind, kinds.Integer):
        return f"≥ {kind.low}" if kind.high is None else f"{kind.low}\u2013{kind.high}"
    if isinstance(kind, kinds.Millicores):
        return "> 0" if kind.positive else "≥ 0"
    if isinstance(kind, kinds.Multiplier):
        zero = kind.low == 0
        return f"`0`, or > 0 and ≤ {kind.high}" if zero else f"≥ {kind.low} and ≤ {kind.high}"
    if isinstance(kind, kinds.Enum):
        return "one of: " + ", ".join(f"`{value}`" for value in kind.values)
    if isinstance(kind, kinds.StringList):
        return f"non-empty {kind.noun}s"
    if isinstance(kind, NodePools):
        return f"at most {MAX_NODE_POOLS}; names unique"
    if isinstance(kind, WeightRules):
        return f"at most {MAX_WEIGHT_RULES}"
    if isinstance(kind, kinds.ObjectName):
        return f"a {kind.noun} (DNS subdomain)"
    return {kinds.Duration: "a duration, ≥ 0", kinds.Selector: "a valid label selector"}.get(
        type(kind), ""
    )


ROWS: Final = field_rows()


def test_every_table_field_is_documented() -> None:
    assert sorted({row.path for row in ROWS} - set(_documented("Spec"))) == []


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind], ids=lambda row: row.path)
def test_a_fields_type_and_rule_are_the_tables(row: Row) -> None:
    assert row.kind is not None
    _, type_name, _, rule, *_ = _documented("Spec")[row.path]
    assert (type_name, rule) == (_TYPE_NAMES[type(row.kind)], _rule(row.kind))


@pytest.mark.parametrize("row", [r for r in ROWS if r.section], ids=lambda row: row.path)
def test_a_section_is_an_object_that_defaults_to_empty_at_the_top(row: Row) -> None:
    _, type_name, default, rule, *_ = _documented("Spec")[row.path]
    assert (type_name, default, rule) == ("object", "`{}`" if row.top else UNSET, "")


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind], ids=lambda row: row.path)
def test_a_documented_default_is_the_settings_default(row: Row) -> None:
    default = _documented("Spec")[row.path][2]
    if not row.top or isinstance(row.kind, kinds.Selector):
        assert default == UNSET
    else:
        (written,) = code_spans(default)
        assert row.read(json.loads(written)) == row.default
