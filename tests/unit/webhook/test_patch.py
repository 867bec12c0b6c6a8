"""The seeding patch is exactly "edit a copy's CPU limits": proved with jsonpatch itself."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.policy import ContainerLimit
from app.core.quantity import format_cpu_millis
from tests.unit.app.builders import container, pod
from webhook.patch import limits_patch, pod_limit_patch


def edited_copy(original: dict[str, Any], limits: list[ContainerLimit]) -> dict[str, Any]:
    """The reference: a deep copy with each named container's limits.cpu set."""
    edited = copy.deepcopy(original)
    for limit in limits:
        field = "initContainers" if limit.sidecar else "containers"
        for item in edited["spec"].get(field) or ():
            if item.get("name") == limit.name:
                resources = item.get("resources")
                if not isinstance(resources, dict):
                    resources = item["resources"] = {}
                if not isinstance(resources.get("limits"), dict):
                    resources["limits"] = {}
                resources["limits"]["cpu"] = format_cpu_millis(limit.limit_m)
    return edited


def _container(name: str, shape: str, cpu_limit: str | None) -> dict[str, Any]:
    item = container(name, cpu_limit=cpu_limit)
    if shape == "no-resources":
        del item["resources"]
    elif shape == "null-resources":
        item["resources"] = None
    elif shape == "no-limits":
        del item["resources"]["limits"]
    return item


shapes = st.sampled_from(["full", "no-resources", "null-resources", "no-limits"])
millis = st.integers(min_value=1, max_value=64_000)


@given(
    apps=st.lists(st.tuples(shapes, st.none() | st.sampled_from(["1", "250m"])), max_size=3),
    sidecars=st.lists(st.tuples(shapes, st.none()), max_size=2),
    data=st.data(),
)
def test_applying_the_patch_gives_the_edited_copy(
    apps: list[tuple[str, str | None]],
    sidecars: list[tuple[str, str | None]],
    data: st.DataObject,
) -> None:
    original = pod(
        containers=[_container(f"app-{i}", shape, cpu) for i, (shape, cpu) in enumerate(apps)],
        init_containers=[
            {**_container(f"side-{i}", shape, cpu), "restartPolicy": "Always"}
            for i, (shape, cpu) in enumerate(sidecars)
        ],
    )
    names = [(False, f"app-{i}") for i in range(len(apps))]
    names += [(True, f"side-{i}") for i in range(len(sidecars))]
    chosen = data.draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
    limits = [ContainerLimit(name, sidecar, data.draw(millis)) for sidecar, name in chosen]
    expected = edited_copy(original, limits)
    operations = limits_patch(original, limits)
    if expected == original:
        assert operations is None
    else:
        assert operations is not None
        assert jsonpatch.apply_patch(original, operations) == expected
        assert all("/resources" in op["path"] and op["op"] == "add" for op in operations)


def test_an_unchanged_limit_gives_no_patch() -> None:
    original = pod(containers=[container("app", cpu_limit="1")])
    assert limits_patch(original, [ContainerLimit("app", False, 1000)]) is None


def test_the_deepest_existing_part_is_patched() -> None:
    original = pod(containers=[_container("a", "no-limits", None), container("b")])
    assert limits_patch(
        original, [ContainerLimit("a", False, 1000), ContainerLimit("b", False, 1500)]
    ) == [
        {"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"cpu": "1"}},
        {"op": "add", "path": "/spec/containers/1/resources/limits/cpu", "value": "1500m"},
    ]


def test_sidecars_are_patched_under_init_containers_by_name() -> None:
    original = pod(
        containers=[container("app")],
        init_containers=[container("app", restart_policy="Always")],
    )
    assert limits_patch(original, [ContainerLimit("app", True, 200)]) == [
        {"op": "add", "path": "/spec/initContainers/0/resources/limits/cpu", "value": "200m"}
    ]


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param({"requests": {"cpu": "1"}}, id="no-limits-yet"),
        pytest.param({"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}, id="memory-limit"),
    ],
)
def test_the_pod_level_patch_adds_only_the_pod_level_cpu_limit(resources: dict[str, Any]) -> None:
    original = pod(resources=resources)
    expected = copy.deepcopy(original)
    expected["spec"]["resources"].setdefault("limits", {})["cpu"] = "2500m"
    assert jsonpatch.apply_patch(original, pod_limit_patch(original, 2500)) == expected
