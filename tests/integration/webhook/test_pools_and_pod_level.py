"""Birth limits on the real API server for pods headed to a node pool, and for pods that
declare pod-level resources."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devcluster.binaries import kubernetes_version
from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Reconciler
from tests.integration.webhook.conftest import (
    Webhook,
    headed_for,
    headroom_config,
    kubectl_result,
    pod,
)

# The API server turns pod-level in-place resize on by default from this minor.
_POD_LEVEL_RESIZE_FROM = (1, 36)


@pytest.fixture
def pools(control_plane: Cluster, webhook: Webhook, live_reconciler: Reconciler) -> Iterator[None]:
    """Enforcing, with a batch pool that seeds 4x and a paused pool in dry-run."""
    spec = {
        "dryRun": False,
        "nodePools": [
            {"name": "batch", "nodeSelector": {"matchLabels": {"pool": "batch"}},
             "initialMultiplier": "4"},
            {"name": "paused", "nodeSelector": {"matchLabels": {"pool": "paused"}},
             "dryRun": True},
        ],
    }  # fmt: skip
    control_plane.kubectl("delete", "hcfg", "cluster", "--ignore-not-found")
    control_plane.kubectl(
        "create", "-f", "-", input=json.dumps(headroom_config(webhook.scope, spec=spec))
    )
    yield
    control_plane.kubectl("delete", "hcfg", "cluster", "--ignore-not-found")


def _created(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The pod as admission leaves it (server-side dry-run: nothing is stored)."""
    result = kubectl_result(cluster, "create", "-n", namespace, "--dry-run=server", "-o", "json",
                            obj=obj)  # fmt: skip
    assert result.returncode == 0, result.stderr
    created: dict[str, Any] = json.loads(result.stdout)
    return created


def _headed_to(pool: str | None) -> dict[str, Any]:
    """A pod headed for a pool by its label (None: for the node in no pool)."""
    obj = pod("p")
    if pool is not None:
        obj["spec"]["nodeSelector"] = {"pool": pool}
    return obj


def _anywhere() -> dict[str, Any]:
    """A pod that may land on any of the scenarios' nodes, whatever their pool."""
    return headed_for(pod("p"), None)


def _container_cpu_limit(obj: dict[str, Any]) -> str | None:
    limit: str | None = obj["spec"]["containers"][0]["resources"]["limits"].get("cpu")
    return limit


def _born_in_batch(cluster: Cluster, namespace: str) -> str | None:
    """The CPU limit a pod headed for the batch pool is born with."""
    return _container_cpu_limit(_created(cluster, namespace, _headed_to("batch")))


@pytest.fixture
def pooled_namespace(control_plane: Cluster, pools: None, managed_namespace: str) -> str:
    """A managed namespace, once the pools' config has reached the webhook's cache (through
    its watch): the batch pool's birth limit is seen."""
    eventually(
        lambda: _born_in_batch(control_plane, managed_namespace) == "2",
        what="the batch pool's birth limit",
    )
    return managed_namespace


def test_a_pod_headed_to_a_pool_is_born_with_the_pools_multiplier(
    control_plane: Cluster, pooled_namespace: str
) -> None:
    ns = pooled_namespace
    assert _born_in_batch(control_plane, ns) == "2"
    assert _container_cpu_limit(_created(control_plane, ns, _headed_to(None))) == "1"
    paused = _created(control_plane, ns, _headed_to("paused"))
    assert _container_cpu_limit(paused) is None
    # It might land in the paused pool, where the reconciler would never take it over.
    assert _container_cpu_limit(_created(control_plane, ns, _anywhere())) is None


def _pod_level_pod() -> dict[str, Any]:
    obj = pod("p")
    obj["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "256Mi"}}
    obj["spec"]["containers"][0]["resources"] = {}
    return obj


def test_a_pod_with_pod_level_resources_gets_a_pod_level_birth_limit_where_it_can_move(
    control_plane: Cluster, pooled_namespace: str
) -> None:
    created = _created(control_plane, pooled_namespace, _pod_level_pod())
    server = json.loads(control_plane.kubectl("version", "-o", "json"))["serverVersion"]
    seeded = (int(server["major"]), int(server["minor"].rstrip("+"))) >= _POD_LEVEL_RESIZE_FROM
    assert created["spec"]["resources"].get("limits", {}).get("cpu") == ("2" if seeded else None)
    # Containers never get a limit of Headroom's on such a pod.
    assert created["spec"]["containers"][0]["resources"].get("limits", {}).get("cpu") is None
    assert created["status"]["qosClass"] == "Burstable"
    assert kubernetes_version().startswith(f"v{server['major']}.{server['minor'].rstrip('+')}")
