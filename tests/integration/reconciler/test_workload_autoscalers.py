"""Beside workload autoscalers, fed by the real metrics-server scraping the resource metrics
KWOK serves for each simulated node.

The VerticalPodAutoscaler: the real recommender, updater and admission controller size a CPU-hungry
Deployment's request under the tenant guide's recipe (a ``RequestsOnly`` VPA in
``InPlaceOrRecreate`` mode, ``minAllowed`` at the template's request), with the real
webhook and reconciler enforcing in one namespace and in another namespace Headroom
leaves alone (the control).

The pod requests 250m and would burn 1.5 CPU; what it burns is throttled at its CPU limit
(KWOK's usage expression caps it there, as CFS would), so the recommender sees what the
limit lets it use. VPA caps the request it sets at the container's limit: a Headroom
ceiling that stopped at the slack would freeze the request there. Three cases, each in both
namespaces: a node otherwise empty, a node booked by an unmanaged neighbour, and the pod
recreated while the recommendation stands.

The HorizontalPodAutoscaler (the controller-manager's own): a Deployment whose pods run
above their request, which Headroom's raised ceiling lets them, scales out on CPU
utilisation, and back in when they idle.

A VPA that sets limits, on each kind VPA reaches up a pod's chain of controllers: VPA
sizes the pods, and Headroom leaves them alone; a VPA that only recommends changes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.core.labels import STATUS_ANNOTATION
from app.core.quantity import parse_cpu_millis
from devcluster.vpa import resource_metrics, resource_metrics_api
from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.autoscaling import (
    allocatable_m,
    cpu,
    lag_behind_floor,
    live_pod,
    recommended_cpu,
    requests_only_vpa,
    vpa,
)
from tests.integration.reconciler.conftest import Reconciler
from tests.integration.reconciler.manifests import RESERVED_TAINT

# A fixture, shared with the real-node tier.
__all__ = ["vpa"]

REQUEST_M = 250
HUNGRY_M = 1500
NODE_CPU = "4"
# Books the node to 3750m with the hungry pod's request: 250m of slack left.
NEIGHBOUR_M = 3500
USAGE_ANNOTATION = "kwok.x-k8s.io/usage-cpu"
# The config's default debounce, which the managed run keeps.
DEBOUNCE_S = 2.0
NO_LIMIT = "no limit (Headroom off)"
STATIC = "static limit 500m (Headroom off)"
HEADROOM = "Headroom enforcing"
STATIC_LIMIT_M = 2 * REQUEST_M
# How long the real components get to size the pod.
SIZING_TIMEOUT_S = 420.0
# metrics-server scrapes, and VPA's recommender and updater look, every 10 s: where a run
# starts in those cycles moves a step by up to one of them.
SAMPLING_S = 10.0


def deployment(
    namespace: str, name: str, node: str, container: dict[str, Any], *, usage_m: int
) -> dict[str, Any]:
    """One replica of ``container`` on ``node``, each pod burning ``usage_m`` (KWOK's usage
    annotation) until told otherwise."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {USAGE_ANNOTATION: f"{usage_m}m"},
                },
                "spec": {
                    "nodeName": node,
                    "tolerations": [{"key": RESERVED_TAINT["key"], "operator": "Exists"}],
                    "terminationGracePeriodSeconds": 0,
                    "containers": [container],
                },
            },
        },
    }


@pytest.fixture
def headroom_enforcing(
    configure: Callable[..., None], start_reconciler: Callable[..., Reconciler]
) -> Reconciler:
    """Headroom enforcing: the config out of dry run, and the real reconciler started."""
    configure(dryRun=False)
    return start_reconciler()


