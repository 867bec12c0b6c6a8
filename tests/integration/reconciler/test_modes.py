"""Dry-run, enforcing, and the three ways to freeze limits (design §5, runbook rollback)."""

import subprocess
from pathlib import Path

from certs.cli import main as headroom_certs
from devcluster.headroom import render_webhook_configurations
from devcluster.ports import free_port
from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Pods, Scene, stays


def _target(pods: Pods, name: str) -> object:
    annotation = pods.status_annotation(name)
    return None if annotation is None else annotation.get("targetLimit")


def test_dry_run_is_the_default_and_enforcing_applies_without_a_pod_event(scene: Scene) -> None:
    pods = scene.pods
    pods.add("p", node=scene.make_node())
    reconciler = scene.start_reconciler()
    eventually(lambda: _target(pods, "p") == "10000m", what="a dry-run annotation")
    annotation = pods.status_annotation("p")
    assert annotation is not None
    assert annotation["dryRun"] is True
    assert stays(lambda: pods.generation("p") == 1, seconds=2)
    assert pods.cpu_limit("p") is None
    assert reconciler.resizes("dry-run") >= 1
    assert reconciler.resizes("ok") == 0
    [event] = pods.events("p", reason="CPULimitAdjusted")
    assert event["message"] == "would set unset -> 10000m (node factor 16.00, slack 15/16 cores)"

    scene.configure(dryRun=False)
    pods.wait_limit("p", "10", timeout=10)
    assert reconciler.resizes("ok") >= 1
    eventually(lambda: "dryRun" not in (pods.status_annotation("p") or {}), what="enforcing note")


def _enforced(scene: Scene) -> tuple[str, int]:
    """A managed 1-core pod alone on a node, resized to its 10-core cap."""
    node = scene.enforcing_node()
    scene.pods.add("p", node=node)
    scene.pods.wait_limit("p", "10")
    return node, scene.pods.generation("p")


def _frozen(pods: Pods, generation: int) -> None:
    """The dry-run annotation follows the node (3 cores of slack); the limit does not."""
    eventually(lambda: _target(pods, "p") == "4000m", what="the dry-run target")
    assert pods.cpu_limit("p") == "10"
    assert pods.generation("p") == generation


def test_setting_dry_run_back_freezes_limits(scene: Scene) -> None:
    scene.start_reconciler()
    node, generation = _enforced(scene)
    scene.configure(dryRun=True)
    scene.pods.neighbour("big", node=node, cpu="12")
    _frozen(scene.pods, generation)


def test_removing_the_namespace_label_freezes_limits(scene: Scene) -> None:
    pods = scene.pods
    reconciler = scene.start_reconciler()
    node, generation = _enforced(scene)
    scene.cluster.kubectl("label", "namespace", pods.namespace, "kube-headroom.dev/mode-")
    eventually(
        lambda: (
            reconciler.sample("headroom_pod_limit_cores", namespace=pods.namespace, pod="p") is None
        ),
        what="the pod to leave management",
    )
    pods.neighbour("big", node=node, cpu="12")
    assert stays(lambda: pods.generation("p") == generation, seconds=5)
    assert pods.cpu_limit("p") == "10"


def test_deleting_the_config_freezes_limits(scene: Scene) -> None:
    pods = scene.pods
    scene.start_reconciler()
    node, generation = _enforced(scene)
    scene.cluster.kubectl("delete", "hcfg", "cluster")
    # Without a config the defaults apply, and they are dry-run.
    eventually(lambda: (pods.status_annotation("p") or {}).get("dryRun") is True, what="dry-run")
    pods.neighbour("big", node=node, cpu="12")
    _frozen(pods, generation)


def test_the_stop_button_works_and_freezes_while_the_webhook_is_down(
    scene: Scene, tmp_path: Path
) -> None:
    control_plane, pods = scene.cluster, scene.pods
    scene.start_reconciler()
    node, generation = _enforced(scene)
    # The chart's config webhook, registered while nothing listens where it points.
    assert headroom_certs(["--out-dir", str(tmp_path), "--ip", "127.0.0.1"]) == 0
    [validating] = [
        obj
        for obj in render_webhook_configurations(
            control_plane.bin_dir / "helm",
            url=f"https://127.0.0.1:{free_port()}",
            ca_pem=(tmp_path / "ca.crt").read_bytes(),
        )
        if obj["kind"] == "ValidatingWebhookConfiguration"
    ]
    validating["metadata"] = {"name": f"down-{pods.namespace}"}
    validating["webhooks"] = [
        hook for hook in validating["webhooks"] if hook["name"].startswith("headroomconfigs.")
    ]
    control_plane.apply(validating)
    try:
        eventually(
            lambda: _patch(control_plane, '{"spec":{"quantum":"20m"}}').returncode != 0,
            what="the config webhook to be called (and fail)",
        )
        stopped = _patch(control_plane, '{"spec":{"dryRun":true}}')
        assert stopped.returncode == 0, stopped.stderr
        pods.neighbour("big", node=node, cpu="12")
        _frozen(pods, generation)
    finally:
        control_plane.kubectl(
            "delete", "validatingwebhookconfiguration", validating["metadata"]["name"]
        )


def _patch(cluster: Cluster, spec: str) -> subprocess.CompletedProcess[str]:
    kubectl = [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}"]
    return subprocess.run(
        [*kubectl, "patch", "hcfg", "cluster", "--type", "merge", "-p", spec],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
