"""What the tests beside the real VPA share, in either tier: VPA's components (the tier
gives ``metrics_api``), the tenant guide's VPA, what its recommender wrote, a
Deployment's live pod, and how far Headroom's limit trailed the floor VPA's upper bound
sets."""

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import pytest

from app.core.apipaths import PODS, VERTICAL_POD_AUTOSCALERS
from app.core.quantity import parse_cpu_millis
from devcluster.vpa import running_vpa
from tests.integration.conftest import Cluster

Obj = dict[str, Any]


class Sampled(Protocol):
    """One sample of a container: when, its CPU limit and VPA's upper bound (millicores;
    None before VPA recommends)."""

    @property
    def at(self) -> float: ...

    @property
    def limit_m(self) -> int | None: ...

    @property
    def upper_m(self) -> int | None: ...


def requests_only_vpa(namespace: str, deployment: str, *, min_cpu: str) -> Obj:
    """The tenant guide's recipe: a ``RequestsOnly`` VPA in ``InPlaceOrRecreate`` mode on a
    Deployment's CPU, never below ``min_cpu`` (the template's request), VPA's cold start
    (its 25m floor) included."""
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": deployment, "namespace": namespace},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "updatePolicy": {"updateMode": "InPlaceOrRecreate"},
            "resourcePolicy": {
                "containerPolicies": [
                    {
                        "containerName": "*",
                        "controlledValues": "RequestsOnly",
                        "controlledResources": ["cpu"],
                        "minAllowed": {"cpu": min_cpu},
                    }
                ]
            },
        },
    }


def cpu(resources: Obj | None, kind: str) -> int | None:
    """A container's CPU ``requests`` or ``limits`` (millicores); None where unset."""
    value = (resources or {}).get(kind, {}).get("cpu")
    return None if value is None else parse_cpu_millis(str(value))


def recommended_cpu(
    cluster: Cluster, namespace: str, name: str, container: str = "app"
) -> tuple[int | None, int | None]:
    """The CPU target and upper bound (millicores) VPA's recommender wrote for
    ``container`` in VPA ``name``, once it has."""
    vpa = cluster.api.get(VERTICAL_POD_AUTOSCALERS.path(namespace=namespace, name=name))
    assert vpa is not None, f"no VerticalPodAutoscaler {namespace}/{name}"
    recommendation = vpa.get("status", {}).get("recommendation", {})
    for entry in recommendation.get("containerRecommendations", []):
        if entry["containerName"] == container:
            target, upper = entry["target"]["cpu"], entry["upperBound"]["cpu"]
            return parse_cpu_millis(target), parse_cpu_millis(upper)
    return None, None


def live_pod(cluster: Cluster, namespace: str, app: str) -> Obj | None:
    """The one pod labelled ``app`` that is not being deleted; None while there is not
    exactly one."""
    listed = cluster.api.items(PODS.path(namespace=namespace), labelSelector=f"app={app}")
    live = [p for p in listed if "deletionTimestamp" not in p["metadata"]]
    return live[0] if len(live) == 1 else None


@pytest.fixture
def vpa(
    control_plane: Cluster,
    metrics_api: None,
    third_party_crds: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """VPA's three components; gone after the test, with the webhook VPA registered."""
    with running_vpa(
        control_plane.kubeconfig,
        tmp_path_factory.mktemp("vpa"),
        control_plane.kubectl,
        pki_dir=control_plane.plane.pki_dir,
    ):
        yield


def allocatable_m(cluster: Cluster, node: str) -> int:
    """The node's allocatable CPU (millicores)."""
    text = cluster.kubectl("get", "node", node, "-o", "jsonpath={.status.allocatable.cpu}")
    return parse_cpu_millis(text)


def lag_behind_floor(samples: Sequence[Sampled], allocatable: int) -> float:
    """The longest the limit stayed below the floor a RequestsOnly VPA sets (seconds): its
    upper bound, unbounded before it recommends, at most the node's allocatable CPU."""
    longest, since = 0.0, None
    for s in samples:
        floor = allocatable if s.upper_m is None else min(s.upper_m, allocatable)
        below = s.limit_m is not None and s.limit_m < floor
        if below and since is None:
            since = s.at
        elif not below and since is not None:
            longest, since = max(longest, s.at - since), None
    if since is not None and samples:
        longest = max(longest, samples[-1].at - since)
    return longest
