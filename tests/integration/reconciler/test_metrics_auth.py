"""`/metrics` over HTTPS behind TokenReview and SubjectAccessReview."""

import json
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.integration.conftest import Cluster
from tests.integration.reconciler.conftest import Reconciler


@pytest.fixture
def metrics_reader(control_plane: Cluster, namespace: str) -> Iterator[tuple[str, str]]:
    """Tokens of two ServiceAccounts: one bound to get /metrics, one not."""
    role = f"metrics-reader-{uuid.uuid4().hex[:6]}"
    objects = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "scraper", "namespace": namespace},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "stranger", "namespace": namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}],
        },
    ]
    control_plane.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )
    tokens = tuple(
        control_plane.kubectl("create", "token", account, "-n", namespace).strip()
        for account in ("scraper", "stranger")
    )
    yield tokens[0], tokens[1]
    control_plane.kubectl("delete", "clusterrolebinding,clusterrole", role, "--ignore-not-found")


def test_scrapes_need_a_token_allowed_to_get_metrics(
    metrics_reader: tuple[str, str], start_reconciler: Callable[..., Reconciler]
) -> None:
    allowed, forbidden = metrics_reader
    reconciler = start_reconciler(secure_metrics=True)
    # The serving certificate is self-signed here (no --metrics-cert-path).
    with httpx.Client(verify=False, timeout=10) as client:
        assert client.get(reconciler.metrics_url).status_code == 401
        headers = {"Authorization": "Bearer not-a-token"}
        assert client.get(reconciler.metrics_url, headers=headers).status_code == 401
        headers = {"Authorization": f"Bearer {forbidden}"}
        assert client.get(reconciler.metrics_url, headers=headers).status_code == 403
        response = client.get(
            reconciler.metrics_url, headers={"Authorization": f"Bearer {allowed}"}
        )
    assert response.status_code == 200
    assert 'headroom_resizes_total{result="quota-denied"} 0.0' in response.text
