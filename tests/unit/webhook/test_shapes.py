from collections.abc import Iterator
from typing import Any

import msgspec
import msgspec.inspect as wire
import pytest

from app.core.pods import PodShapeError, PodWire, pod_wire
from webhook.handlers.pods import POD_SHAPE
from webhook.shapes import INTEGER, STRING, STRING_MAP, Fields, merged, problems, shape_of


class _Inner(msgspec.Struct):
    cpu: str | int | float | None = None
    on: bool | None = None


class _Outer(msgspec.Struct):
    name: str | None = msgspec.field(default=None, name="displayName")
    items: list[_Inner] | None = None
    quantities: dict[str, str | int | float] | None = None


SHAPE = shape_of(_Outer)


@pytest.mark.parametrize(
    ("value", "found"),
    [
        pytest.param(None, [], id="null-fits"),
        pytest.param({"displayName": "x", "items": [{"cpu": 1.5, "on": True}]}, [], id="fits"),
        pytest.param({"name": 3}, [], id="python-name-not-read"),
        pytest.param(
            {"displayName": 3}, ["o.displayName: must be a string, got a number"], id="wire-name"
        ),
        pytest.param(
            {"items": [{"cpu": True, "on": "yes"}]},
            [
                "o.items[0].cpu: must be a quantity (a string or a number), got a boolean",
                "o.items[0].on: must be a boolean, got a string",
            ],
            id="every-misfit",
        ),
        pytest.param(
            {"quantities": {"cpu": []}},
            ["o.quantities['cpu']: must be a quantity (a string or a number), got a list"],
            id="map-values",
        ),
    ],
)
def test_a_shape_is_derived_from_the_schema(value: object, found: list[str]) -> None:
    assert problems(value, SHAPE, path="o") == found


def test_merged_adds_fields_and_replaces_what_is_not_an_object() -> None:
    base = Fields(metadata=Fields(name=STRING, labels=Fields(mode=STRING)), generation=INTEGER)
    extra = Fields(metadata=Fields(labels=STRING_MAP, uid=STRING))
    shape = merged(base, extra)
    value = {"metadata": {"name": 1, "labels": {"app": 2}, "uid": 3}, "generation": "x"}
    assert problems(value, shape, path="o") == [
        "o.metadata.name: must be a string, got a number",
        "o.metadata.labels['app']: must be a string, got a number",
        "o.metadata.uid: must be a string, got a number",
        "o.generation: must be an integer, got a string",
    ]


def _leaves(info: wire.Type, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], bool]]:
    """Every field path the schema decodes, and whether a list stands at its end."""
    if isinstance(info, wire.UnionType):
        kinds = [t for t in info.types if not isinstance(t, wire.NoneType)]
        info = kinds[0] if len(kinds) == 1 else wire.StrType()
    if isinstance(info, wire.StructType):
        for field in info.fields:
            yield from _leaves(field.type, (*path, field.encode_name))
    elif isinstance(info, wire.ListType) and isinstance(info.item_type, wire.StructType):
        yield path, True
        yield from _leaves(info.item_type, (*path, "[0]"))
    else:
        yield path, isinstance(info, wire.ListType)


def _with(path: tuple[str, ...], value: Any) -> Any:
    if not path:
        return value
    head, *rest = path
    inner = _with(tuple(rest), value)
    return [inner] if head == "[0]" else {head: inner}


@pytest.mark.parametrize(
    ("path", "wrong"),
    [
        pytest.param(path, "an object" if is_list else "a list", id=".".join(path))
        for path, is_list in _leaves(wire.type_info(PodWire))
    ],
)
def test_the_webhook_refuses_what_the_pod_decoder_refuses(
    path: tuple[str, ...], wrong: str
) -> None:
    pod = _with(path, {} if wrong == "an object" else [])
    with pytest.raises(PodShapeError):
        pod_wire(pod)
    shown = "o" + "".join(part if part == "[0]" else f".{part}" for part in path)
    # A map's member is named as labels['key'].
    found = [p.replace("['", ".").replace("']", "") for p in problems(pod, POD_SHAPE, path="o")]
    assert any(problem.startswith(f"{shown}: ") for problem in found), found
