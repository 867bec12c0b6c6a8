"""docs/configuration.md has every HeadroomConfig field of the CRD schema, with its default."""

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

import pytest
import yaml

from app.core.config import validate_config
from tests.unit.app.builders import headroom_config
from tests.unit.docs.markdown import CONFIGURATION, REPO_ROOT, code_spans, section, table_rows

CRD_TEMPLATE: Final = (
    REPO_ROOT / "chart" / "kube-headroom-crds" / "templates" / "headroomconfigs.yaml"
)
UNSET: Final = "unset"
# The CRD template's only template expressions are label values; any scalar stands in.
_TEMPLATE_EXPRESSION: Final = re.compile(r"\{\{.*?\}\}")

Schema = Mapping[str, Any]


def _crd_schema() -> Schema:
    crd = yaml.safe_load(_TEMPLATE_EXPRESSION.sub("templated", CRD_TEMPLATE.read_text()))
    (version,) = crd["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


def _fields(schema: Schema, *, path: str) -> Iterator[tuple[str, Schema]]:
    """Every field below ``schema``; label selectors (atomic maps) count as one field."""
    for name, child in schema.get("properties", {}).items():
        child_path = f"{path}.{name}"
        yield child_path, child
        if child.get("x-kubernetes-map-type") == "atomic":
            continue
        yield from _fields(child, path=child_path)
        if "items" in child:
            yield from _fields(child["items"], path=f"{child_path}[]")


SPEC_FIELDS: Final = dict(_fields(_crd_schema()["properties"]["spec"], path="spec"))
STATUS_FIELDS: Final = [
    f"status.{name}" for name in _crd_schema()["properties"]["status"]["properties"]
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
