"""Objects the end-to-end tier creates: the monitoring side a cluster admin brings (a
Prometheus and its RBAC), the runbook's workload, and an admission probe."""

from __future__ import annotations

from typing import Any

from devcluster.guests import PROBE_IMAGE
from tests import cluster_helpers

Manifest = dict[str, Any]


def namespace(name: str, *, labels: dict[str, str] | None = None) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels or {}},
    }


def prometheus_rbac(*, namespace: str, account: str) -> list[Manifest]:
    """What a Prometheus needs to discover and scrape targets (the operator's documented
    ClusterRole), bound to its ServiceAccount."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{namespace}-{account}"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["services", "endpoints", "pods"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"],
                },
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{namespace}-{account}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{namespace}-{account}",
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    ]


def prometheus(
    *, name: str, namespace: str, account: str, image: str, version: str, select: dict[str, str]
) -> Manifest:
    """A Prometheus selecting ServiceMonitors and PrometheusRules by ``select`` in every
    namespace. ``version`` is the server's, so the operator writes a configuration that
    version accepts; ``image`` is where the node pulls that server from."""
    selector = {"matchLabels": select}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "version": version,
            "image": image,
            "replicas": 1,
            "serviceAccountName": account,
            "scrapeInterval": "5s",
            "evaluationInterval": "5s",
            "serviceMonitorSelector": selector,
            "serviceMonitorNamespaceSelector": {},
            "ruleSelector": selector,
            "ruleNamespaceSelector": {},
        },
    }


def pod(name: str, namespace: str, *, cpu: str, node: str) -> Manifest:
    """A pod requesting ``cpu`` on ``node``: the probe on the node's root disk, asleep."""
    app = {
        "name": "app",
        "image": PROBE_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["/probe", "sleep"],
        "resources": {
            "requests": {"cpu": cpu, "memory": "16Mi"},
            "limits": {"memory": "32Mi"},
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 0,
            "containers": [app],
        },
    }


def deployment(name: str, namespace: str, *, cpu: str, node: str) -> Manifest:
    """One replica of :func:`pod`."""
    template = pod(name, namespace, cpu=cpu, node=node)
    template["metadata"]["labels"] = {"app": name}
    return cluster_helpers.deployment(template)


def limits_cpu_quota(name: str) -> Manifest:
    """The quota the validating webhook refuses in a managed namespace."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name},
        "spec": {"hard": {"limits.cpu": "8"}},
    }
