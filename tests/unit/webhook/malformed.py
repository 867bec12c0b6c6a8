"""Malformed admission input: every field of complete objects replaced by every JSON type.

Shared by the fuzz test (every answer is clean) and the memory test (the server's memory
returns to its baseline after tens of thousands of such reviews).
"""

import copy
import json
from collections.abc import Iterator
from typing import Any

from tests.unit.app.builders import (
    FULL_SPEC,
    condition,
    container,
    headroom_config,
    namespace,
    owner_ref,
    resource_quota,
)
from tests.unit.webhook.builders import admission_review, new_pod
from webhook.metrics import Endpoint

# The namespace every review names (enrolled in the caches the tests seed).
REVIEW_NAMESPACE = "team-a"
# Past Python's default recursion limit (1000), so any recursive walk, str() or repr() of a
# value fails however shallow the caller's stack; still inside orjson's parse limit (1024).
DEEP = 1010
# A placeholder swapped for the deep value in the encoded body: neither json nor orjson
# will encode a value nested this deep.
DEEP_MARK = "__deeply_nested__"
CONFUSIONS: dict[str, Any] = {
    "string": "x",
    "number": 7,
    "float": 1.5,
    "boolean": True,
    "null": None,
    "list": [1, {"a": "b"}],
    "object": {"k": ["v"]},
    "deep-list": DEEP_MARK,
}


def deep_json() -> bytes:
    return b"[" * DEEP + b'"x"' + b"]" * DEEP


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every member of every object and list under ``value``."""
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in children:
        yield (*prefix, key)
        yield from _paths(child, (*prefix, key))


def replaced(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    changed = copy.deepcopy(obj)
    parent = changed
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return changed


def full_pod() -> dict[str, Any]:
    """A pod with every field the mutating handler reads, each present and valid."""
    pod = new_pod(
        containers=[
            container("app", cpu_limit="2", memory_limit="256Mi", cpu_resize_policy="NotRequired"),
            container("no-limits"),
        ],
        init_containers=[
            container("sidecar", restart_policy="Always"),
            container("init", restart_policy="OnFailure"),
        ],
        labels={"app": "web", "kube-headroom.dev/mode": "managed"},
        max_cpu="4",
        owners=[owner_ref()],
    )
    pod["metadata"]["annotations"]["kube-headroom.dev/status"] = "{}"
    pod["metadata"]["generation"] = 1
    pod["spec"]["nodeName"] = "node-1"
    pod["spec"]["overhead"] = {"cpu": "250m", "memory": "64Mi"}
    pod["status"] = {
        "phase": "Pending",
        "qosClass": "Burstable",
        "observedGeneration": 1,
        "conditions": [condition("PodResizePending", reason="Deferred", message="busy")],
    }
    return pod


def full_config() -> dict[str, Any]:
    selector = {
        "matchLabels": {"team": "a"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}],
    }
    return headroom_config(
        spec={**FULL_SPEC, "namespaceSelector": selector, "excludedNodeSelector": selector}
    )


def confused_reviews() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(endpoint, which object, review) with every field replaced by every confusion."""
    namespace_update = admission_review(
        namespace("team-b", labels={"kube-headroom.dev/mode": "managed"}),
        operation="UPDATE",
        old=namespace("team-b", labels={"x": "y"}),
    )
    cases = [
        (Endpoint.MUTATE_PODS, admission_review(full_pod(), namespace=REVIEW_NAMESPACE)),
        (
            Endpoint.VALIDATE_QUOTAS,
            admission_review(resource_quota(hard={"limits.cpu": "1"}), operation="UPDATE"),
        ),
        (Endpoint.VALIDATE_NAMESPACES, namespace_update),
        (Endpoint.VALIDATE_CONFIG, admission_review(full_config(), operation="UPDATE")),
    ]
    for endpoint, review in cases:
        for field in ("object", "oldObject"):
            target = review["request"][field]
            if target is None:
                continue
            for path in _paths(target):
                for confusion in CONFUSIONS.values():
                    changed = replaced(target, path, confusion)
                    yield (
                        endpoint,
                        field,
                        {
                            **review,
                            "request": {**review["request"], field: changed},
                        },
                    )


def encoded(review: dict[str, Any]) -> bytes:
    return json.dumps(review).replace(f'"{DEEP_MARK}"', deep_json().decode()).encode()
