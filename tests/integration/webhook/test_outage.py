"""With the webhook process stopped, what the cluster does is what its configuration says:
failurePolicy Ignore everywhere but the HeadroomConfig webhook (see webhook/cache.py),
whose one exception is the stop button: setting `dryRun: true` and nothing else."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from tests.integration.conftest import Cluster
from tests.integration.webhook.conftest import (
    Webhook,
    cpu_limit_after_dry_run_create,
    create_quota,
    headroom_config,
    kubectl_result,
    pod,
)


def test_a_stopped_webhook_blocks_neither_pods_nor_quotas(
    control_plane: Cluster,
    webhook: Webhook,
    seeded_namespace: str,
) -> None:
    assert webhook.stop() == 0
    assert "received SIGTERM; shutting down" in webhook.log_messages()

    created = kubectl_result(
        control_plane, "create", "-n", seeded_namespace, "-o", "json", obj=pod("born")
    )
    assert created.returncode == 0, created.stderr
    # As admission stored it: the live reconciler sets its limit once it is bound.
    stored = json.loads(created.stdout)
    assert "cpu" not in stored["spec"]["containers"][0]["resources"]["limits"]
    assert cpu_limit_after_dry_run_create(control_plane, seeded_namespace) is None

    # Fail-open, as documented: the reconciler's quota-denied count and alert catch it.
    admitted = create_quota(control_plane, seeded_namespace, "compute", hard={"limits.cpu": "20"})
    assert admitted.returncode == 0, admitted.stderr

    # The config webhook fails closed: a config nobody validated is refused.
    refused = kubectl_result(
        control_plane,
        "apply",
        obj=headroom_config(webhook.scope, spec={"dryRun": False, "quantum": "20m"}),
    )
    assert refused.returncode != 0
    assert "headroomconfigs.validate.kube-headroom.dev" in refused.stderr


def _patch_config(cluster: Cluster, spec: str) -> subprocess.CompletedProcess[str]:
    return kubectl_result(cluster, "patch", "hcfg", "cluster", "--type", "merge", "-p", spec)


def test_the_stop_button_works_while_the_webhook_is_down(
    control_plane: Cluster, webhook: Webhook, enforcing: Callable[[str], None]
) -> None:
    assert webhook.stop() == 0
    # The runbook's command, verbatim.
    stopped = _patch_config(control_plane, '{"spec":{"dryRun":true}}')
    assert stopped.returncode == 0, stopped.stderr
    stored = json.loads(control_plane.kubectl("get", "hcfg", "cluster", "-o", "json"))
    assert stored["spec"]["dryRun"] is True
    # Anything more than the stop still needs the webhook, which is down: refused.
    for spec in ('{"spec":{"dryRun":false}}', '{"spec":{"dryRun":true,"quantum":"20m"}}'):
        refused = _patch_config(control_plane, spec)
        assert refused.returncode != 0, spec
        assert "headroomconfigs.validate.kube-headroom.dev" in refused.stderr


def test_setting_dry_run_with_an_invalid_change_is_still_validated(
    control_plane: Cluster, webhook: Webhook, enforcing: Callable[[str], None]
) -> None:
    refused = _patch_config(
        control_plane, '{"spec":{"dryRun":true,"quantum":"0","maxMultiplier":"1000"}}'
    )
    assert refused.returncode != 0
    assert "spec.quantum" in refused.stderr
    assert "spec.maxMultiplier" in refused.stderr
