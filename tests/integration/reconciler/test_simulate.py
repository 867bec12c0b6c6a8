"""``kubectl headroom simulate`` on the real API server: it predicts exactly what the
reconciler then does, it needs no write permission, and a saved snapshot simulates offline
like the live cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.quantity import parse_cpu_millis
from tests.integration.conftest import Cluster, eventually
from tests.integration.rbac import ServiceAccount, cluster_role_account
from tests.integration.reconciler.conftest import Pods, Reconciler, stays
from tests.integration.reconciler.manifests import container, pod

VENV_BIN = Path(sys.executable).parent
READ_ONLY = ["get", "list"]


def simulate(
    cluster: Cluster, *args: str, kubeconfig: Path | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``kubectl headroom simulate`` through kubectl's plugin mechanism."""
    env = cluster.environ()
    env["PATH"] = f"{VENV_BIN}:{env['PATH']}"
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "headroom", "simulate", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=cwd,
    )


@pytest.fixture
def reader(control_plane: Cluster, namespace: str) -> Iterator[Path]:
    """A kubeconfig for an identity that may only get and list what simulate reads."""
    name = f"simulate-reader-{uuid.uuid4().hex[:6]}"
    rules = [
        {"apiGroups": [""], "resources": [
            "nodes", "namespaces", "pods", "limitranges", "resourcequotas"
        ], "verbs": READ_ONLY},
        {"apiGroups": ["autoscaling.k8s.io"], "resources": ["verticalpodautoscalers"],
         "verbs": READ_ONLY},
        {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": READ_ONLY},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": READ_ONLY},
        {"apiGroups": ["kube-headroom.dev"], "resources": ["headroomconfigs"],
         "verbs": READ_ONLY},
    ]  # fmt: skip
    with cluster_role_account(control_plane, ServiceAccount(namespace, name), rules) as config:
        yield config


def _limits(obj: dict[str, Any]) -> tuple[str | None, dict[str, str]]:
    """The pod-level CPU limit and each container's (sidecars as ``init:<name>``)."""
    spec = obj["spec"]
    pod_level = spec.get("resources", {}).get("limits", {}).get("cpu")
    containers = {
        ("init:" if init else "") + c["name"]: c["resources"]["limits"]["cpu"]
        for init, group in ((False, spec["containers"]), (True, spec.get("initContainers", [])))
        for c in group
        if c.get("resources", {}).get("limits", {}).get("cpu")
    }
    return pod_level, containers


def _millis(limits: dict[str, str]) -> dict[str, int]:
    return {name: parse_cpu_millis(value) for name, value in limits.items()}


