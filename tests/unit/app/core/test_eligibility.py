from dataclasses import replace
from typing import Any, Final

import pytest

from app.core.config import DEFAULT_SETTINGS, OwnerExclusion, Settings, parse_label_selector
from app.core.eligibility import (
    UNBOUNDED_M,
    Ineligible,
    Recommended,
    namespace_enrolled,
    node_ineligibility,
    node_reason,
    owner_excluded,
    pod_ineligibility,
    vpa_controls_limits,
    vpa_cpu_recommendation,
    vpa_targets_pod,
)
from app.core.labels import MIRROR_POD_ANNOTATION, MODE_LABEL
from app.core.nodes import NodeFacts
from app.core.pods import OwnerRef
from app.core.pods import owner_ref as ref
from app.core.views import vpa_view
from tests.unit.app.builders import container, owner_ref, pod_info, pod_resources, vpa

MANAGED = {MODE_LABEL: "managed"}
LINUX = {"kubernetes.io/os": "linux"}
KUBELET = "v1.37.2"


def node(
    labels: dict[str, str] | None = None, *, kubelet: str = KUBELET, os: str = "linux"
) -> NodeFacts:
    return NodeFacts(
        labels=LINUX if labels is None else labels, kubelet_version=kubelet, operating_system=os
    )


def gates(settings: Settings = DEFAULT_SETTINGS, **overrides: Any) -> Ineligible | None:
    """``pod_ineligibility`` for a pod built from ``overrides``, everything else passing."""
    namespace_labels = overrides.pop("namespace_labels", MANAGED)
    node_facts = overrides.pop("node", node())
    backed_off = overrides.pop("backed_off", False)
    vpa_limits = overrides.pop("vpa_controls_limits", False)
    pod_level_resize = overrides.pop("node_resizes_pod_level", None)
    return pod_ineligibility(
        settings,
        pod_info(**overrides),
        namespace_labels=namespace_labels,
        node=node_facts,
        backed_off=backed_off,
        vpa_controls_limits=vpa_limits,
        node_resizes_pod_level=pod_level_resize,
    )


