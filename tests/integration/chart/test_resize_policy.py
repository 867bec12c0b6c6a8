"""The chart's pods/resize policy on the real API server, with the reconciler's own token.

RBAC lets the reconciler patch pods/resize, and a resize can change any container's
requests and limits, CPU and memory, in any namespace. Each write beyond the reconciler's
job is tried here and refused by the policy (without it, the API server accepts every one
of them), and every resize the reconciler does make still goes through: containers',
sidecars' and the pod's own limits.cpu, in pods the HeadroomConfig enrols."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from app.core.labels import CONFIG_NAME, CONFIG_PLURAL, GROUP
from app.core.nodes import major_minor
from devcluster.binaries import kubernetes_version
from tests.integration.conftest import Cluster, eventually
from tests.integration.rbac import (
    APPLY_PATCH,
    RECONCILER,
    RELEASE,
    ApiResult,
    chart_rbac,
    request_as,
    service_account_token,
)

CONFIGS = f"{CONFIG_PLURAL}.{GROUP}"
RESIZE_POLICY = f"ValidatingAdmissionPolicy '{RELEASE}-reconciler-pod-resizes'"
MODE = "kube-headroom.dev/mode"
TIER = "kube-headroom.dev/rbac-test-tier"
SYSTEM = "kube-system"
MESH = "istio-proxy"
POD_LEVEL_FEATURE = "InPlacePodLevelResourcesVerticalScaling"
# Pod-level resources resize in place from 1.36 (beta, on by default); before, the API
# server drops a resize's pod-level changes, so there is nothing to refuse or allow.
pod_level = pytest.mark.skipif(
    (major_minor(kubernetes_version()) or (0, 0)) < (1, 36),
    reason="pod-level resources resize in place from Kubernetes 1.36",
)


@dataclass(frozen=True)
class Targets:
    """Pods to resize: in an enrolled namespace, an unenrolled one, and kube-system."""

    enrolled: str
    unenrolled: str
    selected: str
    system_pod: str
    token: str


# -- builders ---------------------------------------------------------------------------


def _container(
    name: str, *, cpu: str, memory: str, sidecar: bool = False, cpu_limit: str | None = None
) -> dict[str, Any]:
    limits = {"memory": f"{2 * int(memory.removesuffix('Mi'))}Mi"}
    if cpu_limit is not None:
        limits["cpu"] = cpu_limit
    container: dict[str, Any] = {
        "name": name,
        "image": "registry.example/app:1",
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": limits},
    }
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def target_pod(
    name: str,
    *,
    node: str,
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    pod_level: bool = False,
) -> dict[str, Any]:
    """A Burstable pod with an app container and a sidecar, bound to a simulated node;
    with ``pod_level`` it also declares the pod's own resources."""
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [_container("app", cpu="100m", memory="64Mi")],
        "initContainers": [
            _container("proxy", cpu="50m", memory="32Mi", sidecar=True),
            # A mesh's proxy, whose limit the config leaves to its injector.
            _container(MESH, cpu="20m", memory="32Mi", sidecar=True, cpu_limit="500m"),
        ],
    }
    if pod_level:
        spec["resources"] = {
            "requests": {"cpu": "200m", "memory": "128Mi"},
            "limits": {"memory": "256Mi"},
        }
    metadata: dict[str, Any] = {"name": name, "labels": {"app": name, **(labels or {})}}
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def resize(
    container: str | None = "app",
    *,
    section: str = "containers",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    keeping: dict[str, str] | None = None,
) -> Callable[[str, str], dict[str, Any]]:
    """A server-side apply body for ``pods/resize``, as the reconciler writes them;
    ``container`` None sets the pod's own resources, and ``keeping`` names sidecars at
    CPU limits they have."""
    resources = {key: value for key, value in (("requests", requests), ("limits", limits)) if value}

    def body(namespace: str, pod: str) -> dict[str, Any]:
        spec: dict[str, Any] = (
            {"resources": resources}
            if container is None
            else {section: [{"name": container, "resources": resources}]}
        )
        if keeping:
            spec["initContainers"] = [
                {"name": name, "resources": {"limits": {"cpu": cpu}}}
                for name, cpu in keeping.items()
            ]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace},
            "spec": spec,
        }

    return body