@pytest.fixture(scope="module")
def metrics_api(control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """metrics-server behind the resource metrics API; gone again afterwards."""
    with resource_metrics_api(
        control_plane.kubeconfig,
        tmp_path_factory.mktemp("metrics-server"),
        control_plane.kubectl,
        control_plane.apply,
    ):
        yield


@dataclass
class Sample:
    at: float
    request_m: int
    limit_m: int | None
    target_m: int | None
    upper_m: int | None


@dataclass
class Workload:
    """One Deployment of one hungry replica under its own RequestsOnly VPA, on one node."""

    cluster: Cluster
    namespace: str
    name: str
    node: str
    # A CPU limit its owner wrote, as without Headroom; None: none.
    static_limit_m: int | None = None
    started: float = 0.0
    samples: list[Sample] = field(default_factory=list)

    def deploy(self) -> None:
        limits = {} if self.static_limit_m is None else {"cpu": f"{self.static_limit_m}m"}
        container = {
            "name": "app",
            "image": "registry.example/app:1",
            "resources": {
                "requests": {"cpu": f"{REQUEST_M}m", "memory": "64Mi"},
                "limits": limits,
            },
        }
        self.cluster.apply(
            deployment(self.namespace, self.name, self.node, container, usage_m=HUNGRY_M)
        )
        self.cluster.apply(requests_only_vpa(self.namespace, self.name, min_cpu=f"{REQUEST_M}m"))
        self.started = time.monotonic()

    def pod(self) -> dict[str, Any] | None:
        return live_pod(self.cluster, self.namespace, self.name)

    def sample(self) -> Sample | None:
        pod = self.pod()
        if pod is None:
            return None
        resources = pod["spec"]["containers"][0]["resources"]
        request = cpu(resources, "requests")
        assert request is not None
        taken = Sample(
            time.monotonic(),
            request,
            cpu(resources, "limits"),
            *recommended_cpu(self.cluster, self.namespace, self.name),
        )
        self.samples.append(taken)
        return taken

    def timeline(self) -> str:
        """Each change of request, limit or VPA recommendation, from the deploy (or the
        recreation)."""
        steps = []
        last = None
        for s in self.samples:
            now = (s.request_m, s.limit_m, s.target_m, s.upper_m)
            if now != last:
                limit, target, upper = (
                    "-" if v is None else f"{v}m" for v in (s.limit_m, s.target_m, s.upper_m)
                )
                steps.append(f"{s.at - self.started:.0f}s {s.request_m}m/{limit}/{target}/{upper}")
                last = now
        return ", ".join(steps)

    def took(self) -> float:
        """Seconds until VPA raised the request to what the pod burns (infinite: never)."""
        sized = [s.at for s in self.samples if s.request_m >= HUNGRY_M]
        return sized[0] - self.started if sized else float("inf")

    def recreated(self) -> Workload:
        """Its pod deleted while the recommendation stands; the Deployment's next pod,
        sampled from then on."""
        pod = self.pod()
        assert pod is not None
        self.cluster.kubectl("delete", "pod", pod["metadata"]["name"], "-n", self.namespace)
        again = Workload(self.cluster, self.namespace, self.name, self.node, self.static_limit_m)
        again.started = time.monotonic()
        return again


def test_a_requests_only_vpa_sizes_a_managed_pod_where_a_static_limit_stops_it(
    control_plane: Cluster,
    vpa: None,
    headroom_enforcing: Reconciler,
    make_node: Callable[..., str],
    namespace: str,
    enforced_namespace: str,
) -> None:
    static = f"{namespace}-static"
    control_plane.kubectl("create", "namespace", static)
    placements = {
        NO_LIMIT: (namespace, None),
        STATIC: (static, STATIC_LIMIT_M),
        HEADROOM: (enforced_namespace, None),
    }
    try:
        runs = size_everywhere(control_plane, make_node, neighbours=namespace, runs=placements)
        for label, (where, _) in placements.items():
            # What the recommender reads: the resource metrics API.
            print(f"{label}: CPU used (m)", resource_metrics(control_plane.kubectl, where))
    finally:
        control_plane.kubectl("delete", "namespace", static, "--wait=false", "--ignore-not-found")
    print(report(runs))

    headroom, free = runs[HEADROOM], runs[NO_LIMIT]
    # Born with the recommendation, as without a limit.
    first = headroom["recreated"].samples[0]
    assert first.target_m is not None
    assert first.request_m == first.target_m >= HUNGRY_M
    assert first.limit_m is not None
    assert first.limit_m > first.request_m
    assert headroom["recreated"].took() <= free["recreated"].took() + DEBOUNCE_S + 1
    # With room on the node or without, as fast as without a limit: one sampling cycle's
    # jitter.
    for case in ("empty node", "booked node"):
        assert headroom[case].took() <= free[case].took() + DEBOUNCE_S + SAMPLING_S, case
    for workload in headroom.values():
        # Sized: VPA raised the request to what the pod burns.
        assert workload.took() < SIZING_TIMEOUT_S
        # Never a limit below the request, nor below VPA's upper bound (as far as the node
        # allows) for longer than it takes Headroom to follow it.
        assert all(s.limit_m is not None and s.limit_m >= s.request_m for s in workload.samples)
        node = allocatable_m(control_plane, workload.node)
        assert lag_behind_floor(workload.samples, node) <= DEBOUNCE_S + 5, workload.timeline()
    for workload in free.values():
        assert all(s.limit_m is None for s in workload.samples)
    # An owner's static limit of twice the request: VPA never gets the request past it.
    for workload in runs[STATIC].values():
        assert max(s.request_m for s in workload.samples) <= STATIC_LIMIT_M


def size_everywhere(
    cluster: Cluster,
    make_node: Callable[..., str],
    *,
    neighbours: str,
    runs: dict[str, tuple[str, int | None]],
) -> dict[str, dict[str, Workload]]:
    """Each run's two Deployments (on an empty node and on a booked one) sized by VPA, then
    the one on the empty node recreated; every run at once, sampled together. A run with
    a static limit never gets there, and is sampled until the others have."""
    port = cluster.plane.kwok_port
    workloads: dict[str, dict[str, Workload]] = {}
    for label, (where, limit_m) in runs.items():
        empty = make_node(NODE_CPU, kubelet_port=port)
        booked = make_node(NODE_CPU, kubelet_port=port)
        neighbour(cluster, neighbours, booked, name=f"neighbour-{booked}")
        workloads[label] = {
            "empty node": Workload(cluster, where, "empty", empty, limit_m),
            "booked node": Workload(cluster, where, "booked", booked, limit_m),
        }
    every = [w for run in workloads.values() for w in run.values()]
    for workload in every:
        workload.deploy()
    sizable = [w for w in every if w.static_limit_m is None]
    eventually(
        lambda: all_sized(every, sizable),
        timeout=SIZING_TIMEOUT_S,
        interval=1.0,
        what="every pod without a static limit sized by VPA to what it burns",
    )
    for run in workloads.values():
        first = run["empty node"]
        run["recreated"] = first.recreated()
    recreated = [run["recreated"] for run in workloads.values()]
    eventually(
        lambda: all_sized(recreated, [w for w in recreated if w.static_limit_m is None]),
        timeout=120,
        interval=0.5,
        what="every recreated pod without a static limit born sized",
    )
    return workloads


def all_sized(sampled: list[Workload], sizable: list[Workload]) -> bool:
    """Whether every sizable workload is sized; every one is sampled each time, so each
    one's times are its own."""
    for workload in sampled:
        workload.sample()
    return all(w.samples[-1].request_m >= HUNGRY_M for w in sizable if w.samples)


def neighbour(cluster: Cluster, namespace: str, node: str, *, name: str) -> None:
    """An unmanaged pod booking most of ``node``."""
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "nodeName": node,
                "tolerations": [{"key": RESERVED_TAINT["key"], "operator": "Exists"}],
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.example/app:1",
                        "resources": {"requests": {"cpu": f"{NEIGHBOUR_M}m", "memory": "64Mi"}},
                    }
                ],
            },
        }
    )