GUARANTEED = container(cpu_request="1", cpu_limit="1", memory_request="1Gi", memory_limit="1Gi")


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        pytest.param({}, None, id="eligible"),
        pytest.param({"phase": "Succeeded"}, Ineligible.TERMINAL, id="succeeded"),
        pytest.param({"phase": "Failed"}, Ineligible.TERMINAL, id="failed"),
        pytest.param(
            {"deletion_timestamp": "2026-01-01T00:00:00Z"}, Ineligible.TERMINAL, id="deleting"
        ),
        pytest.param(
            {"annotations": {MIRROR_POD_ANNOTATION: "x"}}, Ineligible.MIRROR_POD, id="mirror"
        ),
        pytest.param(
            {"namespace_labels": None}, Ineligible.NAMESPACE_NOT_ENROLLED, id="unknown-namespace"
        ),
        pytest.param(
            {"namespace_labels": {}}, Ineligible.NAMESPACE_NOT_ENROLLED, id="unlabelled-namespace"
        ),
        pytest.param(
            {"namespace_labels": {MODE_LABEL: "Managed"}},
            Ineligible.NAMESPACE_NOT_ENROLLED,
            id="mode-is-case-sensitive",
        ),
        pytest.param(
            {"namespace": "kube-system"},
            Ineligible.NAMESPACE_NOT_ENROLLED,
            id="excluded-namespace",
        ),
        pytest.param(
            {"labels": {MODE_LABEL: "unmanaged"}}, Ineligible.OPTED_OUT, id="pod-opted-out"
        ),
        pytest.param(
            {"labels": {MODE_LABEL: "unmanged"}},
            Ineligible.OPTED_OUT,
            id="pod-mode-typo-fails-closed",
        ),
        pytest.param({"labels": {MODE_LABEL: "managed"}}, None, id="pod-mode-managed"),
        pytest.param({"qos_class": "Guaranteed"}, Ineligible.NOT_BURSTABLE, id="guaranteed"),
        pytest.param({"qos_class": "BestEffort"}, Ineligible.NOT_BURSTABLE, id="best-effort"),
        pytest.param(
            {"containers": [GUARANTEED], "qos_class": None},
            Ineligible.NOT_BURSTABLE,
            id="computed-guaranteed",
        ),
        pytest.param(
            {"containers": [container(cpu_request=None)]},
            Ineligible.NO_CPU_REQUEST,
            id="no-cpu-request",
        ),
        pytest.param(
            {
                "containers": [container(cpu_request=None)],
                "init_containers": [container("init", cpu_request="1")],
            },
            Ineligible.NO_CPU_REQUEST,
            id="only-plain-init-requests",
        ),
        pytest.param(
            {
                "containers": [container(cpu_request=None)],
                "init_containers": [container("proxy", restart_policy="Always")],
            },
            None,
            id="sidecar-request-counts",
        ),
        pytest.param(
            {"containers": [container(cpu_resize_policy="RestartContainer")]},
            Ineligible.RESTART_ON_RESIZE,
            id="restart-container",
        ),
        pytest.param(
            {
                "init_containers": [
                    container(
                        "proxy", restart_policy="Always", cpu_resize_policy="RestartContainer"
                    )
                ]
            },
            Ineligible.RESTART_ON_RESIZE,
            id="restart-sidecar",
        ),
        pytest.param(
            {"containers": [container(cpu_resize_policy="NotRequired")]},
            None,
            id="not-required",
        ),
        pytest.param(
            {"node": node({"kubernetes.io/os": "windows"})},
            Ineligible.WINDOWS_NODE,
            id="windows-node-by-label",
        ),
        pytest.param(
            {"node": node({}, os="windows")}, Ineligible.WINDOWS_NODE, id="windows-node-by-status"
        ),
        pytest.param(
            {"node": node(kubelet="v1.34.2")}, Ineligible.KUBELET_TOO_OLD, id="kubelet-1.34"
        ),
        pytest.param(
            {"node": node(kubelet="")}, Ineligible.KUBELET_VERSION_UNKNOWN, id="kubelet-unknown"
        ),
        pytest.param({"node": node(kubelet="v1.35.0")}, None, id="kubelet-1.35"),
        pytest.param({"node": None}, None, id="unbound-skips-node-gates"),
        pytest.param(
            {"owners": [owner_ref("DaemonSet", "agent")]},
            Ineligible.OWNER_EXCLUDED,
            id="excluded-owner",
        ),
        pytest.param({"backed_off": True}, Ineligible.BACKED_OFF, id="backed-off"),
        pytest.param(
            {"vpa_controls_limits": True}, Ineligible.VPA_CONTROLS_LIMITS, id="vpa-controls-limits"
        ),
        pytest.param(
            {"phase": "Failed", "namespace_labels": None, "backed_off": True},
            Ineligible.TERMINAL,
            id="first-gate-wins",
        ),
        pytest.param(
            {"qos_class": "Guaranteed", "backed_off": True, "vpa_controls_limits": True},
            Ineligible.NOT_BURSTABLE,
            id="gates-in-order",
        ),
    ],
)
def test_pod_gates(overrides: dict[str, Any], reason: Ineligible | None) -> None:
    settings = replace(DEFAULT_SETTINGS, excluded_owners=(OwnerExclusion(kind="DaemonSet"),))
    assert gates(settings, **overrides) is reason


def test_node_selector_exclusion_applies_to_pods() -> None:
    settings = replace(
        DEFAULT_SETTINGS,
        excluded_node_selector=parse_label_selector({"matchLabels": {"pool": "gpu"}}),
    )
    assert gates(settings, node=node({"pool": "gpu"})) is Ineligible.NODE_EXCLUDED
    assert gates(settings, node=node({"pool": "cpu"})) is None


