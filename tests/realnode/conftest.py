"""The real-node tier: Headroom's real processes against a control plane whose nodes are
real kubelets (with containerd, runc and CNI) in qemu guests.

``make realnode`` (``hack/realnode.sh``) builds what is missing and runs this package in a
network and mount namespace of its own, where the guests' node and pod addresses exist
(``devcluster.realnet``). The session boots the standard fleet (``devcluster.realnodes``)
once; every test shares it and cleans up after itself, so the next test finds the nodes
empty. The reconciler and the webhook run as the chart's ServiceAccounts, started by the
integration tier's own fixtures.

Outside ``make realnode`` these tests are deselected (plain ``pytest`` lists them as such).
"""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.core.apipaths import NODES
from devcluster.kubepods import PodNotStartedError
from devcluster.prometheus import Prometheus, ScrapeTarget
from devcluster.realnet import NAMESPACE_ENV
from devcluster.realnodes import RealCluster
from devcluster.vpa import resource_metrics_api
from tests.cluster_helpers import harness_tier
from tests.fleet import say
from tests.integration.conftest import Cluster, headroom_crd, helm, third_party_crds
from tests.integration.rbac import (
    RECONCILER,
    RELEASE,
    RELEASE_NAMESPACE,
    WEBHOOK,
    ServiceAccount,
    chart_rbac,
    service_account_kubeconfig,
    service_account_token,
)
from tests.integration.reconciler.autoscaling import vpa
from tests.integration.reconciler.conftest import Pods, Reconciler, configure, crd, start_reconciler
from tests.integration.webhook.conftest import MODE_LABEL, SCOPE_LABEL, Webhook, start_webhook
from tests.realnode import builders
from tests.realnode.builders import Obj
from tests.realnode.kubelets import Kubelets, Observation

__all__ = [
    "configure",
    "crd",
    "headroom_crd",
    "helm",
    "say",
    "start_reconciler",
    "third_party_crds",
    "vpa",
]

# Prometheus's identity: a ServiceAccount, as an operator's Prometheus has.
SCRAPER = ServiceAccount(namespace=RELEASE_NAMESPACE, name="prometheus")
# A kubelet's cAdvisor refreshes a container's stats every 10 to 15 s (its housekeeping)
# and stamps them with that time, so a faster scrape only repeats samples. 15 s is also
# Grafana's default scrape interval for a Prometheus data source.
SCRAPE_INTERVAL = 15.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "realnode: real kubelets in qemu guests (make realnode)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # They need root, qemu and a network namespace of their own: make realnode.
    harness_tier(config, items, here=Path(__file__).parent, marker="realnode", env=NAMESPACE_ENV)


@pytest.fixture(autouse=True)
def quiet_nodes(real_cluster: RealCluster) -> None:
    """Each test starts once the kubelets have stopped the last test's containers, so
    its pods do not queue behind that work (on a slow machine, a minute or more)."""
    real_cluster.wait_quiet(timeout=300)


@pytest.fixture(scope="session")
def control_plane(real_cluster: RealCluster) -> Cluster:
    """The integration tier's view of a control plane, so its fixtures work here."""
    return Cluster(real_cluster.plane)


@pytest.fixture(scope="session")
def kubelets(real_cluster: RealCluster) -> Kubelets:
    return Kubelets(real_cluster)


@pytest.fixture(scope="session")
def chart_identities(control_plane: Cluster, helm: Path) -> Iterator[dict[str, Path]]:
    """Kubeconfigs of the chart's reconciler and webhook ServiceAccounts, under the chart's
    RBAC for the whole session (the webhook outlives every module)."""
    with chart_rbac(control_plane, helm):
        yield {
            "reconciler": service_account_kubeconfig(control_plane, RECONCILER),
            "webhook": service_account_kubeconfig(control_plane, WEBHOOK),
        }


@pytest.fixture(scope="session")
def reconciler_kubeconfig(chart_identities: dict[str, Path]) -> Path:
    return chart_identities["reconciler"]


