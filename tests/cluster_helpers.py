"""What the tiers that run in a harness of their own share (tests/e2e under ``make e2e``,
tests/realnode under ``make realnode``): how they keep out of plain ``pytest``, and a
Deployment of one pod."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

Manifest = dict[str, Any]


def harness_tier(
    config: pytest.Config, items: list[pytest.Item], *, here: Path, marker: str, env: str
) -> None:
    """Mark the tests below ``here`` with ``marker``; deselect them unless the tier's
    harness, which sets ``env``, runs them."""
    mine = [item for item in items if here in Path(str(item.fspath)).parents]
    for item in mine:
        item.add_marker(getattr(pytest.mark, marker))
    if not os.environ.get(env) and mine:
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item not in mine]


def deployment(pod: Manifest) -> Manifest:
    """One replica of ``pod`` (a Pod manifest: its spec, under its name, namespace and
    labels), selected by those labels."""
    metadata = pod["metadata"]
    labels = metadata["labels"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": metadata["name"], "namespace": metadata["namespace"]},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod["spec"]},
        },
    }