@pytest.mark.parametrize(
    ("selector", "excluded", "name", "labels", "enrolled"),
    [
        pytest.param(None, {"kube-system"}, "team-a", MANAGED, True, id="default-managed"),
        pytest.param(None, {"kube-system"}, "team-a", {}, False, id="default-unlabelled"),
        pytest.param(
            None,
            {"kube-system"},
            "team-a",
            {MODE_LABEL: "unmanaged"},
            False,
            id="default-unmanaged",
        ),
        pytest.param(
            None, {"kube-system"}, "team-a", {MODE_LABEL: "managed "}, False, id="default-not-exact"
        ),
        pytest.param(None, {"kube-system"}, "kube-system", MANAGED, False, id="excluded-by-name"),
        pytest.param({}, set(), "anything", {}, True, id="empty-selector-everything"),
        pytest.param({}, {"kube-system"}, "kube-system", {}, False, id="empty-selector-excluded"),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["batch", "web"]}]},
            set(),
            "team-a",
            {"tier": "web"},
            True,
            id="custom-selector",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["critical"]}]},
            set(),
            "team-a",
            {},
            True,
            id="custom-notin-absent",
        ),
    ],
)
def test_namespace_enrolled(
    selector: dict[str, Any] | None,
    excluded: set[str],
    name: str,
    labels: dict[str, str],
    enrolled: bool,
) -> None:
    settings = replace(DEFAULT_SETTINGS, excluded_namespaces=frozenset(excluded))
    if selector is not None:
        settings = replace(settings, namespace_selector=parse_label_selector(selector))
    assert namespace_enrolled(settings, name=name, labels=labels) is enrolled


NUMA = {"matchLabels": {"pool": "numa"}}


@pytest.mark.parametrize(
    ("selector", "facts", "reason"),
    [
        pytest.param(None, node(), None, id="linux"),
        pytest.param(None, node({}, os=""), None, id="no-os-anywhere"),
        pytest.param(None, node(kubelet="v1.37.2-eks-1a2b3c"), None, id="vendor-suffix"),
        pytest.param(None, node(kubelet="1.36"), None, id="no-v-prefix"),
        pytest.param(None, node(kubelet="v2.0.0"), None, id="next-major"),
        pytest.param(
            None, node({"kubernetes.io/os": "windows"}), Ineligible.WINDOWS_NODE, id="windows"
        ),
        pytest.param(None, node(os="windows"), Ineligible.WINDOWS_NODE, id="windows-status"),
        pytest.param(None, node(kubelet="v1.34.2"), Ineligible.KUBELET_TOO_OLD, id="too-old"),
        pytest.param(
            None, node(kubelet="simulated"), Ineligible.KUBELET_VERSION_UNKNOWN, id="unparseable"
        ),
        pytest.param(NUMA, node({"pool": "numa"}), Ineligible.NODE_EXCLUDED, id="selected"),
        pytest.param(NUMA, node({"pool": "web"}), None, id="not-selected"),
        pytest.param(
            NUMA,
            node({"pool": "numa"}, kubelet="v1.30.0"),
            Ineligible.NODE_EXCLUDED,
            id="selector-first",
        ),
    ],
)
def test_node_gates(
    selector: dict[str, Any] | None, facts: NodeFacts, reason: Ineligible | None
) -> None:
    settings = DEFAULT_SETTINGS
    if selector is not None:
        settings = replace(settings, excluded_node_selector=parse_label_selector(selector))
    assert node_ineligibility(settings, facts) is reason


