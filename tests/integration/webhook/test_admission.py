"""The API server calls the webhook over TLS: seeding, quota and enrolment denials,
config validation, and metrics behind TokenReview/SubjectAccessReview."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.integration.conftest import Cluster, eventually
from tests.integration.webhook.conftest import (
    MODE_LABEL,
    SCOPE_LABEL,
    Webhook,
    create_quota,
    headroom_config,
    kubectl_result,
    pod,
)

LIMITS_CPU = {"limits.cpu": "20", "requests.cpu": "10"}


def _quota_denial(namespace: str, name: str) -> str:
    return (
        f"ResourceQuota {namespace}/{name} sets limits.cpu in spec.hard, but namespace "
        f"{namespace} is managed by Headroom, which raises CPU limits into idle node capacity; "
        "a limits.cpu quota would be charged for those raises and refuse them. Remove "
        "limits.cpu from spec.hard and quota requests.cpu instead. See the Headroom operator "
        'runbook, Preflight, "ResourceQuota: requests.cpu only" '
        "(docs/operator-runbook.md#preflight)."
    )


def _create_pod(cluster: Cluster, namespace: str, obj: dict[str, object]) -> dict[str, object]:
    """The pod as admission stored it (the live reconciler may resize it afterwards)."""
    # The namespace's default ServiceAccount may not exist yet; the API server wants it.
    result = eventually(
        lambda: (
            (
                done := kubectl_result(cluster, "create", "-n", namespace, "-o", "json", obj=obj)
            ).returncode
            == 0
            and done
        ),
        what="the pod to be created",
    )
    created: dict[str, object] = json.loads(result.stdout)
    return created


def _limits(created: dict[str, object]) -> dict[str, str]:
    container = created["spec"]["containers"][0]  # type: ignore[index]
    return dict(container["resources"]["limits"])


def test_pod_in_a_managed_namespace_is_born_with_its_seeded_limit(
    control_plane: Cluster, seeded_namespace: str
) -> None:
    created = _create_pod(control_plane, seeded_namespace, pod("seeded"))
    assert _limits(created) == {"cpu": "1", "memory": "256Mi"}
    kept = _create_pod(control_plane, seeded_namespace, pod("kept", cpu_limit="700m"))
    assert _limits(kept) == {"cpu": "700m", "memory": "256Mi"}


def test_pod_in_an_unmanaged_namespace_is_untouched(
    control_plane: Cluster, seeded_namespace: str
) -> None:
    control_plane.kubectl("label", "namespace", seeded_namespace, f"{MODE_LABEL}-")
    created = _create_pod(control_plane, seeded_namespace, pod("untouched"))
    assert _limits(created) == {"memory": "256Mi"}


def test_limits_cpu_quota_in_a_managed_namespace_is_denied_verbatim(
    control_plane: Cluster, managed_namespace: str
) -> None:
    denied = create_quota(control_plane, managed_namespace, "compute", hard=LIMITS_CPU)
    assert denied.returncode != 0
    assert (
        'admission webhook "resourcequotas.validate.kube-headroom.dev" denied the request: '
        + _quota_denial(managed_namespace, "compute")
    ) in denied.stderr
    allowed = create_quota(
        control_plane, managed_namespace, "requests", hard={"requests.cpu": "10"}
    )
    assert allowed.returncode == 0, allowed.stderr


def test_enrolling_a_namespace_with_a_limits_cpu_quota_is_denied_naming_it(
    control_plane: Cluster, scoped_namespace: str
) -> None:
    created = create_quota(control_plane, scoped_namespace, "compute", hard=LIMITS_CPU)
    assert created.returncode == 0, created.stderr
    denied = kubectl_result(
        control_plane, "label", "namespace", scoped_namespace, f"{MODE_LABEL}=managed"
    )
    assert denied.returncode != 0
    assert (
        f"namespace {scoped_namespace} cannot be enrolled in Headroom while its ResourceQuota "
        "compute set limits.cpu"
    ) in denied.stderr
    control_plane.kubectl("delete", "resourcequota", "-n", scoped_namespace, "compute")
    eventually(
        lambda: (
            kubectl_result(
                control_plane, "label", "namespace", scoped_namespace, f"{MODE_LABEL}=managed"
            ).returncode
            == 0
        ),
        what="enrolment once the quota is gone",
    )


def test_invalid_headroomconfig_is_rejected_listing_every_field_error(
    control_plane: Cluster, webhook: Webhook
) -> None:
    config = headroom_config(
        webhook.scope,
        spec={
            "namespaceSelector": {
                "matchLabels": {"bad key!": "x"},
                "matchExpressions": [{"key": "a", "operator": "In"}],
            },
            "excludedNodeSelector": {
                "matchExpressions": [{"key": "b", "operator": "Exists", "values": ["x"]}]
            },
        },
    )
    denied = kubectl_result(control_plane, "create", obj=config)
    assert denied.returncode != 0
    assert "HeadroomConfig cluster is invalid (3 errors): " in denied.stderr
    for path in (
        "spec.namespaceSelector.matchLabels[bad key!]",
        "spec.namespaceSelector.matchExpressions[0].values",
        "spec.excludedNodeSelector.matchExpressions[0].values",
    ):
        assert f"{path}: " in denied.stderr


def test_metrics_need_a_token_allowed_to_get_metrics(
    control_plane: Cluster, webhook: Webhook, namespace: str
) -> None:
    url = f"https://127.0.0.1:{webhook.metrics_port}/metrics"
    # No --metrics-cert-path: self-signed, so a scraper can only skip verification.
    assert httpx.get(url, verify=False).status_code == 401
    bad = httpx.get(url, verify=False, headers={"authorization": "Bearer not-a-token"})
    assert bad.status_code == 401
    account = f"stranger-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("create", "serviceaccount", account, "-n", namespace)
    token = control_plane.kubectl("create", "token", account, "-n", namespace).strip()
    forbidden = httpx.get(url, verify=False, headers={"authorization": f"Bearer {token}"})
    assert forbidden.status_code == 403
    admin = httpx.get(url, verify=False, headers={"authorization": f"Bearer {control_plane.token}"})
    assert admin.status_code == 200
    assert 'headroom_webhook_requests_total{endpoint="/mutate/pods",result="patched"}' in admin.text
    assert SCOPE_LABEL not in admin.text


def _deployment_web(cluster: Cluster, namespace: str) -> dict[str, object]:
    """A Deployment ``web`` of no replicas; the controller reference its ReplicaSet gives
    the pods it creates."""
    labels = {"app": "web"}
    cluster.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod("web")["spec"]},
            },
        }
    )

    def replica_set() -> dict[str, object] | None:
        listed = json.loads(cluster.kubectl("get", "replicasets", "-n", namespace, "-o", "json"))
        return next(
            (
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs["metadata"]["name"],
                    "uid": rs["metadata"]["uid"],
                    "controller": True,
                }
                for rs in listed["items"]
            ),
            None,
        )

    found: dict[str, object] = eventually(replica_set, what="the Deployment's ReplicaSet")
    return found


def _seeded_cpu_limit(cluster: Cluster, namespace: str, owner: dict[str, object]) -> str | None:
    """A pod's CPU limit after admission (server-side dry run: nothing is stored), the pod
    owned by ``owner``."""
    obj = pod("web-5d8f7c9b4-x1y2z")
    obj["metadata"]["ownerReferences"] = [owner]  # type: ignore[index]
    result = kubectl_result(
        cluster, "create", "-n", namespace, "--dry-run=server", "-o", "json", obj=obj
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    limits = json.loads(result.stdout)["spec"]["containers"][0]["resources"]["limits"]
    return limits.get("cpu")


def test_a_pod_whose_vpa_sets_limits_is_born_without_a_seeded_limit(
    control_plane: Cluster,
    third_party_crds: list[str],
    seeded_namespace: str,
) -> None:
    """A VPA in its default mode (RequestsAndLimits) owns the pod's limits: the webhook
    leaves them as the owner wrote them, as the reconciler does. RequestsOnly gives CPU
    limits back to Headroom."""
    owner = _deployment_web(control_plane, seeded_namespace)
    vpa = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }
    control_plane.kubectl("create", "-n", seeded_namespace, "-f", "-", input=json.dumps(vpa))
    eventually(
        lambda: _seeded_cpu_limit(control_plane, seeded_namespace, owner) is None,
        what="the webhook to see the VPA",
    )
    requests_only = {
        "spec": {
            "resourcePolicy": {
                "containerPolicies": [{"containerName": "*", "controlledValues": "RequestsOnly"}]
            }
        }
    }
    control_plane.kubectl(
        "patch", "vpa", "web", "-n", seeded_namespace, "--type=merge",
        "-p", json.dumps(requests_only),
    )  # fmt: skip
    eventually(
        lambda: _seeded_cpu_limit(control_plane, seeded_namespace, owner) == "1",
        what="a RequestsOnly VPA to leave CPU limits to Headroom",
    )
