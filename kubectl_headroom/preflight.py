"""The runbook's preflight as pure checks over a ClusterState.

Blockers are what would make Headroom misbehave if the namespace were enrolled
now (a ``limits.cpu`` quota, a control plane too old to resize, no cert-manager);
warnings are what narrows what Headroom can do (nodes whose pods it leaves alone:
Windows, kubelets older than 1.35 or of unknown version; nodes labelled as running a
static CPU/Memory Manager; LimitRange caps; VPAs that control limits); information is what
an operator may want to change (a node Headroom leaves alone that no taint keeps ordinary
pods off, so those pods are born without a birth limit).
"""

from collections.abc import Collection, Iterator
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from app.core.config import Settings
from app.core.eligibility import Ineligible, node_ineligibility, node_reason, vpa_controls_limits
from app.core.limitrange import limit_range_caps
from app.core.nodes import MINIMUM_RESIZE_TEXT, node_facts, resize_capable
from app.core.placement import repelling_taints
from app.core.quantity import format_cpu_millis
from kubectl_headroom.state import ClusterState

RUNBOOK = "docs/operator-runbook.md#preflight"
_MIN = MINIMUM_RESIZE_TEXT
# Labels operators and node-feature tooling commonly use to mark nodes whose
# kubelet runs a static CPU or Memory Manager policy.
_STATIC_MANAGER_LABELS = (
    "kubernetes.io/cpu-manager-policy",
    "cpumanager.kubernetes.io/policy",
    "node.kubernetes.io/cpu-manager-policy",
    "kubernetes.io/memory-manager-policy",
    "node.kubernetes.io/memory-manager-policy",
)


class Severity(StrEnum):
    BLOCKER = "blocker"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    subject: str
    message: str
    fix: str

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "severity": str(self.severity)}


