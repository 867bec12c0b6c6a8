"""The kubelet's answers, from real kubelets, handled as the runbook's outcome table says.

Which resizes a kubelet answers ``Infeasible`` or ``Deferred`` is decided in its
allocation manager (``pkg/kubelet/allocation`` of the pinned release): ``Infeasible``
only for a pod that cannot be resized at all there (the in-place resize feature off,
which is locked on since 1.35; a memory request change of a container that may swap; a
pod-level change the kubelet's feature gate refuses; a changed memory-backed emptyDir
size; CPU or memory of a Guaranteed pod under a static CPU or Memory Manager policy; and,
in 1.35, requests above the node's allocatable), and ``Deferred`` for any other refusal.
A resize Headroom sends on its own changes only the limits of a Burstable pod, which
none of those rules refuses and which adds no requests to fit: it is answered
``Infeasible`` or ``Deferred`` only when it joins a change the kubelet already refuses
(the kubelet judges the whole pending spec).
The scenarios here make the kubelet refuse a tenant's change for real, then show the
kubelet's answer to Headroom's own resize that follows, and what Headroom does.
"""

from __future__ import annotations

import json
import time
from typing import Any

from app.core.quantity import parse_quantity
from devcluster import ControlPlane
from devcluster.kubepods import container_cgroup
from devcluster.realnodes import STATIC, STATIC_POLICY_LABEL, WORKLOAD
from reconciler.bodies import REPORTING_CONTROLLER
from reconciler.outcomes import Result
from tests.integration.conftest import Cluster, eventually
from tests.integration.kubectl_headroom.plugin import kubectl_headroom
from tests.integration.rbac import RECONCILER
from tests.integration.reconciler.audit import resizes, writes
from tests.integration.reconciler.conftest import stays
from tests.realnode import builders
from tests.realnode.conftest import Scene
from tests.realnode.kubelets import Kubelets


def pending(kubelets: Kubelets, namespace: str, pod: str) -> dict[str, Any] | None:
    """The pod's PodResizePending condition, about its current generation."""
    found = kubelets.pod(namespace, pod)
    if found["status"].get("observedGeneration") != found["metadata"]["generation"]:
        return None
    return next(
        (c for c in found["status"].get("conditions", []) if c["type"] == "PodResizePending"),
        None,
    )


def events(cluster: Cluster, namespace: str, pod: str, reason: str) -> list[dict[str, Any]]:
    listed = json.loads(
        cluster.kubectl(
            "get", "events", "-n", namespace, "-o", "json",
            "--field-selector", f"involvedObject.name={pod},reason={reason}",
        )
    )  # fmt: skip
    return list(listed["items"])


def by_headroom(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in items if e.get("reportingComponent") == REPORTING_CONTROLLER]


def by_kubelet(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in items if e.get("source", {}).get("component") == "kubelet"]


def warnings(cluster: Cluster, namespace: str, pod: str) -> int:
    """Headroom's ResizeInfeasible warnings on ``pod``, repeats of one event included."""
    found = by_headroom(events(cluster, namespace, pod, "ResizeInfeasible"))
    return sum(int(e.get("count") or 1) for e in found)


def headroom_resizes(plane: ControlPlane, namespace: str, pod: str) -> int:
    """Resizes of ``pod`` the reconciler sent that the API server accepted (audit log)."""
    return sum(
        1
        for w in resizes(writes(plane), namespace=namespace)
        if w.name == pod and w.user == RECONCILER.username and w.code == 200
    )


def tenant_resize(cluster: Cluster, namespace: str, pod: str, resources: dict[str, Any]) -> None:
    """A change only the pod's owner (or a VPA that controls requests only) makes."""
    patch = {"spec": {"containers": [{"name": "app", "resources": resources}]}}
    cluster.kubectl(
        "patch", "pod", pod, "-n", namespace, "--subresource", "resize", "-p", json.dumps(patch)
    )


def answer(kubelets: Kubelets, namespace: str, pod: str) -> dict[str, Any]:
    """The kubelet's answer to the pod's pending resize, once it gives one."""
    condition: dict[str, Any] = eventually(
        lambda: pending(kubelets, namespace, pod), what="the kubelet's answer"
    )
    return condition