def send_resize(cluster: Cluster, token: str, namespace: str, pod: str, body: Any) -> ApiResult:
    """Server-side apply on pods/resize, as a field manager of its own: an apply drops
    what its manager set before and now leaves out, so a shared manager would make one
    request undo another's limits (which the API server refuses)."""
    manager = f"resize-test-{uuid.uuid4().hex[:8]}"
    return request_as(
        cluster,
        token=token,
        method="PATCH",
        path=f"/api/v1/namespaces/{namespace}/pods/{pod}/resize?fieldManager={manager}&force=true",
        body=body(namespace, pod),
        content_type=APPLY_PATCH,
    )


def pod_spec(cluster: Cluster, namespace: str, pod: str) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(
        cluster.kubectl("get", "pod", pod, f"--namespace={namespace}", "-o", "json")
    )["spec"]
    return spec


def refused(cluster: Cluster, token: str, namespace: str, pod: str) -> bool:
    """Whether the policy refuses a CPU limit in kube-system yet (policies, their
    bindings and parameters take effect a moment after they are written)."""
    result = send_resize(cluster, token, namespace, pod, resize(limits={"cpu": "400m"}))
    return result.status == 403 and RESIZE_POLICY in result.message


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def targets(
    control_plane: Cluster, helm: Path, headroom_crd: str, third_party_crds: list[str]
) -> Iterator[Targets]:
    suffix = uuid.uuid4().hex[:8]
    enrolled, unenrolled, selected = (f"resize-{kind}-{suffix}" for kind in ("in", "out", "sel"))
    node = f"resize-node-{suffix}"
    system_pod = f"resize-{suffix}"
    config = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "HeadroomConfig",
        "metadata": {"name": CONFIG_NAME},
        "spec": {
            "excludedOwners": [{"kind": "ConfigMap", "apiGroup": ""}],
            "excludedContainers": [MESH],
        },
    }
    with chart_rbac(control_plane, helm):
        control_plane.create_node(node)
        # What a 1.36+ kubelet declares, so the API server lets pod-level resources resize.
        control_plane.kubectl(
            "patch", "node", node, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"declaredFeatures": [POD_LEVEL_FEATURE]}}),
        )  # fmt: skip
        control_plane.kubectl("delete", CONFIGS, CONFIG_NAME, "--ignore-not-found")
        control_plane.kubectl("create", "-f", "-", input=json.dumps(config))
        try:
            for namespace in (enrolled, unenrolled, selected):
                control_plane.kubectl("create", "namespace", namespace)
            control_plane.kubectl("label", "namespace", enrolled, f"{MODE}=managed")
            control_plane.kubectl("label", "namespace", selected, f"{TIER}=web")
            control_plane.kubectl(
                "create", "configmap", "owner", f"--namespace={enrolled}", "--from-literal=a=b"
            )
            owner_uid = control_plane.kubectl(
                "get", "configmap", "owner", f"--namespace={enrolled}",
                "-o", "jsonpath={.metadata.uid}",
            )  # fmt: skip
            owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}
            pods = [
                (enrolled, target_pod("app", node=node)),
                (enrolled, target_pod("pod-level", node=node, pod_level=True)),
                (enrolled, target_pod("opted-out", node=node, labels={MODE: "unmanaged"})),
                (enrolled, target_pod("owned", node=node, owner=owner)),
                (unenrolled, target_pod("app", node=node)),
                (selected, target_pod("app", node=node)),
                (SYSTEM, target_pod(system_pod, node=node)),
            ]
            for namespace, manifest in pods:
                control_plane.kubectl(
                    "create", f"--namespace={namespace}", "-f", "-", input=json.dumps(manifest)
                )
            for namespace, manifest in pods:
                control_plane.kubectl(
                    "wait", f"pod/{manifest['metadata']['name']}", f"--namespace={namespace}",
                    "--for=condition=Ready", "--timeout=60s",
                )  # fmt: skip
            token = service_account_token(control_plane, RECONCILER)
            eventually(
                partial(refused, control_plane, token, SYSTEM, system_pod),
                what="the pods/resize policy to take effect",
            )
            yield Targets(
                enrolled=enrolled,
                unenrolled=unenrolled,
                selected=selected,
                system_pod=system_pod,
                token=token,
            )
        finally:
            control_plane.kubectl(
                "delete", "pod", system_pod, f"--namespace={SYSTEM}", "--ignore-not-found",
                "--wait=false",
            )  # fmt: skip
            for namespace in (enrolled, unenrolled, selected):
                control_plane.kubectl("delete", "namespace", namespace, "--wait=false")
            control_plane.kubectl("delete", CONFIGS, CONFIG_NAME, "--ignore-not-found")
            control_plane.delete_node(node)