def preflight(
    state: ClusterState, *, settings: Settings, planned: Collection[str] = ()
) -> list[Finding]:
    """Every finding, blockers first. ``planned`` are namespaces about to be enrolled."""
    scope = set(state.managed_namespaces(settings)) | set(planned)
    findings = [
        *_server_version(state),
        *_nodes(state, settings),
        *_untainted(state, settings),
        *_quotas(state, scope),
        *_limit_ranges(state, scope),
        *_vpas(state, scope),
        *_cert_manager(state),
    ]
    order = {Severity.BLOCKER: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return sorted(findings, key=lambda f: order[f.severity])


def _server_version(state: ClusterState) -> Iterator[Finding]:
    ok = resize_capable(state.server_version)
    if ok is False:
        severity = Severity.BLOCKER
        message = f"server is {state.server_version}; in-place pod resize needs ≥ {_MIN}"
        fix = f"upgrade the control plane to {_MIN} or newer"
    elif ok is None:
        severity = Severity.WARNING
        message = f"cannot parse server version {state.server_version!r}"
        fix = f"confirm the control plane is {_MIN} or newer"
    else:
        return
    yield Finding("server-version", severity, "kube-apiserver", message, fix)


# The node gates Headroom applies by itself, as preflight findings: (check, fix).
_NODE_GATES = {
    Ineligible.WINDOWS_NODE: ("windows-node", "keep workloads that need Headroom on Linux nodes"),
    Ineligible.KUBELET_TOO_OLD: (
        "kubelet-version",
        f"upgrade the node to {_MIN}+; its pods are managed from then on",
    ),
    Ineligible.KUBELET_VERSION_UNKNOWN: (
        "kubelet-version",
        "check the node's kubelet; its pods are managed once it reports a version "
        f"of {_MIN} or newer",
    ),
}


def _nodes(state: ClusterState, settings: Settings) -> Iterator[Finding]:
    for node in state.nodes:
        facts = node_facts(node)
        gate = node_ineligibility(settings, facts)
        static = [
            key for key in _STATIC_MANAGER_LABELS if facts.labels.get(key, "").lower() == "static"
        ]
        # A gated node's pods are left alone whatever its labels; only an ungated one warns
        # of a static resource manager.
        if gate is Ineligible.NODE_EXCLUDED or (gate is None and not static):
            continue
        if gate is not None:
            check, fix = _NODE_GATES[gate]
            message = f"{node_reason(gate, facts)}: Headroom leaves its pods alone"
        else:
            check = "static-resource-manager"
            fix = "add the node to spec.excludedNodeSelector in HeadroomConfig/cluster"
            message = (
                f"labelled {static[0]}=static: the kubelet refuses resizes of Guaranteed pods "
                "under a static CPU/Memory Manager policy; Headroom manages only Burstable "
                "pods, but exclude the node if its pods should keep fixed limits"
            )
        yield Finding(check, Severity.WARNING, f"node/{node['metadata']['name']}", message, fix)


def _untainted(state: ClusterState, settings: Settings) -> Iterator[Finding]:
    """Nodes Headroom leaves alone that ordinary pods may land on: the webhook gives no
    pod that could be scheduled there a birth limit (``app.core.birth``)."""
    for node in state.nodes:
        facts = node_facts(node)
        gate = node_ineligibility(settings, facts)
        if gate is None or repelling_taints(node):
            continue
        name = node["metadata"]["name"]
        yield Finding(
            "untainted-unmanaged-node",
            Severity.INFO,
            f"node/{name}",
            f"{node_reason(gate, facts)}, and no NoSchedule or NoExecute taint keeps other "
            "pods off it: a new pod that could be scheduled here is born without a birth limit",
            f"taint it (kubectl taint node {name} KEY=VALUE:NoSchedule) and let only the pods "
            "meant for it tolerate the taint",
        )


def _quotas(state: ClusterState, scope: set[str]) -> Iterator[Finding]:
    for quota in state.quotas:
        meta = quota["metadata"]
        hard = quota.get("spec", {}).get("hard") or {}
        if "limits.cpu" not in hard:
            continue
        namespace = meta["namespace"]
        subject = f"resourcequota/{namespace}/{meta['name']}"
        fix = f"replace limits.cpu with requests.cpu in spec.hard (see {RUNBOOK})"
        if namespace in scope:
            severity = Severity.BLOCKER
            effect = (
                " in a managed namespace: raises consume tenant quota and over-budget raises "
                "fail with 403"
            )
        else:
            severity, effect = Severity.INFO, "; the namespace cannot be enrolled until it goes"
        message = f"limits.cpu={hard['limits.cpu']}{effect}"
        yield Finding("limits-cpu-quota", severity, subject, message, fix)


def _limit_ranges(state: ClusterState, scope: set[str]) -> Iterator[Finding]:
    for limit_range in state.limit_ranges:
        meta = limit_range["metadata"]
        if meta["namespace"] not in scope:
            continue
        caps = limit_range_caps([limit_range])
        bounds = [
            f"{kind} max {format_cpu_millis(value)}"
            for kind, value in (("container", caps.container_max_m), ("pod", caps.pod_max_m))
            if value is not None
        ]
        if bounds:
            yield Finding(
                "limitrange-max",
                Severity.WARNING,
                f"limitrange/{meta['namespace']}/{meta['name']}",
                f"{', '.join(bounds)} caps the ceiling Headroom can set",
                "expected if intended; tell tenants why their limit plateaus there",
            )


def _vpas(state: ClusterState, scope: set[str]) -> Iterator[Finding]:
    for vpa in state.vpas or ():
        meta = vpa["metadata"]
        if meta["namespace"] not in scope:
            continue
        target = vpa.get("spec", {}).get("targetRef") or {}
        owner = f"{target.get('kind', '?')}/{target.get('name', '?')}"
        where = f"verticalpodautoscaler/{meta['namespace']}/{meta['name']}"
        if vpa_controls_limits(vpa):
            yield Finding(
                "vpa-controls-limits",
                Severity.WARNING,
                where,
                f"controls limits of {owner}; Headroom leaves those pods alone",
                "set controlledValues: RequestsOnly on every container policy",
            )
        else:
            yield Finding(
                "vpa-requests-only",
                Severity.INFO,
                where,
                f"sets requests of {owner}; Headroom sets its CPU limits, never below "
                "VPA's recommended upper bound",
                "nothing to do: supported",
            )


def _cert_manager(state: ClusterState) -> Iterator[Finding]:
    if not state.cert_manager:
        yield Finding(
            "cert-manager",
            Severity.BLOCKER,
            "certificates.cert-manager.io",
            "cert-manager is not installed; it issues the webhook serving certificate",
            "install cert-manager, or install the chart with certmanager.enable=false "
            "and webhook.caBundle/webhook.certSecretName",
        )