@pytest.fixture(scope="session")
def webhook(
    control_plane: Cluster,
    crd: None,
    chart_identities: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    """The real webhook, registered for the namespaces ``managed_namespace`` makes."""
    started = start_webhook(
        control_plane, tmp_path_factory.mktemp("webhook"), kubeconfig=chart_identities["webhook"]
    )
    started.register()
    try:
        yield started
    finally:
        started.unregister()
        started.stop()


@pytest.fixture(scope="session")
def scraper_token(
    control_plane: Cluster,
    chart_identities: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Path]:
    """A token file for Prometheus's ServiceAccount, bound to the chart's metrics-reader
    ClusterRole (Headroom's /metrics) and to ``get nodes/metrics`` (the kubelets'
    /metrics/cadvisor: a kubelet reviews the token, then asks the API server with a
    SubjectAccessReview)."""
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole"}
    subject = {"kind": "ServiceAccount", "name": SCRAPER.name, "namespace": SCRAPER.namespace}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SCRAPER.name, "namespace": SCRAPER.namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "headroom-test-kubelet-metrics"},
            "rules": [{"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]}],
        },
        *(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"headroom-test-prometheus-{name}"},
                "roleRef": role | {"name": name},
                "subjects": [subject],
            }
            for name in ("headroom-test-kubelet-metrics", f"{RELEASE}-metrics-reader")
        ),
    ]
    listed = {"apiVersion": "v1", "kind": "List", "items": objects}
    control_plane.apply(listed)
    path = tmp_path_factory.mktemp("prometheus") / "token"
    path.write_text(service_account_token(control_plane, SCRAPER))
    yield path
    control_plane.kubectl(
        "delete", "-f", "-", "--ignore-not-found", "--wait=false", input=json.dumps(listed)
    )


@pytest.fixture
def start_prometheus(
    real_cluster: RealCluster, webhook: Webhook, scraper_token: Path, tmp_path: Path
) -> Iterator[Callable[[Reconciler], Prometheus]]:
    """Start Prometheus scraping every kubelet's cAdvisor (at the address and port each
    node reports, verified against the cluster's CA), the webhook's metrics (HTTPS with a
    self-signed certificate) and a reconciler's; it is stopped after the test."""
    running: list[Prometheus] = []

    def start(reconciler: Reconciler) -> Prometheus:
        kubelets = []
        for guest in real_cluster:
            node = real_cluster.api.get(NODES.path(name=guest.name))
            assert node is not None, guest.name
            (ip,) = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
            kubelets.append(f"{ip}:{node['status']['daemonEndpoints']['kubeletEndpoint']['Port']}")
        prometheus = Prometheus(
            work_dir=tmp_path / "prometheus",
            scrape_interval=SCRAPE_INTERVAL,
            targets=[
                ScrapeTarget(
                    job="kubelet-cadvisor",
                    addresses=tuple(kubelets),
                    scheme="https",
                    metrics_path="/metrics/cadvisor",
                    ca_file=real_cluster.plane.ca_file,
                    token_file=scraper_token,
                ),
                ScrapeTarget(
                    job="headroom-webhook",
                    addresses=(f"127.0.0.1:{webhook.metrics_port}",),
                    scheme="https",
                    token_file=scraper_token,
                ),
                ScrapeTarget(
                    job="headroom-reconciler",
                    addresses=(urllib.parse.urlsplit(reconciler.metrics_url).netloc,),
                ),
            ],
        )
        running.append(prometheus)
        prometheus.start()
        prometheus.wait_scraped()
        return prometheus

    yield start
    for prometheus in running:
        prometheus.stop()


