"""Finders over rendered manifests."""

from collections.abc import Iterable
from typing import Any

from tests.unit.chart.helm import Manifest


def find_all(manifests: Iterable[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def names(manifests: Iterable[Manifest], kind: str) -> set[str]:
    return {m["metadata"]["name"] for m in find_all(manifests, kind)}


def find(manifests: Iterable[Manifest], kind: str, name: str) -> Manifest:
    """The one object of this kind and name."""
    found = [m for m in find_all(manifests, kind) if m["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def container(deployment: Manifest) -> dict[str, Any]:
    """The Deployment's only container."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result


def volumes(deployment: Manifest) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in deployment["spec"]["template"]["spec"].get("volumes", [])}


def mounts(deployment: Manifest) -> dict[str, dict[str, Any]]:
    """Volume mounts of the only container, by mount path."""
    return {m["mountPath"]: m for m in container(deployment).get("volumeMounts", [])}


def webhook(configuration: Manifest, name: str) -> dict[str, Any]:
    found = [w for w in configuration["webhooks"] if w["name"] == name]
    assert len(found) == 1, f"expected one webhook {name}"
    result: dict[str, Any] = found[0]
    return result


def rule_triples(role: Manifest) -> set[tuple[str, str, str]]:
    """A Role's grants flattened to (apiGroup, resource, verb)."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())