@pytest.mark.parametrize(
    ("facts", "text"),
    [
        pytest.param(
            node(kubelet="v1.34.2"),
            "kubelet v1.34.2 cannot resize pods in place (needs 1.35 or newer)",
            id="too-old",
        ),
        pytest.param(
            node(kubelet=""),
            "kubelet version unknown (status.nodeInfo.kubeletVersion is 'nothing'); "
            "in-place resize needs 1.35 or newer",
            id="unknown",
        ),
        pytest.param(
            node(os="windows"), "Windows node: in-place resize is unsupported there", id="windows"
        ),
        pytest.param(node({"pool": "numa"}), "matched by spec.excludedNodeSelector", id="selector"),
    ],
)
def test_node_reason_in_words(facts: NodeFacts, text: str) -> None:
    settings = replace(DEFAULT_SETTINGS, excluded_node_selector=parse_label_selector(NUMA))
    reason = node_ineligibility(settings, facts)
    assert reason is not None
    assert node_reason(reason, facts) == text


# A Job of the batch API group.
BATCH_JOB = owner_ref("Job", "x", api_version="batch/v1")


@pytest.mark.parametrize(
    ("exclusion", "owner", "excluded"),
    [
        pytest.param(OwnerExclusion("Job"), BATCH_JOB, True, id="kind"),
        pytest.param(OwnerExclusion("Job"), owner_ref("CronJob", "x"), False, id="other-kind"),
        pytest.param(
            OwnerExclusion("Job", api_group="batch"), BATCH_JOB, True, id="kind-and-group"
        ),
        pytest.param(
            OwnerExclusion("Job", api_group="example.com"), BATCH_JOB, False, id="other-group"
        ),
        pytest.param(
            OwnerExclusion("Node", api_group=""),
            owner_ref("Node", "n1", api_version="v1"),
            True,
            id="core-group",
        ),
        pytest.param(
            OwnerExclusion("StatefulSet", name="db"),
            owner_ref("StatefulSet", "db"),
            True,
            id="name",
        ),
        pytest.param(
            OwnerExclusion("StatefulSet", name="db"),
            owner_ref("StatefulSet", "cache"),
            False,
            id="other-name",
        ),
    ],
)
def test_owner_excluded(exclusion: OwnerExclusion, owner: dict[str, Any], excluded: bool) -> None:
    settings = replace(DEFAULT_SETTINGS, excluded_owners=(exclusion,))
    assert owner_excluded(settings, pod_info(owners=[owner])) is excluded


def test_pod_without_owners_is_never_owner_excluded() -> None:
    settings = replace(DEFAULT_SETTINGS, excluded_owners=(OwnerExclusion("Job"),))
    assert not owner_excluded(settings, pod_info(owners=[]))


# Every container's policy: requests only.
REQUESTS_ONLY: Final = [{"containerName": "*", "controlledValues": "RequestsOnly"}]
# A VPA whose one policy, requests only, names the container app.
APP_REQUESTS_ONLY = vpa(
    container_policies=[{"containerName": "app", "controlledValues": "RequestsOnly"}]
)


@pytest.mark.parametrize(
    ("obj", "container_names", "controls"),
    [
        pytest.param(vpa(), None, True, id="default-policy"),
        pytest.param(vpa(update_mode="Off"), None, False, id="update-off"),
        pytest.param(vpa(update_mode="Auto"), None, True, id="update-auto"),
        pytest.param(vpa(update_mode="Initial"), None, True, id="update-initial"),
        pytest.param(
            vpa(container_policies=REQUESTS_ONLY), None, False, id="requests-only-everywhere"
        ),
        pytest.param(
            vpa(
                container_policies=[{"containerName": "*", "controlledValues": "RequestsAndLimits"}]
            ),
            None,
            True,
            id="requests-and-limits",
        ),
        pytest.param(
            vpa(container_policies=[{"containerName": "*"}]),
            None,
            True,
            id="controlled-values-unset",
        ),
        pytest.param(APP_REQUESTS_ONLY, None, True, id="unnamed-containers-get-the-default"),
        pytest.param(APP_REQUESTS_ONLY, ["app"], False, id="every-container-requests-only"),
        pytest.param(APP_REQUESTS_ONLY, ["app", "proxy"], True, id="sidecar-gets-the-default"),
        pytest.param(
            vpa(container_policies=[*REQUESTS_ONLY, {"containerName": "proxy", "mode": "Off"}]),
            ["app", "proxy"],
            False,
            id="mode-off-container",
        ),
        pytest.param(
            vpa(
                container_policies=[
                    {"containerName": "*", "mode": "Off"},
                    {"containerName": "app", "controlledValues": "RequestsAndLimits"},
                ]
            ),
            ["app"],
            True,
            id="named-policy-wins",
        ),
    ],
)
def test_vpa_controls_limits(
    obj: dict[str, Any], container_names: list[str] | None, controls: bool
) -> None:
    assert vpa_controls_limits(obj, container_names=container_names) is controls