@pytest.fixture(scope="session")
def metrics_api(
    real_cluster: RealCluster, control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """metrics-server behind the resource metrics API, scraping every kubelet's
    ``/metrics/resource`` (at the address and port each node reports, verified against
    the cluster's CA)."""
    with resource_metrics_api(
        control_plane.kubeconfig,
        tmp_path_factory.mktemp("metrics-server"),
        control_plane.kubectl,
        control_plane.apply,
        kubelet_ca=real_cluster.plane.ca_file,
    ):
        yield


def _make_namespace(cluster: Cluster, labels: dict[str, str]) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    if labels:
        cluster.kubectl("label", "namespace", name, *[f"{k}={v}" for k, v in labels.items()])
    return name


def _delete_namespace(cluster: Cluster, name: str) -> None:
    # The next test needs the nodes empty. Deleted at once (no grace period), a pod leaves
    # the API and the kubelets' admitted set together; the kubelet stops its containers
    # behind it.
    cluster.kubectl("delete", "pods", "--all", "-n", name, "--grace-period=0", "--force")
    cluster.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false")


@pytest.fixture
def namespace(control_plane: Cluster) -> Iterator[str]:
    """A namespace Headroom does not manage (neighbours live here)."""
    name = _make_namespace(control_plane, {})
    yield name
    _delete_namespace(control_plane, name)


@pytest.fixture
def managed_namespace(control_plane: Cluster, webhook: Webhook) -> Iterator[str]:
    """A namespace enrolled in Headroom, which the webhook sees too."""
    name = _make_namespace(control_plane, {SCOPE_LABEL: webhook.scope, MODE_LABEL: "managed"})
    yield name
    _delete_namespace(control_plane, name)


@pytest.fixture
def pods(control_plane: Cluster, managed_namespace: str) -> Pods:
    return Pods(control_plane, managed_namespace)


@pytest.fixture
def enforcing(configure: Callable[..., None]) -> Callable[..., None]:
    """Headroom enforcing, with any other settings a test gives."""

    def apply(**spec: object) -> None:
        configure(dryRun=False, **spec)

    apply()
    return apply


def wait_agreed(
    kubelets: Kubelets,
    namespace: str,
    pod: str,
    *,
    until: Callable[[Observation], bool] = lambda seen: True,
    timeout: float = 180.0,
) -> Observation:
    """Until spec, kubelet status and cgroups agree on every limit of ``pod`` (and
    ``until`` holds for what they agree on)."""
    deadline = time.monotonic() + timeout
    seen: Observation | PodNotStartedError | None = None
    while True:
        try:
            seen = kubelets.observe(namespace, pod)
        except PodNotStartedError as err:
            seen = err
        if isinstance(seen, Observation) and seen.agree and until(seen):
            return seen
        if time.monotonic() > deadline:
            pytest.fail(f"{pod}'s limits, status and cgroups disagree after {timeout}s: {seen}")
        time.sleep(0.5)


@dataclass(frozen=True)
class Scene:
    """What a test of Headroom on the real nodes works with: the control plane, the
    guests' kubelets, Headroom's config (enforcing, with any other settings a test gives)
    and reconciler processes."""

    cluster: Cluster
    kubelets: Kubelets
    enforce: Callable[..., None]
    start_reconciler: Callable[..., Reconciler]

    @property
    def real(self) -> RealCluster:
        return self.kubelets.cluster

    def place(self, name: str, *containers: Obj, namespace: str, node: str, **pod: Any) -> None:
        """A pod of ``containers`` on ``node``; ``pod`` as ``builders.pod`` takes it."""
        self.cluster.apply(builders.pod(name, *containers, namespace=namespace, node=node, **pod))

    def neighbour(
        self, namespace: str, *, node: str, cpu: str, sidecars: Sequence[Obj] = ()
    ) -> None:
        self.cluster.apply(builders.neighbour(namespace, node=node, cpu=cpu, sidecars=sidecars))

    def ready(self, namespace: str, pod: str) -> None:
        self.cluster.kubectl("wait", f"pod/{pod}", "-n", namespace, "--for=condition=Ready",
                             "--timeout=110s")  # fmt: skip

    def delete(self, namespace: str, pod: str) -> None:
        self.cluster.kubectl("delete", "pod", pod, "-n", namespace, "--wait=false")

    def limit(self, namespace: str, pod: str) -> int | None:
        """The app container's CPU limit in the pod's spec now."""
        return self.kubelets.observe(namespace, pod).containers["app"].spec

    def settled(
        self, namespace: str, pod: str, millis: int, *, timeout: float = 180.0
    ) -> Observation:
        """Until spec, kubelet status and cgroups agree on every limit of ``pod``, its app
        container's at ``millis``."""
        return wait_agreed(
            self.kubelets,
            namespace,
            pod,
            until=lambda seen: seen.containers["app"].spec == millis,
            timeout=timeout,
        )


@pytest.fixture
def scene(
    control_plane: Cluster,
    kubelets: Kubelets,
    enforcing: Callable[..., None],
    start_reconciler: Callable[..., Reconciler],
) -> Scene:
    return Scene(control_plane, kubelets, enforcing, start_reconciler)