def report(runs: dict[str, dict[str, Workload]]) -> str:
    """The runs side by side, then each Deployment's timeline."""

    def m(value: int | None) -> str:
        return "none" if value is None else f"{value}m"

    def took(workload: Workload) -> str:
        seconds = workload.took()
        return "never" if seconds == float("inf") else f"{seconds:.1f}"

    labels = list(runs)
    lines = ["", "| | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for case in ("empty node", "booked node", "recreated"):
        lines.append(
            f"| {case}: request {REQUEST_M}m -> >= {HUNGRY_M}m (s) | "
            + " | ".join(took(runs[label][case]) for label in labels)
            + " |"
        )
    lines.append(
        "| recreated: born with request / limit / VPA target | "
        + " | ".join(
            " / ".join(m(v) for v in (s.request_m, s.limit_m, s.target_m))
            for s in (runs[label]["recreated"].samples[0] for label in labels)
        )
        + " |"
    )
    lines.append("")
    for label, run in runs.items():
        for case, workload in run.items():
            lines.append(
                f"{label}, {case} (request/limit/target/upper bound): {workload.timeline()}"
            )
    return "\n".join(lines)


HPA_REQUEST_M = 250
# Each replica would burn twice its request: 200% utilisation.
HPA_BUSY_M = 500
HPA_IDLE_M = 10
HPA_MAX_REPLICAS = 4
# The controller-manager's HPA sync period (its default).
HPA_SYNC_S = 15.0


@dataclass
class Scaled:
    """One Deployment under a CPU-utilisation HPA (target 80% of the request)."""

    cluster: Cluster
    namespace: str
    node: str
    history: list[tuple[float, int, int | None]] = field(default_factory=list)
    started: float = 0.0

    def deploy(self) -> None:
        container = {
            "name": "app",
            "image": "registry.example/app:1",
            "resources": {"requests": {"cpu": f"{HPA_REQUEST_M}m", "memory": "64Mi"}},
        }
        self.cluster.apply(
            deployment(self.namespace, "scaled", self.node, container, usage_m=HPA_BUSY_M)
        )
        self.cluster.apply(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "scaled", "namespace": self.namespace},
                "spec": {
                    "scaleTargetRef": {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "scaled",
                    },
                    "minReplicas": 1,
                    "maxReplicas": HPA_MAX_REPLICAS,
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 80},
                            },
                        }
                    ],
                    # Scale in as soon as it is idle: the default waits five minutes.
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
                },
            }
        )
        self.started = time.monotonic()

    def observe(self) -> tuple[int, int | None]:
        """The replicas the HPA wants and the utilisation it last measured (%)."""
        hpa = json.loads(
            self.cluster.kubectl("get", "hpa", "scaled", "-n", self.namespace, "-o", "json")
        )
        status = hpa.get("status", {})
        utilisation = next(
            (
                m["resource"]["current"].get("averageUtilization")
                for m in status.get("currentMetrics") or []
                if m.get("type") == "Resource"
            ),
            None,
        )
        replicas = int(status.get("desiredReplicas", 0))
        self.history.append((time.monotonic() - self.started, replicas, utilisation))
        return replicas, utilisation

    def idle(self) -> None:
        """Every replica now burns next to nothing."""
        self.cluster.kubectl(
            "annotate", "pods", "-n", self.namespace, "-l", "app=scaled", "--overwrite",
            f"{USAGE_ANNOTATION}={HPA_IDLE_M}m",
        )  # fmt: skip

    def limits(self) -> list[int | None]:
        listed = json.loads(
            self.cluster.kubectl(
                "get", "pods", "-n", self.namespace, "-l", "app=scaled", "-o", "json"
            )
        )
        return [cpu(p["spec"]["containers"][0]["resources"], "limits") for p in listed["items"]]