RS = ref("apps/v1", "ReplicaSet", "web-5d8f7c9b4", True)
DEPLOYMENT = ref("apps/v1", "Deployment", "web", True)


@pytest.mark.parametrize(
    ("obj", "chain", "targets"),
    [
        pytest.param(vpa(), [RS, DEPLOYMENT], True, id="deployment"),
        pytest.param(vpa(target_api_version=None), [RS, DEPLOYMENT], True, id="no-api-version"),
        # As VPA does: the target's kind and name decide, not its apiVersion.
        pytest.param(
            vpa(target_kind="StatefulSet", target_name="db", target_api_version="example.com/v1"),
            [ref("apps/v1", "StatefulSet", "db", True)],
            True,
            id="api-version-ignored",
        ),
        pytest.param(
            vpa(),
            [
                ref("apps/v1", "ReplicaSet", "webapp-5d8f7c9b4", True),
                ref("apps/v1", "Deployment", "webapp", True),
            ],
            False,
            id="other-deployment",
        ),
        # Its controller unknown: nothing says the ReplicaSet is the Deployment's.
        pytest.param(vpa(), [RS], False, id="controller-unknown"),
        # Anywhere on the chain, a superset of VPA's top-most link.
        pytest.param(
            vpa(target_kind="ReplicaSet", target_name="web-5d8f7c9b4"),
            [RS, DEPLOYMENT],
            True,
            id="replicaset-directly",
        ),
        pytest.param(
            vpa(target_kind="CronJob", target_name="nightly", target_api_version="batch/v1"),
            [
                ref("batch/v1", "Job", "nightly-29416740", True),
                ref("batch/v1", "CronJob", "nightly", True),
            ],
            True,
            id="cronjob",
        ),
        pytest.param(
            vpa(
                target_kind="Rollout", target_name="web", target_api_version="argoproj.io/v1alpha1"
            ),
            [RS, ref("argoproj.io/v1alpha1", "Rollout", "web", True)],
            True,
            id="scalable-custom-resource",
        ),
        pytest.param(vpa(namespace="team-b"), [RS, DEPLOYMENT], False, id="other-namespace"),
        pytest.param(vpa(), [], False, id="no-owner"),
        pytest.param(vpa(target_kind="CronJob"), [RS, DEPLOYMENT], False, id="other-kind"),
    ],
)
def test_vpa_targets_pod(obj: dict[str, Any], chain: list[OwnerRef], targets: bool) -> None:
    assert vpa_targets_pod(obj, pod_info(), chain) is targets


def test_vpa_without_namespace_is_matched_by_target_only() -> None:
    obj = vpa()
    del obj["metadata"]["namespace"]
    assert vpa_targets_pod(obj, pod_info(namespace="anywhere"), [RS, DEPLOYMENT])


