"""The real ``headroom-webhook`` process, called by the real API server over TLS.

Each webhook process gets webhook configurations of its own (``clientConfig.url`` on
127.0.0.1, ``caBundle`` from ``headroom-certs``) scoped by a per-process label, so other
tests on the same control plane never reach it.

The webhook seeds a birth limit only while a live reconciler holds its Lease and only for
a pod whose every possible node Headroom manages (``app.core.birth``), so the scenarios
that expect one run the real reconciler beside it (``live_reconciler``), and their pods
are headed for simulated nodes of their own (``webhook_nodes``): tainted, so no other
test's pods land there, and one per node pool the scenarios name.
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import ssl
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509

from certs.cli import main as headroom_certs
from devcluster.headroom import render_webhook_configurations
from devcluster.nodes import simulated_node
from devcluster.ports import free_port
from tests.integration.conftest import REPO, Cluster, eventually
from tests.integration.rbac import RECONCILER, WEBHOOK, chart_rbac, service_account_kubeconfig
from tests.integration.reconciler.conftest import Reconciler, launch_reconciler

SCOPE_LABEL = "headroom-test/webhook"
MODE_LABEL = "kube-headroom.dev/mode"
# The webhook scenarios' nodes: labelled with their role, tainted against other pods.
NODE_LABEL = "headroom-test/webhook-node"
NODE_TAINT = {"key": "headroom-test/webhook-node", "value": "true", "effect": "NoSchedule"}
# Each node's role, and its node pool's label (the scenarios' pools select on it).
NODE_ROLES = {"plain": None, "batch": "batch", "paused": "paused"}


def headed_for(obj: dict[str, Any], role: str | None = "plain") -> dict[str, Any]:
    """``obj``, a pod, made to tolerate the scenarios' nodes and headed for the one of
    ``role`` (None: any of them, or any untainted node)."""
    spec = obj["spec"]
    spec["tolerations"] = [{"key": NODE_TAINT["key"], "operator": "Exists"}]
    spec.pop("nodeSelector", None)
    if role is not None:
        spec["nodeSelector"] = {NODE_LABEL: role}
    return obj


@dataclass
class Webhook:
    cluster: Cluster
    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    probe_port: int
    cert_dir: Path
    log_path: Path
    scope: str
    configurations: str = ""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.probe_port}/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def serving_serial(self) -> int:
        """The serial of the certificate a new connection is served."""
        context = ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number

    def register(self) -> None:
        """Create webhook configurations pointing at this process; wait until they act."""
        ca_bundle = base64.b64encode((self.cert_dir / "ca.crt").read_bytes()).decode()
        self.configurations = f"headroom-test-{self.scope}"
        objects = webhook_configurations(
            name=self.configurations,
            url=self.url,
            ca_bundle=ca_bundle,
            scope=self.scope,
            helm=self.cluster.bin_dir / "helm",
        )
        self.cluster.kubectl(
            "create",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        )
        # The API server picks configurations up asynchronously: wait for a denial.
        probe = headroom_config(
            self.scope, spec={"namespaceSelector": {"matchLabels": {"a b": "c"}}}
        )
        eventually(
            lambda: (
                "is invalid"
                in kubectl_result(self.cluster, "create", "--dry-run=server", obj=probe).stderr
            ),
            what="the validating webhook to be called",
        )

    def unregister(self) -> None:
        if self.configurations:
            self.cluster.kubectl(
                "delete",
                "mutatingwebhookconfiguration,validatingwebhookconfiguration",
                self.configurations,
                "--ignore-not-found",
            )

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def log_messages(self) -> list[str]:
        return [
            json.loads(line)["msg"]
            for line in self.log_path.read_text().splitlines()
            if line.startswith("{")
        ]


def webhook_configurations(
    *, name: str, url: str, ca_bundle: str, scope: str, helm: Path
) -> list[dict[str, Any]]:
    """The chart's own webhook configurations (rendered by the real helm), aimed at a
    local process and narrowed to objects labelled with this process's scope, so other
    tests on the same control plane never reach it."""
    objects = render_webhook_configurations(helm, url=url, ca_pem=base64.b64decode(ca_bundle))
    for obj in objects:
        obj["metadata"] = {"name": name}
        for hook in obj["webhooks"]:
            cluster_scoped = hook["rules"][0].get("scope") == "Cluster"
            key = "objectSelector" if cluster_scoped else "namespaceSelector"
            selector = hook.setdefault(key, {})
            selector.setdefault("matchLabels", {})[SCOPE_LABEL] = scope
    return objects


def headroom_config(scope: str, *, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kube-headroom.dev/v1alpha1",
        "kind": "HeadroomConfig",
        "metadata": {"name": "cluster", "labels": {SCOPE_LABEL: scope}},
        "spec": spec,
    }


def create_quota(
    cluster: Cluster, namespace: str, name: str, *, hard: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``kubectl create`` a ResourceQuota in ``namespace``: the result, admitted or not."""
    obj = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
           "spec": {"hard": hard}}  # fmt: skip
    return kubectl_result(cluster, "create", "-n", namespace, obj=obj)