def test_an_hpa_scales_a_managed_deployment_out_on_burst_above_its_request_and_back_in(
    control_plane: Cluster,
    metrics_api: None,
    headroom_enforcing: Reconciler,
    make_node: Callable[..., str],
    namespace: str,
    enforced_namespace: str,
) -> None:
    port = control_plane.plane.kwok_port
    runs = {
        where: Scaled(control_plane, where, make_node("8", kubelet_port=port))
        for where in (namespace, enforced_namespace)
    }
    for run in runs.values():
        run.deploy()
    eventually(
        lambda: sum(run.observe()[0] == HPA_MAX_REPLICAS for run in runs.values()) == len(runs),
        timeout=180,
        interval=2.0,
        what="every HPA scaled out to its maximum",
    )
    out = {where: run.history[-1][0] for where, run in runs.items()}
    managed = runs[enforced_namespace]

    def busy_limits_raised() -> bool:
        limits = managed.limits()
        return len(limits) == HPA_MAX_REPLICAS and all(
            limit is not None and limit > HPA_BUSY_M for limit in limits
        )

    # Every replica, the newest too once its birth limit is reconciled, may burn what it wants.
    eventually(busy_limits_raised, timeout=60, interval=1.0, what="every replica's limit raised")
    for run in runs.values():
        run.idle()
    eventually(
        lambda: sum(run.observe()[0] == 1 for run in runs.values()) == len(runs),
        timeout=180,
        interval=2.0,
        what="every HPA scaled back in",
    )
    print(hpa_report(runs, off=namespace, on=enforced_namespace))

    peak = max(u for _, _, u in managed.history if u is not None)
    # Above 100% of the request: only a ceiling above the request lets a pod run there.
    assert peak > 100
    assert out[enforced_namespace] <= out[namespace] + DEBOUNCE_S + 2 * HPA_SYNC_S, out


