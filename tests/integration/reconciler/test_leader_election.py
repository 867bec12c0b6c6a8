"""Two replicas: only the leader writes; a killed leader hands over within the lease."""

import json
import signal
import time

from tests.integration.conftest import Cluster, eventually
from tests.integration.kubectl_headroom.test_preflight import kubectl_headroom
from tests.integration.rbac import RELEASE_NAMESPACE
from tests.integration.reconciler.conftest import Reconciler, Scene

LEASE_SECONDS = 15
# The follower sees the lease expire up to one retry (2 s, jittered up to 4.4 s) after it
# did, and takes it at its next retry: two retries beyond the lease itself.
HANDOVER_SLACK_SECONDS = 9
LEASE_NAMESPACE = RELEASE_NAMESPACE


def _holder(cluster: Cluster, namespace: str) -> str | None:
    out = cluster.kubectl(
        "get", "lease", "kube-headroom-reconciler", "-n", namespace, "-o", "json", check=False
    )
    if not out:
        return None
    holder = json.loads(out)["spec"].get("holderIdentity")
    return str(holder) if holder else None


def _identity(reconciler: Reconciler) -> str | None:
    for line in reconciler.log_lines():
        if line.get("msg") == "became leader":
            return str(line["identity"])
    return None


def test_only_the_leader_writes_and_a_killed_leader_hands_over(scene: Scene) -> None:
    control_plane, pods, start_reconciler = scene.cluster, scene.pods, scene.start_reconciler
    node = scene.enforcing_node()
    for name, cpu in (("a", "1"), ("b", "3")):
        pods.add(name, node=node, cpu=cpu)
    # The chart's Role allows leases only in the release namespace.
    control_plane.kubectl(
        "delete", "lease", "kube-headroom-reconciler", "-n", LEASE_NAMESPACE, "--ignore-not-found"
    )
    election = ("--leader-elect", f"--leader-election-namespace={LEASE_NAMESPACE}")
    first = start_reconciler(*election)
    eventually(lambda: _identity(first), what="the first replica to lead")
    second = start_reconciler(*election)
    pods.wait_limit("a", "4")
    pods.wait_limit("b", "12")
    assert _holder(control_plane, LEASE_NAMESPACE) == _identity(first)
    assert first.resizes("ok") == 2
    assert second.resizes("ok") == 0
    assert _identity(second) is None
    # The follower is ready, and says whose lease it waits for; so does kubectl headroom.
    assert second.ready()
    waiting = [e["msg"] for e in second.log_lines() if "waiting for the lease" in e["msg"]]
    assert waiting == [
        f"waiting for the lease held by {_identity(first)}; it expires in {LEASE_SECONDS}s "
        "unless renewed"
    ], waiting
    status = json.loads(
        kubectl_headroom(
            control_plane, "status", "--lease-namespace", LEASE_NAMESPACE, "-o", "json"
        ).stdout
    )
    assert status["leader"]["holder"] == _identity(first)
    assert 0 < status["leader"]["expiresInSeconds"] <= LEASE_SECONDS

    killed = time.monotonic()
    first.terminate(signal.SIGKILL)
    eventually(lambda: _identity(second), timeout=LEASE_SECONDS + 10, what="handover")
    assert time.monotonic() - killed <= LEASE_SECONDS + HANDOVER_SLACK_SECONDS
    assert _holder(control_plane, LEASE_NAMESPACE) == _identity(second)
    # The new leader finds the node converged: nothing to patch.
    time.sleep(4)
    assert second.resizes("ok") == 0

    pods.add("c", node=node, cpu="4")
    pods.wait_limit("a", "2")
    assert second.resizes("ok") >= 1
