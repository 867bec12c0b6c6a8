"""Beside a node autoscaler: the real Karpenter (its KWOK provider) provisions, consolidates,
drifts and expires nodes for a Deployment in a managed namespace with the real webhook and
reconciler enforcing, and for the same Deployment in a namespace Headroom leaves alone (the
control: outside the webhook's scope and not enrolled, so neither process touches it).

Karpenter packs nodes by requests and never reads ``limits.cpu``, the one field Headroom
writes, so Headroom should change nothing it does: the same NodeClaims, the same
timeline. What a tenant sees is the ceiling: a pod moved off an emptied node to a fuller
one gets the ceiling the policy gives there, within the debounce plus a few seconds.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.core.apipaths import PODS, Resource
from app.core.quantity import parse_cpu_millis
from devcluster.binaries import kubernetes_version
from devcluster.karpenter import Karpenter, instance_type, karpenter_dir
from devcluster.nodes import KUBELET_VERSION_ANNOTATION
from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Reconciler
from tests.integration.webhook.conftest import Webhook

# One instance type: 4 CPUs, of which Karpenter leaves 3900m allocatable. Three 1-CPU pods
# fit on a node and four do not, so six replicas need two nodes.
INSTANCE = instance_type("hr-4cpu", cpu="4", memory="16Gi", price=0.2)
ALLOCATABLE_M = 3900
REQUEST_M = 1000
REPLICAS = 6
# The config's default debounce, which the managed run keeps.
DEBOUNCE_S = 2.0
# A NodeClaim created by drift expires this long after it was created.
EXPIRE_AFTER_S = 30
POOL_TAINT = "headroom-test/karpenter"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
NODE_CLAIMS = Resource("karpenter.sh", "v1", "nodeclaims", namespaced=False)
DEPLOYMENTS = Resource("apps", "v1", "deployments", namespaced=True)
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
CONSOLIDATION_SLACK_S = 10.0
# Karpenter's disruption loop looks again 10 s after a pass that found nothing to do; a
# pass that tried something (and waited to validate it) takes longer.
IDLE_PASS_S = 10.5


def policy_ceiling(pods_on_node: int) -> int:
    """The policy's target (design §2) for each of ``n`` managed pods requesting r alone on
    an A-millicore node: slack S = A - n·r, split by request, so each gets r + S/n (the
    1-CPU floor is below S/n), at most A (the 10x cap, 10 CPUs, is above it), in 10m steps."""
    slack = ALLOCATABLE_M - pods_on_node * REQUEST_M
    if slack <= 0:
        return REQUEST_M
    raw = REQUEST_M + slack / pods_on_node
    return min(ALLOCATABLE_M, round(raw / 10) * 10)


class Watch:
    """``kubectl get --watch -o json`` of one kind, each object stamped as it arrives."""

    def __init__(self, cluster: Cluster, *args: str) -> None:
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self._popen = subprocess.Popen(
            [str(cluster.bin_dir / "kubectl"), "get", *args, "--watch", "-o", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=cluster.environ(),
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        stdout = self._popen.stdout
        assert stdout is not None
        text = codecs.getincrementaldecoder("utf-8")()
        decoder = json.JSONDecoder()
        buffer = ""
        for chunk in iter(lambda: os.read(stdout.fileno(), 65536), b""):
            buffer += text.decode(chunk)
            while buffer.strip():
                buffer = buffer.lstrip()
                try:
                    obj, end = decoder.raw_decode(buffer)
                except ValueError:
                    break
                self.seen.append((time.monotonic(), obj))
                buffer = buffer[end:]

    def stop(self) -> None:
        self._popen.terminate()
        self._popen.wait(timeout=10)
        self._thread.join(timeout=10)
        if self._popen.stdout is not None:
            self._popen.stdout.close()


def cpu_limit(pod: dict[str, Any]) -> int | None:
    limit = pod["spec"]["containers"][0].get("resources", {}).get("limits", {}).get("cpu")
    return None if limit is None else parse_cpu_millis(limit)


@dataclass
class Run:
    """What one run of the scenario measured."""

    label: str
    provisioned: int = 0
    nodeclaims: set[str] = field(default_factory=set)
    took: dict[str, float] = field(default_factory=dict)
    settled: dict[str, float] = field(default_factory=dict)
    moved: list[tuple[int | None, int | None]] = field(default_factory=list)
    limits_removed: list[str] = field(default_factory=list)
    limits_seen: set[int] = field(default_factory=set)


class Scenario:
    """One Deployment on one NodePool of its own, driven through Karpenter's provisioning,
    consolidation, drift and expiry."""

    def __init__(
        self, cluster: Cluster, karpenter: Karpenter, namespace: str, *, managed: bool
    ) -> None:
        self.cluster = cluster
        self.karpenter = karpenter
        self.namespace = namespace
        self.managed = managed
        self.pool = f"hr-{namespace}"
        self.run = Run("Headroom enforcing" if managed else "Headroom off (control)")
        self.moved: set[str] = set()
        self.pods = Watch(cluster, "pods", "-n", namespace)
        self.claims = Watch(cluster, "nodeclaims", "-l", f"{NODEPOOL_LABEL}={self.pool}")

    # -- reading state ---------------------------------------------------------------

    def every_pod(self) -> list[dict[str, Any]]:
        return self.cluster.api.items(PODS.path(namespace=self.namespace))

    def live_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.every_pod() if "deletionTimestamp" not in p["metadata"]]

    def live_claims(self) -> dict[str, str]:
        """NodeClaim name → its node's name (empty until registered)."""
        listed = self.cluster.api.items(
            NODE_CLAIMS.path(), labelSelector=f"{NODEPOOL_LABEL}={self.pool}"
        )
        return {
            c["metadata"]["name"]: c.get("status", {}).get("nodeName", "")
            for c in listed
            if "deletionTimestamp" not in c["metadata"]
        }

    def placement(self) -> dict[str, list[dict[str, Any]]] | None:
        """Node → its running pods, once every replica runs and nothing else is moving."""
        every = self.every_pod()
        pods = [p for p in every if "deletionTimestamp" not in p["metadata"]]
        web = self.cluster.api.get(DEPLOYMENTS.path(namespace=self.namespace, name="web"))
        assert web is not None, f"no Deployment {self.namespace}/web"
        replicas = int(web["spec"]["replicas"])
        if len(every) != replicas or len(pods) != replicas:
            return None
        if any(p["status"].get("phase") != "Running" for p in pods):
            return None
        nodes: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            nodes.setdefault(pod["spec"]["nodeName"], []).append(pod)
        return nodes

    def right(self, nodes: dict[str, list[dict[str, Any]]]) -> bool:
        """Every pod's limit is what Headroom should leave there: the policy's ceiling on
        its node when managed, no limit at all when not."""
        for node, pods in nodes.items():
            everyone = self.cluster.api.items(PODS.path(), fieldSelector=f"spec.nodeName={node}")
            strangers = [
                p["metadata"]["name"]
                for p in everyone
                if p["metadata"]["namespace"] != self.namespace
            ]
            assert not strangers, f"{node} runs pods of other tests: {strangers}"
            if any(cpu_limit(p) != self.want(len(pods)) for p in self.live_pods_on(node)):
                return False
        return True

    def want(self, pods_on_node: int) -> int | None:
        return policy_ceiling(pods_on_node) if self.managed else None

    def live_pods_on(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.live_pods() if p["spec"].get("nodeName") == node]

    def history(self, uid: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, p) for t, p in self.pods.seen if p["metadata"]["uid"] == uid]

    def right_since(self, uid: str, want: int | None) -> float | None:
        """When the watch last saw the pod's limit become ``want`` (None: not yet)."""
        since: float | None = None
        for t, pod in self.history(uid):
            if cpu_limit(pod) != want:
                since = None
            elif since is None:
                since = t
        return since

    def settle(self, phase: str) -> dict[str, list[dict[str, Any]]]:
        """Wait for the replicas' final placement with the right limits; record how long
        the limits took after the last pod was bound to its node."""
        nodes: dict[str, list[dict[str, Any]]] = eventually(
            lambda: (found := self.placement()) and self.right(found) and found,
            timeout=90,
            what=f"{phase}: every replica running with its ceiling",
        )
        final = {
            p["metadata"]["uid"]: self.want(len(pods)) for pods in nodes.values() for p in pods
        }
        since = eventually(
            lambda: (
                None not in (times := [self.right_since(u, w) for u, w in final.items()]) and times
            ),
            what=f"{phase}: the watch to catch up",
        )
        bound = max(
            min(t for t, p in self.history(uid) if p["spec"].get("nodeName")) for uid in final
        )
        self.run.settled[phase] = max(0.0, max(since) - bound)
        return nodes

    # -- driving Karpenter -------------------------------------------------------------

    def nodepool(self, *, generation: int = 1, expire_after: str = "Never") -> dict[str, Any]:
        """A NodePool of its own: its taint keeps every other pod off its nodes, and the
        KWOK node stage reads the kubelet version from the annotation it copies to them."""
        return {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": self.pool},
            "spec": {
                "template": {
                    "metadata": {
                        "labels": {"headroom-test/generation": str(generation)},
                        "annotations": {KUBELET_VERSION_ANNOTATION: kubernetes_version()},
                    },
                    "spec": {
                        "taints": [{"key": POOL_TAINT, "value": self.pool, "effect": "NoSchedule"}],
                        "requirements": [
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["on-demand"],
                            }
                        ],
                        "nodeClassRef": {
                            "group": "karpenter.kwok.sh",
                            "kind": "KWOKNodeClass",
                            "name": "default",
                        },
                        "expireAfter": expire_after,
                    },
                },
                "disruption": {
                    "consolidationPolicy": "WhenEmptyOrUnderutilized",
                    "consolidateAfter": "0s",
                },
            },
        }

    def deployment(self) -> dict[str, Any]:
        """1-CPU replicas with no CPU limit, placed only on the pool's nodes."""
        container = {
            "name": "app",
            "image": "registry.example/app:1",
            "resources": {"requests": {"cpu": f"{REQUEST_M}m", "memory": "64Mi"}},
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": self.namespace},
            "spec": {
                "replicas": REPLICAS,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "nodeSelector": {NODEPOOL_LABEL: self.pool},
                        "tolerations": [{"key": POOL_TAINT, "operator": "Exists"}],
                        "terminationGracePeriodSeconds": 0,
                        "containers": [container],
                    },
                },
            },
        }

    def provision(self) -> None:
        """Pending replicas make Karpenter create nodes."""
        self.cluster.apply(self.nodepool())
        started = time.monotonic()
        self.cluster.apply(self.deployment())
        eventually(self.placement, timeout=90, what="every replica running")
        self.run.took["provisioning"] = time.monotonic() - started
        self.run.took["first NodeClaim"] = min(t for t, _ in self.claims.seen) - started
        nodes = self.settle("provisioning")
        self.run.provisioned = len(self.live_claims())
        assert sorted(len(pods) for pods in nodes.values()) == [3, 3]

    def consolidate(self) -> None:
        """Scale to three, leaving one replica on one node and two on the other (by
        deletion cost): Karpenter moves one node's pods to the other and deletes it."""
        nodes = eventually(self.placement, what="the two provisioned nodes")
        first, second = sorted(nodes)
        for pod in [*nodes[first][:2], nodes[second][0]]:
            self.cluster.kubectl(
                "annotate", "pod", pod["metadata"]["name"], "-n", self.namespace,
                f"{DELETION_COST}=-100",
            )  # fmt: skip
        started = self.after_disruption_pass()
        self.cluster.kubectl("scale", "deployment", "web", "-n", self.namespace, "--replicas=3")
        scaled = eventually(
            lambda: (found := self.placement()) and len(found) == 2 and found,
            what="the scale-down",
        )
        before = {p["metadata"]["uid"]: node for node, pods in scaled.items() for p in pods}
        eventually(
            lambda: len(self.live_claims()) == 1, timeout=120, what="a node consolidated away"
        )
        self.run.took["consolidation"] = time.monotonic() - started
        # The deleted NodeClaim's node runs its pods until Karpenter drains it.
        eventually(
            lambda: (found := self.placement()) and len(found) == 1,
            what="consolidation: every replica on the node kept",
        )
        (kept,) = self.settle("consolidation")
        for pod in self.live_pods_on(kept):
            if pod["metadata"]["uid"] not in before:
                evicted = next(u for u, n in before.items() if n != kept and u not in self.moved)
                self.moved.add(evicted)
                last = cpu_limit(self.history(evicted)[-1][1])
                self.run.moved.append((last, cpu_limit(pod)))

    def replaced(self, old: str, phase: str, started: float, *, timeout: float) -> str:
        """Wait for Karpenter to replace NodeClaim ``old`` and for every replica to run on the
        new node; time it from ``started``, then wait for the limits. The new NodeClaim."""
        claims: dict[str, str] = eventually(
            lambda: (
                (found := self.live_claims()).keys() - {old}
                and old not in found
                and (placed := self.placement())
                and list(placed) == list(found.values())
                and found
            ),
            timeout=timeout,
            what=f"{phase}: every replica on the replacement node",
        )
        self.run.took[phase] = time.monotonic() - started
        self.settle(phase)
        (new,) = claims
        return new

    def after_disruption_pass(self) -> float:
        """Wait until Karpenter's disruption loop is idle (two passes in a row, each finding
        nothing to act on, 10 s apart) and has just finished a pass, so every run starts at
        the same point of its cycle; return the time then."""
        finished: list[float] = []
        passes = self.karpenter.disruption_passes()

        def idle() -> bool:
            nonlocal passes
            now = self.karpenter.disruption_passes()
            if now > passes:
                passes = now
                finished.append(time.monotonic())
            return len(finished) >= 2 and finished[-1] - finished[-2] < IDLE_PASS_S

        eventually(idle, timeout=120, interval=0.1, what="Karpenter's disruption loop idle")
        return time.monotonic()

    def drift_then_expire(self) -> None:
        """A changed NodePool template drifts the node (Karpenter launches its replacement
        first); the replacement, created with a short ``expireAfter``, expires (its pods are
        evicted before the next node exists). Expiry is timed from the moment it was due."""
        (old,) = self.live_claims()
        started = self.after_disruption_pass()
        self.cluster.apply(self.nodepool(generation=2, expire_after=f"{EXPIRE_AFTER_S}s"))
        drifted = self.replaced(old, "drift", started, timeout=90)
        created = min(t for t, c in self.claims.seen if c["metadata"]["name"] == drifted)
        self.replaced(drifted, "expiry", created + EXPIRE_AFTER_S, timeout=EXPIRE_AFTER_S + 60)

    def __enter__(self) -> Scenario:
        return self

    def __exit__(self, *_: object) -> None:
        """Delete the workload and the pool (Karpenter deletes its nodes)."""
        try:
            self.cluster.kubectl(
                "delete", "deployment", "web", "-n", self.namespace, "--ignore-not-found"
            )
            self.cluster.kubectl("delete", "nodepool", self.pool, "--ignore-not-found")
            eventually(lambda: not self.claims_left(), timeout=120, what="the pool's nodes deleted")
        finally:
            self.pods.stop()
            self.claims.stop()

    def audit(self) -> Run:
        """What the watches saw over the whole run."""
        self.run.nodeclaims = {c["metadata"]["name"] for _, c in self.claims.seen}
        for uid in {p["metadata"]["uid"] for _, p in self.pods.seen}:
            limits = [cpu_limit(p) for _, p in self.history(uid)]
            self.run.limits_seen.update(limit for limit in limits if limit is not None)
            if any(a is not None and b is None for a, b in itertools.pairwise(limits)):
                self.run.limits_removed.append(uid)
        return self.run

    def claims_left(self) -> list[str]:
        claims = self.cluster.api.items(
            NODE_CLAIMS.path(), labelSelector=f"{NODEPOOL_LABEL}={self.pool}"
        )
        return [c["metadata"]["name"] for c in claims]


