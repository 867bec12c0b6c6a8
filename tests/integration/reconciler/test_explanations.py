"""Explanations follow the limits: each settled limit has its annotation and its event,
`kubectl headroom explain` agrees with the annotation, an edited annotation is put back,
and the config's ManagedPods column follows changes."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.integration.conftest import Cluster, eventually
from tests.integration.kubectl_headroom.plugin import kubectl_headroom_json
from tests.integration.reconciler import audit
from tests.integration.reconciler.conftest import Scene, stays

MANAGED = ("a", "b", "c", "d", "e", "f")
# The annotation's own bookkeeping, which explain does not compute.
_BOOKKEEPING = ("computedAt", "policy", "dryRun")


def _explain(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return kubectl_headroom_json(cluster, "explain", name, "-n", namespace)


def _started(scene: Scene, **spec: Any) -> str:
    """Enforcing (with ``spec``) on a fresh 16-core node, the reconciler running."""
    scene.configure(dryRun=False, **spec)
    node = scene.make_node(cpu="16")
    scene.start_reconciler()
    return node


def test_every_settled_limit_has_its_annotation_and_event_and_explain_agrees(
    scene: Scene,
) -> None:
    control_plane, pods = scene.cluster, scene.pods
    node = _started(scene)
    for index, name in enumerate(MANAGED):
        pods.add(name, node=node, cpu=f"{250 * (index + 1)}m")
    eventually(lambda: all(pods.explained(n) for n in MANAGED), timeout=60, what="explained")
    # Neighbours book most of the node: every managed limit shrinks, and is explained again.
    for name, cpu in (("x", "5"), ("y", "4")):
        pods.neighbour(name, node=node, cpu=cpu)
    eventually(
        lambda: all(
            (pods.status_annotation(n) or {}).get("slack") == f"{16000 - 9000 - 5250}m"
            and pods.explained(n)
            for n in MANAGED
        ),
        timeout=60,
        what="every shrunk limit explained",
    )
    for name in MANAGED:
        annotation = pods.status_annotation(name)
        assert annotation is not None
        shown = {k: v for k, v in annotation.items() if k not in _BOOKKEEPING}
        assert _explain(control_plane, pods.namespace, name)["annotation"] == shown, name


def test_an_edited_status_annotation_is_put_back(scene: Scene) -> None:
    control_plane, pods = scene.cluster, scene.pods
    pods.add("p", node=_started(scene))
    original = eventually(lambda: pods.status_annotation("p"), what="the annotation")
    control_plane.kubectl(
        "annotate", "pod", "p", "-n", pods.namespace, "--overwrite",
        'kube-headroom.dev/status={"targetLimit":"64"}',
    )  # fmt: skip
    edited = time.monotonic()
    eventually(
        lambda: (
            {k: v for k, v in (pods.status_annotation("p") or {}).items() if k != "computedAt"}
            == {k: v for k, v in original.items() if k != "computedAt"}
        ),
        timeout=10,
        interval=0.1,
        what="the annotation put back",
    )
    # Debounce (2 s, up to 3 s with jitter) plus one second.
    assert time.monotonic() - edited <= 3.0 + 1.0


def test_managed_pods_in_the_config_status_follow_changes(scene: Scene) -> None:
    control_plane, pods = scene.cluster, scene.pods
    node = _started(scene)

    def managed_pods() -> int:
        status = json.loads(control_plane.kubectl("get", "hcfg", "cluster", "-o", "json"))
        return int(status.get("status", {}).get("managedPods", -1))

    # Other tests' namespaces may still be going away: count from a steady baseline.
    baseline = eventually(
        lambda: (
            (n := managed_pods()) >= 0 and stays(lambda: managed_pods() == n, seconds=2) and [n]
        ),
        what="a steady count",
    )[0]
    pods.add("p", node=node)
    created = time.monotonic()
    eventually(lambda: managed_pods() == baseline + 1, timeout=10, interval=0.1, what="+1")
    assert time.monotonic() - created <= 3.0 + 1.0
    column = control_plane.kubectl("get", "hcfg", "cluster")
    assert column.splitlines()[1].split()[3] == str(baseline + 1), column


def test_a_slack_move_inside_the_deadband_writes_nothing(scene: Scene) -> None:
    control_plane, pods = scene.cluster, scene.pods
    # No cap but the node: the pod's target follows the slack, 1:1.
    node = _started(scene, maxMultiplier="0")
    pods.add("p", node=node, cpu="4")
    eventually(lambda: pods.explained("p"), timeout=60, what="explained")
    annotation = pods.status_annotation("p")
    assert annotation is not None
    assert annotation["targetLimit"] == "16000m"
    events = len(pods.events("p", reason="CPULimitAdjusted"))
    # A neighbour books 500m: the target moves 16000m -> 15500m, 3% of the limit, inside the
    # 5% shrink band. The limit stays, so its annotation and event stay too.
    pods.neighbour("x", node=node, cpu="500m")
    since = time.time()
    # The node is reconciled within the debounce (at most 3 s); wait past it.
    assert stays(lambda: pods.status_annotation("p") == annotation, seconds=3.0 + 2.0)
    writes = [
        w
        for w in audit.writes(control_plane.plane)
        if w.received >= since
        and w.namespace == pods.namespace
        and w.name == "p"
        and w.user.endswith(":kube-headroom-reconciler")
    ]
    assert writes == []
    assert len(pods.events("p", reason="CPULimitAdjusted")) == events
    # explain computes the numbers as they are now: the neighbour is booked there.
    live = _explain(control_plane, pods.namespace, "p")
    assert live["annotation"]["slack"] == "11500m"
    assert live["annotation"]["targetLimit"] == "15500m"
    assert live["patch"] is False