# -- beyond the job: refused ------------------------------------------------------------

ENROLLED, UNENROLLED = "enrolled", "unenrolled"


def pod_level_attack(change: Callable[[str, str], dict[str, Any]], case: str) -> Any:
    """A resize of the enrolled pod-level pod, which only a 1.36+ server resizes in place."""
    return pytest.param(ENROLLED, "pod-level", change, id=case, marks=pod_level)


ATTACKS = [
    pytest.param(ENROLLED, "app", resize(requests={"cpu": "50m"}), id="lower-requests-cpu"),
    pytest.param(ENROLLED, "app", resize(requests={"cpu": "150m"}), id="raise-requests-cpu"),
    pytest.param(ENROLLED, "app", resize(requests={"memory": "32Mi"}), id="change-memory-request"),
    pytest.param(ENROLLED, "app", resize(limits={"memory": "512Mi"}), id="change-memory-limit"),
    pytest.param(
        ENROLLED,
        "app",
        resize("proxy", section="initContainers", requests={"cpu": "10m"}),
        id="lower-sidecar-requests-cpu",
    ),
    pytest.param(
        ENROLLED,
        "app",
        resize(limits={"cpu": "300m", "memory": "512Mi"}),
        id="cpu-limit-with-a-memory-limit",
    ),
    pod_level_attack(resize(None, requests={"cpu": "300m"}), "pod-level-requests-cpu"),
    pod_level_attack(resize(None, limits={"memory": "512Mi"}), "pod-level-memory"),
    pytest.param(SYSTEM, None, resize(limits={"cpu": "300m"}), id="cpu-limit-in-kube-system"),
    pytest.param(
        UNENROLLED, "app", resize(limits={"cpu": "300m"}), id="cpu-limit-in-unenrolled-namespace"
    ),
    pytest.param(
        ENROLLED, "opted-out", resize(limits={"cpu": "300m"}), id="cpu-limit-of-opted-out-pod"
    ),
    pytest.param(
        ENROLLED, "owned", resize(limits={"cpu": "300m"}), id="cpu-limit-of-excluded-owner"
    ),
    pytest.param(
        ENROLLED,
        "app",
        resize(MESH, section="initContainers", limits={"cpu": "300m"}),
        id="cpu-limit-of-excluded-container",
    ),
]


def _where(targets: Targets, namespace: str, pod: str | None) -> tuple[str, str]:
    names = {ENROLLED: targets.enrolled, UNENROLLED: targets.unenrolled, SYSTEM: SYSTEM}
    return names[namespace], pod or targets.system_pod


@pytest.mark.parametrize(("namespace", "pod", "body"), ATTACKS)
def test_a_resize_beyond_the_job_is_refused(
    control_plane: Cluster,
    targets: Targets,
    namespace: str,
    pod: str | None,
    body: Callable[[str, str], dict[str, Any]],
) -> None:
    namespace, pod = _where(targets, namespace, pod)
    before = pod_spec(control_plane, namespace, pod)
    result = send_resize(control_plane, targets.token, namespace, pod, body)
    assert result.status == 403, result.message
    assert RESIZE_POLICY in result.message
    assert pod_spec(control_plane, namespace, pod) == before


def test_the_reason_is_named(control_plane: Cluster, targets: Targets) -> None:
    memory = send_resize(
        control_plane, targets.token, targets.enrolled, "app", resize(requests={"memory": "100Mi"})
    )
    assert "changes only limits.cpu through pods/resize" in memory.message
    system = send_resize(
        control_plane, targets.token, SYSTEM, targets.system_pod, resize(limits={"cpu": "1"})
    )
    assert "only pods in namespaces its HeadroomConfig enrols" in system.message
    opted_out = send_resize(
        control_plane, targets.token, targets.enrolled, "opted-out", resize(limits={"cpu": "1"})
    )
    assert "kube-headroom.dev/mode other than managed" in opted_out.message
    mesh = send_resize(
        control_plane,
        targets.token,
        targets.enrolled,
        "app",
        resize(MESH, section="initContainers", limits={"cpu": "1"}),
    )
    assert "containers spec.excludedContainers names" in mesh.message