def pod(name: str, *, cpu_request: str = "500m", cpu_limit: str | None = None) -> dict[str, Any]:
    """A pod headed for the scenarios' plain node (see ``headed_for``)."""
    limits = {"memory": "256Mi"} if cpu_limit is None else {"cpu": cpu_limit, "memory": "256Mi"}
    return headed_for(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.example/app:1",
                        "resources": {
                            "requests": {"cpu": cpu_request, "memory": "128Mi"},
                            "limits": limits,
                        },
                    }
                ],
            },
        }
    )


def kubectl_result(
    cluster: Cluster, *args: str, obj: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run kubectl (reading ``obj`` as ``-f -`` when given); never raises on failure."""
    files = ["-f", "-"] if obj is not None else []
    return subprocess.run(
        [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}", *args, *files],
        input=json.dumps(obj) if obj is not None else None,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def cpu_limit_after_dry_run_create(cluster: Cluster, namespace: str) -> str | None:
    """Create a pod with server-side dry-run (admission runs, nothing is stored)."""
    result = kubectl_result(
        cluster, "create", "-n", namespace, "--dry-run=server", "-o", "json", obj=pod("probe")
    )
    if result.returncode != 0:
        return None
    limits: dict[str, str] = json.loads(result.stdout)["spec"]["containers"][0]["resources"][
        "limits"
    ]
    return limits.get("cpu")


def start_webhook(cluster: Cluster, workdir: Path, *, kubeconfig: Path) -> Webhook:
    cert_dir = workdir / "certs"
    assert headroom_certs(["--out-dir", str(cert_dir), "--ip", "127.0.0.1", "--write-ca-key"]) == 0
    ports = free_port(), free_port(), free_port()
    log_path = workdir / "webhook.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "webhook.main",
                f"--bind-address=127.0.0.1:{ports[0]}",
                f"--metrics-bind-address=127.0.0.1:{ports[1]}",
                f"--health-probe-bind-address=127.0.0.1:{ports[2]}",
                f"--cert-dir={cert_dir}",
                f"--kubeconfig={kubeconfig}",
            ],
            stderr=log,
            cwd=REPO,
        )
    webhook = Webhook(
        cluster=cluster,
        process=process,
        port=ports[0],
        metrics_port=ports[1],
        probe_port=ports[2],
        cert_dir=cert_dir,
        log_path=log_path,
        scope=uuid.uuid4().hex[:10],
    )
    try:
        eventually(
            lambda: webhook.process.poll() is not None or webhook.ready(), what="webhook ready"
        )
        assert webhook.process.poll() is None, log_path.read_text()
    except BaseException:
        # Not handed to a fixture that would stop it.
        process.kill()
        process.wait()
        raise
    return webhook


@pytest.fixture(scope="module")
def webhook_kubeconfig(control_plane: Cluster, helm: Path) -> Iterator[Path]:
    """Credentials of the chart's webhook ServiceAccount under the chart's RBAC: the
    scenarios run with exactly the production permissions."""
    with chart_rbac(control_plane, helm):
        yield service_account_kubeconfig(control_plane, WEBHOOK)


@pytest.fixture(scope="session")
def webhook_nodes(control_plane: Cluster) -> Iterator[list[str]]:
    """The scenarios' simulated nodes, one per role, Ready."""
    names = [f"webhook-{role}" for role in NODE_ROLES]
    for name, (role, pool) in zip(names, NODE_ROLES.items(), strict=True):
        node = simulated_node(name, labels={NODE_LABEL: role, **({"pool": pool} if pool else {})})
        node["spec"]["taints"] = [NODE_TAINT]
        control_plane.kubectl("create", "-f", "-", input=json.dumps(node))
    for name in names:
        control_plane.kubectl("wait", f"node/{name}", "--for=condition=Ready", "--timeout=60s")
    yield names
    for name in names:
        control_plane.delete_node(name)


@pytest.fixture(scope="module")
def live_reconciler(
    control_plane: Cluster,
    headroom_crd: str,
    webhook_kubeconfig: Path,
    webhook_nodes: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Reconciler]:
    """The real reconciler, as the chart's ServiceAccount: while it holds its Lease, the
    webhook seeds. Stopped (and the Lease released) after the module."""
    log = tmp_path_factory.mktemp("reconciler") / "reconciler.log"
    process = launch_reconciler(service_account_kubeconfig(control_plane, RECONCILER), log)
    try:
        process.wait_ready()
        yield process
    finally:
        assert process.terminate() == 0, log.read_text()[-4000:]


@pytest.fixture
def make_webhook(
    control_plane: Cluster,
    headroom_crd: str,
    tmp_path_factory: pytest.TempPathFactory,
    webhook_kubeconfig: Path,
) -> Iterator[Callable[[], Webhook]]:
    """Start (and register) webhook processes, as the chart's ServiceAccount; all are
    stopped and unregistered after."""
    started: list[Webhook] = []

    def make() -> Webhook:
        webhook = start_webhook(
            control_plane, tmp_path_factory.mktemp("webhook"), kubeconfig=webhook_kubeconfig
        )
        started.append(webhook)
        webhook.register()
        return webhook

    yield make
    for webhook in started:
        webhook.unregister()
        webhook.stop()


@pytest.fixture
def webhook(make_webhook: Callable[[], Webhook]) -> Webhook:
    return make_webhook()


def in_scope(cluster: Cluster, namespace: str, webhook: Webhook) -> str:
    """Put ``namespace`` in the scope of ``webhook``'s configurations (not enrolled)."""
    cluster.kubectl("label", "namespace", namespace, f"{SCOPE_LABEL}={webhook.scope}")
    return namespace


@pytest.fixture
def scoped_namespace(control_plane: Cluster, namespace: str, webhook: Webhook) -> str:
    """A fresh namespace the webhook's configurations apply to (not enrolled)."""
    return in_scope(control_plane, namespace, webhook)


@pytest.fixture
def enforcing(
    control_plane: Cluster, webhook: Webhook, live_reconciler: Reconciler
) -> Iterator[Callable[[str], None]]:
    """A HeadroomConfig with dryRun false, and a live reconciler; ``enforcing(ns)`` waits
    until ``ns`` is seeded."""
    control_plane.kubectl("delete", "hcfg", "cluster", "--ignore-not-found")
    control_plane.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(headroom_config(webhook.scope, spec={"dryRun": False})),
    )

    def wait_until_seeding(namespace: str) -> None:
        eventually(
            lambda: cpu_limit_after_dry_run_create(control_plane, namespace) == "1",
            what=f"pods in {namespace} to be seeded",
        )

    yield wait_until_seeding
    control_plane.kubectl("delete", "hcfg", "cluster", "--ignore-not-found")


@pytest.fixture
def managed_namespace(control_plane: Cluster, scoped_namespace: str) -> str:
    control_plane.kubectl("label", "namespace", scoped_namespace, f"{MODE_LABEL}=managed")
    return scoped_namespace


@pytest.fixture
def seeded_namespace(enforcing: Callable[[str], None], managed_namespace: str) -> str:
    """A managed namespace whose new pods the webhook seeds (enforcing, reconciler live)."""
    enforcing(managed_namespace)
    return managed_namespace