def test_simulate_predicted_every_resulting_limit_exactly(
    control_plane: Cluster,
    configure: Callable[..., None],
    make_node: Callable[..., str],
    namespace: str,
    reader: Path,
    start_reconciler: Callable[..., Reconciler],
) -> None:
    pods = Pods(control_plane, namespace)
    pool = uuid.uuid4().hex[:8]
    plain, batch = make_node(), make_node(labels={"pool": pool})
    configure(
        dryRun=False,
        nodePools=[{"name": "batch", "nodeSelector": {"matchLabels": {"pool": pool}},
                    "maxMultiplier": "3", "quantum": "100m"}],
    )  # fmt: skip
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "containers", "namespace": namespace},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "3"}}]},
        }
    )
    specs: list[tuple[str, str, dict[str, Any]]] = [
        ("small", plain, {"containers": [container(cpu="250m", cpu_limit="500m")]}),
        ("two", plain, {"containers": [container("a", cpu="1"), container("b", cpu="300m")],
                        "sidecars": [container("proxy", cpu="100m", sidecar=True)]}),
        ("in-band", plain, {"containers": [container(cpu="2", cpu_limit="2900m")]}),
        ("capped", plain, {"containers": [container(cpu="1")],
                           "annotations": {"kube-headroom.dev/max-cpu": "1700m"}}),
        # The LimitRange gives its container a 3-core limit, which the pod-level limit
        # may not go below.
        ("pod-level", plain, {"containers": [container(cpu="100m")],
                              "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}}}),
        ("batch-a", batch, {"containers": [container(cpu="700m")]}),
        ("batch-b", batch, {"containers": [container(cpu="1300m", cpu_limit="1500m")]}),
        ("opted-out", batch, {"containers": [container(cpu="2")],
                              "labels": {"kube-headroom.dev/mode": "unmanaged"}}),
    ]  # fmt: skip
    for name, node, fields in specs:
        pods.create(pod(name, namespace=namespace, node=node, **fields))
    for name, _, _ in specs:
        pods.wait_running(name)
    before = {name: _limits(pods.get(name)) for name, _, _ in specs}

    # Not enrolled yet: what would enrolling it do? Asked with read-only credentials.
    result = simulate(
        control_plane, "--enroll", namespace, "-n", namespace, "-o", "json", kubeconfig=reader
    )
    assert result.returncode == 0, result.stderr
    predicted = json.loads(result.stdout)
    rows = {row["pod"]: row for row in predicted["pods"]}
    assert set(rows) == {n for n, _, _ in specs} - {"opted-out"} - (
        set() if _pod_level_resize(control_plane, plain) else {"pod-level"}
    )
    assert {row["pool"] for name, row in rows.items() if name.startswith("batch")} == {"batch"}
    # Simulating wrote nothing.
    assert {name: _limits(pods.get(name)) for name, _, _ in specs} == before
    assert all(pods.status_annotation(name) is None for name, _, _ in specs)

    control_plane.kubectl("label", "namespace", namespace, "kube-headroom.dev/mode=managed")
    start_reconciler()

    def expected(name: str) -> tuple[int | None, dict[str, int]]:
        row = rows[name]
        pod_level_before, containers_before = before[name]
        if row["action"] in ("keep", "skip"):
            return (
                None if pod_level_before is None else parse_cpu_millis(pod_level_before),
                _millis(containers_before),
            )
        if row["podLevel"]:
            return parse_cpu_millis(row["limitAfter"]), _millis(containers_before)
        return None, {**_millis(containers_before), **_millis(row["simulatedContainerLimits"])}

    def actual(name: str) -> tuple[int | None, dict[str, int]]:
        pod_level, containers = _limits(pods.get(name))
        return (None if pod_level is None else parse_cpu_millis(pod_level)), _millis(containers)

    for name in rows:
        eventually(lambda n=name: actual(n) == expected(n), what=f"{name} as predicted")
    # And nothing moves past the prediction; what it did not list stays as it was.
    assert stays(lambda: all(actual(n) == expected(n) for n in rows), seconds=3)
    for name in {n for n, _, _ in specs} - set(rows):
        assert _limits(pods.get(name)) == before[name], name


def _narrowed(output: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(output)
    del document["enrolledNamespaces"]
    return document


def _pod_level_resize(cluster: Cluster, node: str) -> bool:
    obj = json.loads(cluster.kubectl("get", "node", node, "-o", "json"))
    return "InPlacePodLevelResourcesVerticalScaling" in obj["status"].get("declaredFeatures", [])


@pytest.fixture
def team_a(control_plane: Cluster) -> Iterator[str]:
    """The runbook's own namespace, for its commands verbatim."""
    # Another test on this control plane may have left it terminating.
    control_plane.kubectl("wait", "--for=delete", "namespace/team-a", "--timeout=120s")
    control_plane.kubectl("create", "namespace", "team-a")
    yield "team-a"
    control_plane.kubectl("delete", "namespace", "team-a", "--wait=false", "--ignore-not-found")


def test_a_saved_snapshot_simulates_offline_like_the_live_cluster(
    control_plane: Cluster,
    make_node: Callable[..., str],
    team_a: str,
    tmp_path: Path,
    crd: None,
) -> None:
    node = make_node()
    pods = Pods(control_plane, team_a)
    pods.create(pod("web", namespace=team_a, node=node, containers=[container(cpu="1")]))
    pods.wait_running("web")
    # The runbook's two commands, verbatim.
    saved = simulate(control_plane, "--save", "cluster.json.gz", cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    args = ["--enroll", "team-a", "--set", "maxMultiplier=5", "-o", "json"]
    offline = simulate(control_plane, "--snapshot", "cluster.json.gz", *args, cwd=tmp_path)
    assert offline.returncode == 0, offline.stderr
    live = simulate(control_plane, *args)
    assert live.returncode == 0, live.stderr
    narrowed = ["-n", "team-a"]
    offline_team = simulate(control_plane, "--snapshot", "cluster.json.gz", *args, *narrowed,
                            cwd=tmp_path)  # fmt: skip
    live_team = simulate(control_plane, *args, *narrowed)
    # Other tests' namespaces may still be terminating: compare what -n team-a narrows.
    assert _narrowed(offline_team.stdout) == _narrowed(live_team.stdout)
    [web] = json.loads(live_team.stdout)["pods"]
    assert (web["simulatedLimit"], web["ceilingBoundBy"]) == ("5000m", "max-multiplier")
    # The snapshot alone is enough: no cluster to reach at all.
    unreachable = tmp_path / "unreachable-kubeconfig"
    unreachable.write_text("not: a kubeconfig")
    again = simulate(
        control_plane, "--snapshot", "cluster.json.gz", *args, *narrowed,
        kubeconfig=unreachable, cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(offline_team.stdout)
