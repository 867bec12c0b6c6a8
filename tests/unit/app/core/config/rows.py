"""The field table flattened to the rows the CRD schema and docs/configuration.md show.

One row a field path, as the reference writes it: ``spec.deadband.growPercent``,
``spec.nodePools[].quantum``. Sections (``spec.deadband``) and the keys of list items that
are read by hand (``spec.excludedOwners[].kind``) are rows too, without a kind.
"""

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.core.config import DEFAULT_SETTINGS
from app.core.config.errors import Findings
from app.core.config.fields import SPEC, Layout, ObjectList
from app.core.config.kinds import Kind
from tests.unit.chart.helm import CRD_CHART, render

CRD_NAME: Final = "headroomconfigs.kube-headroom.dev"

Schema = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Row:
    path: str
    # None for a section or a list item's key read by hand.
    kind: Kind | None
    section: bool
    # False inside a list item (a pool's overrides, an owner's keys).
    top: bool
    # The Settings attribute a top-level field fills.
    attribute: str | None = None

    @property
    def default(self) -> Any:
        """What the field means when unset: its Settings default."""
        assert self.attribute is not None
        return getattr(DEFAULT_SETTINGS, self.attribute)

    def read(self, value: object) -> Any:
        """``value``, as the CRD or the docs write it, read by the row's kind; no errors."""
        assert self.kind is not None
        findings = Findings()
        parsed = self.kind.parse(value, self.path, findings)
        assert findings.errors == [], findings.errors
        return parsed


def field_rows() -> list[Row]:
    return list(_layout_rows(SPEC, "spec", top=True))


def _layout_rows(layout: Layout, path: str, *, top: bool) -> Iterator[Row]:
    fields = {dotted: (attribute, kind) for dotted, attribute, kind in layout.fields}
    yield from _tree_rows(layout.tree, fields, dotted="", path=path, top=top)


def _tree_rows(
    tree: Mapping[str, Any],
    fields: Mapping[str, tuple[str, Kind]],
    *,
    dotted: str,
    path: str,
    top: bool,
) -> Iterator[Row]:
    for key, section in tree.items():
        key_dotted, key_path = f"{dotted}{key}", f"{path}.{key}"
        if section is not None:
            yield Row(key_path, None, section=True, top=top)
            yield from _tree_rows(section, fields, dotted=f"{key_dotted}.", path=key_path, top=top)
        elif key_dotted not in fields:
            yield Row(key_path, None, section=False, top=top)
        else:
            attribute, kind = fields[key_dotted]
            yield Row(key_path, kind, section=False, top=top, attribute=attribute if top else None)
            if isinstance(kind, ObjectList):
                yield from _layout_rows(kind.layout, f"{key_path}[]", top=False)


@functools.cache
def crd_schema() -> Schema:
    """The CRD's openAPIV3Schema as the real helm renders the CRD chart."""
    (crd,) = [
        manifest
        for manifest in render({}, chart=CRD_CHART)
        if manifest["kind"] == "CustomResourceDefinition"
        and manifest["metadata"]["name"] == CRD_NAME
    ]
    (version,) = crd["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


def schema_fields(schema: Schema, *, path: str) -> Iterator[tuple[str, Schema]]:
    """Every field below ``schema``; label selectors (atomic maps) count as one field."""
    for name, child in schema.get("properties", {}).items():
        child_path = f"{path}.{name}"
        yield child_path, child
        if child.get("x-kubernetes-map-type") == "atomic":
            continue
        yield from schema_fields(child, path=child_path)
        if "items" in child:
            yield from schema_fields(child["items"], path=f"{child_path}[]")