# -- the job: allowed -------------------------------------------------------------------

WRITES = [
    pytest.param("app", resize(limits={"cpu": "300m"}), ("containers", 0), id="container"),
    pytest.param(
        "app",
        resize("proxy", section="initContainers", limits={"cpu": "120m"}),
        ("initContainers", 0),
        id="sidecar",
    ),
    pytest.param(
        "pod-level", resize(None, limits={"cpu": "400m"}), None, id="pod-level", marks=pod_level
    ),
    # The app's limit, with the excluded container named at the limit it has.
    pytest.param(
        "app",
        resize(limits={"cpu": "320m"}, keeping={MESH: "500m"}),
        ("containers", 0),
        id="container-keeping-an-excluded-one",
    ),
]


@pytest.mark.parametrize(("pod", "body", "where"), WRITES)
def test_the_reconcilers_resizes_go_through(
    control_plane: Cluster,
    targets: Targets,
    pod: str,
    body: Callable[[str, str], dict[str, Any]],
    where: tuple[str, int] | None,
) -> None:
    before = pod_spec(control_plane, targets.enrolled, pod)
    result = send_resize(control_plane, targets.token, targets.enrolled, pod, body)
    assert result.status == 200, result.message
    after = pod_spec(control_plane, targets.enrolled, pod)
    wanted = body(targets.enrolled, pod)["spec"]
    if where is None:
        resources, old = after["resources"], before["resources"]
        assert resources["limits"]["cpu"] == wanted["resources"]["limits"]["cpu"]
    else:
        section, index = where
        resources, old = after[section][index]["resources"], before[section][index]["resources"]
        assert resources["limits"]["cpu"] == wanted[section][0]["resources"]["limits"]["cpu"]
    assert resources["requests"] == old["requests"]
    assert resources["limits"]["memory"] == old["limits"]["memory"]


def test_enrolment_is_the_configs_own_namespace_selector(
    control_plane: Cluster, targets: Targets
) -> None:
    """With a custom selector, its namespaces are resized and the default label's are not."""
    selector = {"matchExpressions": [{"key": TIER, "operator": "In", "values": ["web"]}]}
    patch = {"spec": {"namespaceSelector": selector}}
    control_plane.kubectl("patch", CONFIGS, CONFIG_NAME, "--type=merge", "-p", json.dumps(patch))
    try:

        def selected_resized() -> bool:
            result = send_resize(
                control_plane,
                targets.token,
                targets.selected,
                "app",
                resize(limits={"cpu": "250m"}),
            )
            return result.status == 200

        eventually(selected_resized, what="the selector to reach the policy")
        default = send_resize(
            control_plane, targets.token, targets.enrolled, "app", resize(limits={"cpu": "350m"})
        )
        assert default.status == 403
        assert RESIZE_POLICY in default.message
    finally:
        control_plane.kubectl(
            "patch", CONFIGS, CONFIG_NAME, "--type=merge",
            "-p", json.dumps({"spec": {"namespaceSelector": None}}),
        )  # fmt: skip


def test_without_a_config_nothing_is_resized(control_plane: Cluster, targets: Targets) -> None:
    saved = json.loads(control_plane.kubectl("get", CONFIGS, CONFIG_NAME, "-o", "json"))
    before = pod_spec(control_plane, targets.enrolled, "app")
    control_plane.kubectl("delete", CONFIGS, CONFIG_NAME)
    try:

        def refused_without_config() -> ApiResult | None:
            body = resize(limits={"cpu": "1"})
            result = send_resize(control_plane, targets.token, targets.enrolled, "app", body)
            return result if "no params found" in result.message else None

        refusal = eventually(refused_without_config, what="the policy to miss its parameter")
        # The API server reports a missing parameter as 422, naming the policy.
        assert refusal.status == 422
        assert RESIZE_POLICY in refusal.message
        assert pod_spec(control_plane, targets.enrolled, "app") == before
    finally:
        restored = {key: saved[key] for key in ("apiVersion", "kind", "spec")} | {
            "metadata": {"name": CONFIG_NAME}
        }
        control_plane.kubectl("create", "-f", "-", input=json.dumps(restored))