def explain(cluster: Cluster, namespace: str, pod: str) -> dict[str, Any]:
    result = kubectl_headroom(cluster, "explain", "-n", namespace, pod, "-o", "json")
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_deferred_while_a_neighbour_holds_the_node(
    scene: Scene, managed_namespace: str, namespace: str
) -> None:
    """A request raise the kubelet cannot fit yet (memory a neighbour holds) is Deferred,
    and so is Headroom's resize that follows it: Headroom counts each once and does not
    retry. Once the neighbour is deleted, Headroom books its CPU until its containers have
    stopped, as the scheduler and the kubelet do; then the kubelet applies both."""
    cluster, kubelets, plane = scene.cluster, scene.kubelets, scene.real.plane
    reconciler = scene.start_reconciler()
    node = WORKLOAD.name
    allocatable = json.loads(cluster.kubectl("get", "node", node, "-o", "json"))
    half_mib = int(parse_quantity(allocatable["status"]["allocatable"]["memory"]) / 2**21)
    scene.place("web", namespace=managed_namespace, node=node)
    scene.settled(managed_namespace, "web", 3000)
    leaving = builders.container("leaving", cpu="1500m", memory=f"{half_mib}Mi", pre_stop_sleep=30)
    scene.place("leaving", leaving, namespace=namespace, node=node, grace_seconds=60)
    scene.ready(namespace, "leaving")
    scene.settled(managed_namespace, "web", 1500)

    tenant_resize(cluster, managed_namespace, "web", {"requests": {"memory": f"{half_mib + 64}Mi"}})
    condition = answer(kubelets, managed_namespace, "web")
    assert condition["reason"] == "Deferred", condition
    assert "memory" in condition["message"]
    assert by_kubelet(events(cluster, managed_namespace, "web", "ResizeDeferred"))
    eventually(lambda: reconciler.resizes(Result.DEFERRED) == 1, what="Deferred counted")
    assert reconciler.sample("headroom_resizes_deferred") == 1

    # Headroom's own resize now: a lower cap (1.5 x the request).
    sent = headroom_resizes(plane, managed_namespace, "web")
    scene.enforce(maxMultiplier="1.5")
    eventually(
        lambda: scene.limit(managed_namespace, "web") == 750, what="Headroom's resize to 750m"
    )
    assert headroom_resizes(plane, managed_namespace, "web") == sent + 1
    condition = answer(kubelets, managed_namespace, "web")
    assert condition["reason"] == "Deferred", condition
    eventually(lambda: reconciler.resizes(Result.DEFERRED) == 2, what="the second Deferred")
    waiting = kubelets.observe(managed_namespace, "web").containers["app"]
    assert (waiting.status, waiting.cgroup) == (1500, 1500)
    # Deferred is the kubelet's to retry: Headroom sends nothing more.
    assert stays(lambda: headroom_resizes(plane, managed_namespace, "web") == sent + 1, seconds=5)

    booked_slack = reconciler.sample("headroom_node_slack_cores", node=node)
    assert booked_slack is not None
    scene.delete(namespace, "leaving")
    # Its preStop keeps its containers, and its CPU on the kubelet, for 30 s: Headroom's
    # slack stays where it was meanwhile.
    assert stays(
        lambda: reconciler.sample("headroom_node_slack_cores", node=node) == booked_slack,
        seconds=10,
    )
    terminating = json.loads(
        cluster.kubectl("get", "pod", "leaving", "-n", namespace, "-o", "json")
    )
    assert terminating["metadata"]["deletionTimestamp"]
    applied = scene.settled(managed_namespace, "web", 750, timeout=90)
    assert applied.containers["app"].cgroup == 750
    eventually(
        lambda: (
            round(reconciler.sample("headroom_node_slack_cores", node=node) or 0, 3)
            == round(booked_slack + 1.5, 3)
        ),
        what="the neighbour's CPU unbooked once it is gone",
    )
    eventually(lambda: reconciler.sample("headroom_resizes_deferred") == 0, what="gauge at 0")
    assert reconciler.resizes(Result.DEFERRED) == 2
    assert headroom_resizes(plane, managed_namespace, "web") == sent + 1


def test_infeasible_on_a_swap_node_backs_headroom_off(
    scene: Scene, managed_namespace: str, namespace: str
) -> None:
    """On a node with swap (LimitedSwap), a kubelet cannot resize the memory request of a
    container that may swap: Infeasible. Headroom counts it, says so in a warning event
    and leaves the pod alone for backoffPeriod; its resize after that is answered
    Infeasible too, and it backs off again."""
    cluster, kubelets, plane = scene.cluster, scene.kubelets, scene.real.plane
    scene.enforce(backoffPeriod="15s")
    reconciler = scene.start_reconciler()
    node = STATIC.name
    cache = builders.container(cpu="200m", memory="64Mi", limits={"memory": "256Mi"})
    scene.place("cache", cache, namespace=managed_namespace, node=node)
    # Alone on the node: its allocatable 1.5 cores.
    scene.settled(managed_namespace, "cache", 1500)
    tenant_resize(cluster, managed_namespace, "cache", {"requests": {"memory": "96Mi"}})
    condition = answer(kubelets, managed_namespace, "cache")
    assert condition["reason"] == "Infeasible", condition
    assert condition["message"] == "In-place resize of containers with swap is not supported."
    eventually(lambda: reconciler.resizes(Result.INFEASIBLE) == 1, what="Infeasible counted")
    warned = eventually(
        lambda: by_headroom(events(cluster, managed_namespace, "cache", "ResizeInfeasible")),
        what="Headroom's ResizeInfeasible event",
    )
    assert warned[0]["type"] == "Warning"
    assert "with swap is not supported" in warned[0]["message"]
    assert "not resizing for 15s" in warned[0]["message"]
    backed_off = time.monotonic()

    # A neighbour would lower it to 1000m; while backed off, Headroom leaves it at 1500m.
    sent = headroom_resizes(plane, managed_namespace, "cache")
    scene.neighbour(namespace, node=node, cpu="500m")
    assert stays(
        lambda: scene.limit(managed_namespace, "cache") == 1500,
        seconds=max(0.0, 10 - (time.monotonic() - backed_off)),
    )
    assert headroom_resizes(plane, managed_namespace, "cache") == sent
    # After the back-off Headroom resizes; the kubelet answers that Infeasible as well.
    eventually(
        lambda: scene.limit(managed_namespace, "cache") == 1000,
        timeout=40,
        what="Headroom's resize after the back-off",
    )
    assert headroom_resizes(plane, managed_namespace, "cache") == sent + 1
    eventually(
        lambda: reconciler.resizes(Result.INFEASIBLE) == 2, timeout=90, what="the second Infeasible"
    )
    again = pending(kubelets, managed_namespace, "cache")
    assert again is not None
    assert again["reason"] == "Infeasible"
    eventually(
        lambda: warnings(cluster, managed_namespace, "cache") == 2,
        timeout=90,
        what="a second warning",
    )
    # Nothing was applied: the kubelet still runs the pod at its last feasible limit.
    kept = kubelets.observe(managed_namespace, "cache").containers["app"]
    assert (kept.status, kept.cgroup) == (1500, 1500)