def hpa_report(runs: dict[str, Scaled], *, off: str, on: str) -> str:
    lines = [""]
    for where, label in ((off, "Headroom off (control)"), (on, "Headroom enforcing")):
        steps = []
        last: tuple[int, int | None] | None = None
        for at, replicas, utilisation in runs[where].history:
            if (replicas, utilisation) != last:
                steps.append(f"{at:.0f}s: {replicas} replicas at {utilisation}%")
                last = (replicas, utilisation)
        lines.append(f"{label}: " + "; ".join(steps))
    return "\n".join(lines)


# A VPA that sets limits: each kind it may target, its pods left to VPA.
LIMITED_REQUEST_M = 250
# The owner's limit: three times the request, a ratio VPA keeps and a Headroom limit would
# not (its birth limit is twice the request).
LIMITED_LIMIT_M = 3 * LIMITED_REQUEST_M
ROLLOUTS_GROUP = "test.kube-headroom.dev"
# A custom resource with a /scale subresource that owns ReplicaSets, as an Argo Rollout does.
ROLLOUT_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"rollouts.{ROLLOUTS_GROUP}"},
    "spec": {
        "group": ROLLOUTS_GROUP,
        "scope": "Namespaced",
        "names": {"plural": "rollouts", "singular": "rollout", "kind": "Rollout"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector",
                    },
                },
            }
        ],
    },
}


def limited_template(name: str, node: str) -> dict[str, Any]:
    """A pod template burning 1.5 CPU on ``node``, with the owner's limit."""
    return {
        "metadata": {"labels": {"app": name}, "annotations": {USAGE_ANNOTATION: f"{HUNGRY_M}m"}},
        "spec": {
            # Placed by the scheduler for a DaemonSet, by name for the others.
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]}
                        ]
                    }
                }
            },
            "tolerations": [{"key": RESERVED_TAINT["key"], "operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/app:1",
                    "resources": {
                        "requests": {"cpu": f"{LIMITED_REQUEST_M}m", "memory": "64Mi"},
                        "limits": {"cpu": f"{LIMITED_LIMIT_M}m"},
                    },
                }
            ],
        },
    }  # fmt: skip