POD_LEVEL = pod_resources(cpu_request="1", memory_request="256Mi")


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        pytest.param(
            {"resources": POD_LEVEL, "node_resizes_pod_level": True}, None, id="node-resizes"
        ),
        pytest.param(
            {"resources": POD_LEVEL, "node_resizes_pod_level": False},
            Ineligible.POD_LEVEL_RESIZE_UNSUPPORTED,
            id="node-cannot",
        ),
        pytest.param(
            {"resources": POD_LEVEL, "node_resizes_pod_level": None, "node": None},
            None,
            id="unbound-skips-the-gate",
        ),
        pytest.param({"node_resizes_pod_level": False}, None, id="container-pods-unaffected"),
        pytest.param(
            {
                "resources": POD_LEVEL,
                "node_resizes_pod_level": False,
                "node": node(os="windows"),
            },
            Ineligible.WINDOWS_NODE,
            id="node-gates-first",
        ),
        pytest.param(
            {
                "resources": pod_resources(cpu_request=None, memory_request="1Gi"),
                "containers": [container(cpu_request=None)],
                "node_resizes_pod_level": True,
            },
            Ineligible.NO_CPU_REQUEST,
            id="no-cpu-request-anywhere",
        ),
        pytest.param(
            {
                "resources": pod_resources(cpu_limit="1", memory_limit="256Mi"),
                "qos_class": None,
                "node_resizes_pod_level": True,
            },
            Ineligible.NOT_BURSTABLE,
            id="pod-level-guaranteed",
        ),
    ],
)
def test_pod_level_gate(overrides: dict[str, Any], reason: Ineligible | None) -> None:
    assert gates(**overrides) is reason


@pytest.mark.parametrize(
    ("obj", "target", "upper_bound"),
    [
        pytest.param(
            vpa(
                container_policies=REQUESTS_ONLY,
                cpu_targets={"app": "1500m", "other": "2"},
                cpu_upper_bounds={"app": "4", "other": "8"},
            ),
            {"app": 1500},
            {"app": 4000},
            id="requests-only",
        ),
        pytest.param(
            vpa(container_policies=REQUESTS_ONLY, cpu_targets={"app": "1.2"}),
            {"app": 1200},
            {"app": 1200},
            id="cores",
        ),
        pytest.param(vpa(cpu_targets={"app": "1500m"}), {}, {}, id="sets-limits"),
        pytest.param(
            vpa(container_policies=REQUESTS_ONLY, update_mode="Off", cpu_targets={"app": "1"}),
            {},
            {},
            id="update-off",
        ),
        pytest.param(
            vpa(
                container_policies=[
                    *REQUESTS_ONLY,
                    {"containerName": "app", "mode": "Off"},
                ],
                cpu_targets={"app": "1"},
            ),
            {},
            {},
            id="container-off",
        ),
        # VPA sets memory only: nothing it does depends on the CPU limit.
        pytest.param(
            vpa(
                container_policies=[
                    {
                        "containerName": "*",
                        "controlledValues": "RequestsOnly",
                        "controlledResources": ["memory"],
                    }
                ],
            ),
            {},
            {},
            id="memory-only",
        ),
        pytest.param(
            vpa(container_policies=REQUESTS_ONLY, cpu_targets={"app": "lots"}),
            {},
            {},
            id="unreadable",
        ),
        # Recommended for, but with no CPU amount to read: no floor.
        pytest.param(
            vpa(container_policies=REQUESTS_ONLY)
            | {
                "status": {
                    "recommendation": {
                        "containerRecommendations": [
                            {"containerName": "app", "target": {"memory": "1Gi"}}
                        ]
                    }
                }
            },
            {},
            {},
            id="no-cpu-amount",
        ),
        # Actuated, but nothing recommended yet: VPA's upper bound has no history to bound it.
        pytest.param(
            vpa(container_policies=REQUESTS_ONLY), {}, {"app": UNBOUNDED_M}, id="no-recommendation"
        ),
    ],
)
def test_vpa_cpu_recommendation(
    obj: dict[str, Any], target: dict[str, int], upper_bound: dict[str, int]
) -> None:
    view = vpa_view(obj)
    assert vpa_cpu_recommendation(view, ["app"], Recommended.TARGET) == target
    assert vpa_cpu_recommendation(view, ["app"], Recommended.UPPER_BOUND) == upper_bound