@pytest.fixture(scope="module")
def karpenter(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Karpenter]:
    """The real Karpenter with its KWOK provider and its CRDs, offering one instance type;
    it and its CRDs are gone again afterwards."""
    crds = karpenter_dir() / "crds"
    control_plane.kubectl("apply", "--server-side", "-f", str(crds))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        "crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh",
        "crd/kwoknodeclasses.karpenter.kwok.sh",
    )  # fmt: skip
    control_plane.apply(
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": "default"},
        }
    )
    karpenter = Karpenter.start(
        control_plane.kubeconfig, tmp_path_factory.mktemp("karpenter"), [INSTANCE]
    )
    try:
        yield karpenter
    finally:
        # Karpenter finalizes the nodes it made: it must outlive their NodePools.
        control_plane.kubectl("delete", "nodepools", "--all", "--ignore-not-found")
        control_plane.kubectl("wait", "--for=delete", "nodeclaims", "--all", "--timeout=120s")
        karpenter.process.stop()
        control_plane.kubectl("delete", "-f", str(crds), "--ignore-not-found", "--wait=false")


def test_karpenter_provisions_consolidates_and_replaces_nodes_alike_with_headroom_enforcing(
    control_plane: Cluster,
    karpenter: Karpenter,
    webhook: Webhook,
    configure: Callable[..., None],
    start_reconciler: Callable[..., Reconciler],
    namespace: str,
    enforced_namespace: str,
) -> None:
    configure(dryRun=False)
    start_reconciler()
    runs: list[Run] = []
    for where, enforcing in ((namespace, False), (enforced_namespace, True)):
        with Scenario(control_plane, karpenter, where, managed=enforcing) as scenario:
            scenario.provision()
            scenario.consolidate()
            scenario.drift_then_expire()
        runs.append(scenario.audit())
    off, on = runs
    print(report(runs))

    assert on.provisioned == off.provisioned == 2
    assert len(on.nodeclaims) == len(off.nodeclaims)
    for phase in ("consolidation", "drift", "expiry"):
        assert on.took[phase] <= off.took[phase] + CONSOLIDATION_SLACK_S, phase
    assert all(settled <= DEBOUNCE_S + 5 for settled in on.settled.values()), on.settled
    assert on.moved
    assert all(after == policy_ceiling(3) for _, after in on.moved)
    assert on.limits_removed == []
    assert off.limits_seen == set()
    assert off.moved == [(None, None)] * len(off.moved)


def report(runs: list[Run]) -> str:
    def m(value: int | None) -> str:
        return "none" if value is None else f"{value}m"

    lines = [
        "",
        "| | " + " | ".join(run.label for run in runs) + " |",
        "|---" * (len(runs) + 1) + "|",
    ]
    rows: dict[str, Callable[[Run], str]] = {
        "NodeClaims for 6 pending replicas": lambda r: str(r.provisioned),
        "NodeClaims created in all": lambda r: str(len(r.nodeclaims)),
        **{
            f"{phase} (s)": (lambda r, phase=phase: f"{r.took[phase]:.1f}")
            for phase in ("first NodeClaim", "provisioning", "consolidation", "drift", "expiry")
        },
        "moved pods' ceiling, old node -> new": lambda r: ", ".join(
            f"{m(a)} -> {m(b)}" for a, b in r.moved
        ),
        "limits right after the last bind (s)": lambda r: ", ".join(
            f"{phase} {seconds:.1f}" for phase, seconds in r.settled.items()
        ),
    }
    for name, cell in rows.items():
        lines.append(f"| {name} | " + " | ".join(cell(run) for run in runs) + " |")
    return "\n".join(lines)