def controller_ref(cluster: Cluster, namespace: str, resource: str, name: str) -> dict[str, Any]:
    """An ownerReference naming ``resource``/``name`` as its controller."""
    obj = json.loads(cluster.kubectl("get", resource, name, "-n", namespace, "-o", "json"))
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": name,
        "uid": obj["metadata"]["uid"],
        "controller": True,
    }


def create_targets(cluster: Cluster, namespace: str, node: str) -> dict[str, str]:
    """One workload of each kind a VPA reaches up a pod's chain of controllers, and one
    Deployment whose VPA only recommends; the VPA's target kind by workload name."""
    meta = {"namespace": namespace}

    def with_app(name: str) -> dict[str, Any]:
        return {"matchLabels": {"app": name}}

    job_template = limited_template("nightly", node)
    job_template["spec"]["restartPolicy"] = "Never"
    cluster.apply(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {**meta, "name": "nightly"},
            # Never due: its Job is created below, as the CronJob controller creates one.
            "spec": {
                "schedule": "0 0 1 1 *",
                "suspend": True,
                "jobTemplate": {"spec": {"template": job_template}},
            },
        }
    )
    cluster.apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                **meta,
                "name": "nightly-29416740",
                "ownerReferences": [controller_ref(cluster, namespace, "cronjob", "nightly")],
            },
            "spec": {"backoffLimit": 100, "template": job_template},
        }
    )
    cluster.apply(ROLLOUT_CRD)
    cluster.kubectl(
        "wait", f"crd/rollouts.{ROLLOUTS_GROUP}", "--for=condition=Established", "--timeout=30s"
    )
    cluster.apply(
        {
            "apiVersion": f"{ROLLOUTS_GROUP}/v1",
            "kind": "Rollout",
            "metadata": {**meta, "name": "canary"},
            "spec": {"replicas": 1, "selector": with_app("canary")},
        }
    )
    cluster.kubectl(
        "patch", f"rollouts.{ROLLOUTS_GROUP}", "canary", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"replicas": 1, "selector": "app=canary"}}),
    )  # fmt: skip
    cluster.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                **meta,
                "name": "canary-6f7d8c9b5",
                "ownerReferences": [
                    controller_ref(cluster, namespace, f"rollouts.{ROLLOUTS_GROUP}", "canary")
                ],
            },
            "spec": {
                "replicas": 1,
                "selector": with_app("canary"),
                "template": limited_template("canary", node),
            },
        }
    )
    for kind, name in (("StatefulSet", "ledger"), ("DaemonSet", "agent"), ("Deployment", "quiet")):
        spec: dict[str, Any] = {
            "selector": with_app(name),
            "template": limited_template(name, node),
        }
        if kind == "StatefulSet":
            spec["serviceName"] = name
        cluster.apply(
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "metadata": {**meta, "name": name},
                "spec": spec,
            }
        )
    targets = {
        "nightly": ("batch/v1", "CronJob"),
        "canary": (f"{ROLLOUTS_GROUP}/v1", "Rollout"),
        "ledger": ("apps/v1", "StatefulSet"),
        "agent": ("apps/v1", "DaemonSet"),
        "quiet": ("apps/v1", "Deployment"),
    }
    for name, (api_version, kind) in targets.items():
        cluster.apply(
            {
                "apiVersion": "autoscaling.k8s.io/v1",
                "kind": "VerticalPodAutoscaler",
                "metadata": {**meta, "name": name},
                "spec": {
                    "targetRef": {"apiVersion": api_version, "kind": kind, "name": name},
                    # Sets requests and limits (the default) as each pod is created, or
                    # only recommends.
                    "updatePolicy": {"updateMode": "Off" if name == "quiet" else "Initial"},
                },
            }
        )
    return {name: kind for name, (_, kind) in targets.items()}