def test_a_guaranteed_pod_on_a_static_policy_node(scene: Scene, managed_namespace: str) -> None:
    """Headroom never manages a Guaranteed pod; resized by hand on a node with the static
    CPU manager policy, it is the one resize such a kubelet refuses."""
    cluster, kubelets = scene.cluster, scene.kubelets
    reconciler = scene.start_reconciler()
    pinned = builders.container(cpu="1", memory="64Mi", limits={"cpu": "1", "memory": "64Mi"})
    scene.place("pinned", pinned, namespace=managed_namespace, node=STATIC.name)
    scene.ready(managed_namespace, "pinned")
    assert explain(cluster, managed_namespace, "pinned")["ineligible"] == "not-burstable"
    # The static policy gave the container a CPU of its own (CPU 0 is the shared pool).
    pod = kubelets.pod(managed_namespace, "pinned")
    path = f"{container_cgroup(pod, 'app')}/cpuset.cpus.effective"
    assert scene.real.guest(STATIC.name).read(path)[path].strip() == "1"

    tenant_resize(
        cluster,
        managed_namespace,
        "pinned",
        {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}},
    )
    condition = answer(kubelets, managed_namespace, "pinned")
    assert condition["reason"] == "Infeasible"
    assert 'CPU Manager policy "static"' in condition["message"]
    assert by_kubelet(events(cluster, managed_namespace, "pinned", "ResizeInfeasible"))
    # Not Headroom's pod: not counted, not explained, not resized.
    assert stays(lambda: reconciler.resizes(Result.INFEASIBLE) == 0, seconds=5)
    assert not by_headroom(events(cluster, managed_namespace, "pinned", "ResizeInfeasible"))
    assert headroom_resizes(scene.real.plane, managed_namespace, "pinned") == 0


def test_a_burstable_pod_on_a_static_policy_node_is_resized_unless_excluded(
    scene: Scene, managed_namespace: str, namespace: str
) -> None:
    """What the README says: under a static policy the kubelet resizes Burstable pods (the
    only ones Headroom manages); preflight flags the node all the same, and
    ``excludedNodeSelector`` takes it out of Headroom's hands."""
    cluster = scene.cluster
    reconciler = scene.start_reconciler()
    node = STATIC.name
    scene.place("worker", builders.container(cpu="200m"), namespace=managed_namespace, node=node)
    scene.settled(managed_namespace, "worker", 1500)
    assert reconciler.resizes(Result.OK) >= 1
    preflight = _preflight(cluster)
    assert any(
        f["check"] == "static-resource-manager" and node in f["subject"] for f in preflight
    ), preflight

    scene.enforce(excludedNodeSelector={"matchLabels": {STATIC_POLICY_LABEL: "static"}})
    eventually(
        lambda: explain(cluster, managed_namespace, "worker")["ineligible"] == "node-excluded",
        what="the node excluded",
    )
    assert not [f for f in _preflight(cluster) if f["check"] == "static-resource-manager"]
    # A neighbour no longer moves the excluded pod's limit.
    scene.neighbour(namespace, node=node, cpu="500m")
    scene.ready(namespace, "neighbour")
    assert stays(lambda: scene.limit(managed_namespace, "worker") == 1500, seconds=5)


def _preflight(cluster: Cluster) -> list[dict[str, Any]]:
    # Findings make preflight exit non-zero: only its report is read here.
    result = kubectl_headroom(cluster, "preflight", "-o", "json")
    findings: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return findings
