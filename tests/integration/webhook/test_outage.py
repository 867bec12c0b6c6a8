"""With the webhook process stopped, what the cluster does is what its configuration says:
failurePolicy Ignore everywhere but the HeadroomConfig webhook (see webhook/cache.py)."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.integration.conftest import Cluster
from tests.integration.webhook.conftest import (
    Webhook,
    cpu_limit_after_dry_run_create,
    headroom_config,
    kubectl_result,
    pod,
    quota,
)


def test_a_stopped_webhook_blocks_neither_pods_nor_quotas(
    control_plane: Cluster,
    webhook: Webhook,
    enforcing: Callable[[str], None],
    managed_namespace: str,
) -> None:
    enforcing(managed_namespace)
    assert webhook.stop() == 0
    assert "received SIGTERM; shutting down" in webhook.log_messages()

    created = kubectl_result(control_plane, "create", "-n", managed_namespace, obj=pod("born"))
    assert created.returncode == 0, created.stderr
    stored = json.loads(
        control_plane.kubectl("get", "pod", "-n", managed_namespace, "born", "-o", "json")
    )
    assert "cpu" not in stored["spec"]["containers"][0]["resources"]["limits"]
    assert cpu_limit_after_dry_run_create(control_plane, managed_namespace) is None

    # Fail-open, as documented: the reconciler's quota-denied count and alert catch it.
    admitted = kubectl_result(
        control_plane,
        "create",
        "-n",
        managed_namespace,
        obj=quota("compute", hard={"limits.cpu": "20"}),
    )
    assert admitted.returncode == 0, admitted.stderr

    # The config webhook fails closed: a config nobody validated is refused.
    refused = kubectl_result(
        control_plane,
        "apply",
        obj=headroom_config(webhook.scope, spec={"dryRun": True}),
    )
    assert refused.returncode != 0
    assert "headroomconfigs.validate.kube-headroom.dev" in refused.stderr
