"""The three stop buttons act at once, mid-wave included (design §5, runbook rollback).

A node's resizes are paced by `perNodePatchesPerSecond`; with 1/s, a wave of eight pods
on one node takes eight seconds. Each stop is pressed after two of them, and the API
server's audit log must show no resize received after the reconciler logged seeing it,
but for the one that may already have been on its way.
"""

import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.audit import resizes, writes
from tests.integration.reconciler.conftest import Reconciler, Scene

WAVE = 8
# The last slot of the wave plus a margin: any write still planned would have gone out.
AFTERMATH_SECONDS = WAVE + 3
# A resize that passed the write gate just before the stop was observed can reach the API
# server just after (runbook: "A stop pressed while resizes are in flight"). The node's
# pace lets one go a second, so the next one planned would come far later than this.
IN_FLIGHT_SECONDS = 0.25


def _dry_run(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("patch", "hcfg", "cluster", "--type", "merge", "-p", '{"spec":{"dryRun":true}}')


def _unlabel(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("label", "namespace", namespace, "kube-headroom.dev/mode-")


def _delete_config(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("delete", "hcfg", "cluster")


def _saw_config_stop(entry: dict[str, Any], namespace: str) -> bool:
    return entry.get("msg") == "configuration applied" and entry.get("dryRun") is True


def _saw_unlabel(entry: dict[str, Any], namespace: str) -> bool:
    return (
        entry.get("msg") == "namespace enrolment changed"
        and entry.get("namespace") == namespace
        and entry.get("enrolled") is False
    )


def _seen_at(
    reconciler: Reconciler, namespace: str, saw: Callable[..., bool], after: float
) -> float | None:
    for entry in reconciler.log_lines():
        stamp = datetime.fromisoformat(entry["ts"]).timestamp()
        if stamp >= after and saw(entry, namespace):
            return stamp
    return None


@pytest.mark.parametrize(
    ("stop", "saw", "stop_write"),
    [
        pytest.param(_dry_run, _saw_config_stop, ("patch", "headroomconfigs"), id="dry-run"),
        pytest.param(_unlabel, _saw_unlabel, ("patch", "namespaces"), id="namespace-label"),
        pytest.param(
            _delete_config, _saw_config_stop, ("delete", "headroomconfigs"), id="config-deleted"
        ),
    ],
)
def test_no_resize_goes_out_after_a_stop_is_observed(
    stop: Callable[[Cluster, str], None],
    saw: Callable[[dict[str, Any], str], bool],
    stop_write: tuple[str, str],
    scene: Scene,
) -> None:
    control_plane, pods = scene.cluster, scene.pods
    scene.configure(dryRun=False, rateLimits={"perNodePatchesPerSecond": 1})
    reconciler = scene.start_reconciler()
    node = scene.make_node()
    for i in range(WAVE):
        pods.add(f"p{i}", node=node, cpu="500m")
    eventually(
        lambda: len(resizes(writes(control_plane.plane), namespace=pods.namespace)) >= 2,
        timeout=60,
        what="the first two resizes of the wave",
    )
    pressed = time.time()
    stop(control_plane, pods.namespace)
    observed = eventually(
        lambda: _seen_at(reconciler, pods.namespace, saw, after=pressed - 1),
        timeout=10,
        what="the reconciler seeing the stop",
    )
    time.sleep(AFTERMATH_SECONDS)

    everything = writes(control_plane.plane)
    sent = resizes(everything, namespace=pods.namespace)
    after = [w for w in sent if w.received > observed]
    late = [w for w in after if w.received > observed + IN_FLIGHT_SECONDS]
    assert late == [], f"resizes received after the stop was observed at {observed}: {late}"
    assert len(after) <= 1, f"more than the one resize in flight: {after}"
    applied = [w for w in sent if 200 <= w.code < 300]
    assert 2 <= len(applied) < WAVE
    # Observed within one watch round trip of the API server storing the stop.
    verb, resource = stop_write
    [stored] = [
        w
        for w in everything
        if (w.verb, w.resource, w.subresource) == (verb, resource, "") and w.received >= pressed - 1
    ]
    assert observed - stored.received < 1.0
    last = max(w.received for w in sent)
    print(
        f"stop stored; observed {observed - stored.received:+.2f} s, "
        f"last resize received {last - stored.received:+.2f} s from it"
    )
    # Frozen, not removed: every pod the wave reached keeps the limit it got. A pod can be
    # resized twice (its target falls as neighbours arrive), so count pods, not patches.
    reached = {w.name for w in applied}
    limited = {f"p{i}" for i in range(WAVE) if json.dumps(pods.cpu_limits(f"p{i}")) != "[null]"}
    assert limited == reached