def test_a_vpa_that_sets_limits_is_left_alone_whatever_kind_it_targets(
    control_plane: Cluster,
    vpa: None,
    headroom_enforcing: Reconciler,
    make_node: Callable[..., str],
    enforced_namespace: str,
) -> None:
    node = make_node("8", kubelet_port=control_plane.plane.kwok_port)
    where = enforced_namespace
    kinds = create_targets(control_plane, where, node)

    def recommendations() -> dict[str, int]:
        listed = json.loads(control_plane.kubectl("get", "vpa", "-n", where, "-o", "json"))
        found = {}
        for item in listed["items"]:
            entries = ((item.get("status") or {}).get("recommendation") or {}).get(
                "containerRecommendations"
            ) or []
            for entry in entries:
                found[item["metadata"]["name"]] = parse_cpu_millis(entry["target"]["cpu"])
        return found

    # The real recommender sizes every workload from what its pods burn (before its first
    # samples, it recommends its minimum).
    eventually(
        lambda: (
            {name for name, target_m in recommendations().items() if target_m > LIMITED_REQUEST_M}
            == kinds.keys()
        ),
        timeout=180,
        interval=2.0,
        what="a recommendation for every workload",
    )

    def pods() -> dict[str, dict[str, Any]]:
        listed = json.loads(control_plane.kubectl("get", "pods", "-n", where, "-o", "json"))
        return {
            p["metadata"]["labels"]["app"]: p
            for p in listed["items"]
            if not p["metadata"].get("deletionTimestamp")
        }

    before = {app: p["metadata"]["uid"] for app, p in pods().items()}
    assert before.keys() == kinds.keys()
    # Recreated while the recommendations stand: VPA's admission controller sizes them.
    control_plane.kubectl("delete", "pods", "-n", where, "--all", "--wait=false")

    def recreated() -> dict[str, dict[str, Any]]:
        now = pods()
        return {app: p for app, p in now.items() if p["metadata"]["uid"] != before.get(app)}

    eventually(
        lambda: recreated().keys() == kinds.keys(),
        timeout=120,
        interval=1.0,
        what="every workload's pod recreated",
    )
    born = recreated()
    # The reconciler has decided the node with every new pod on it once it has set the
    # limit of the one pod it manages there.
    eventually(
        lambda: STATUS_ANNOTATION in (pods()["quiet"]["metadata"].get("annotations") or {}),
        timeout=60,
        interval=1.0,
        what="the recommending VPA's pod reconciled",
    )
    now = pods()
    seen = {}
    for app in kinds:
        resources = now[app]["spec"]["containers"][0]["resources"]
        seen[app] = (cpu(resources, "requests"), cpu(resources, "limits"))
    print({app: f"{kinds[app]}: request {r}m, limit {lim}m" for app, (r, lim) in seen.items()})
    for app in kinds.keys() - {"quiet"}:
        request_m, limit_m = seen[app]
        born_request = cpu(born[app]["spec"]["containers"][0]["resources"], "requests")
        # VPA sized it: it found the pod up its chain of controllers.
        assert born_request is not None
        assert born_request > LIMITED_REQUEST_M, (app, born_request)
        # And kept the owner's ratio: Headroom neither seeded nor resized its limit.
        assert request_m is not None
        assert limit_m == 3 * request_m, (app, request_m, limit_m)
        assert STATUS_ANNOTATION not in (now[app]["metadata"].get("annotations") or {}), app
    # A VPA that only recommends changes nothing: the request is the owner's, the limit
    # Headroom's.
    request_m, limit_m = seen["quiet"]
    assert request_m == LIMITED_REQUEST_M
    assert limit_m is not None
    assert limit_m != LIMITED_LIMIT_M
