"""metrics-server and the VerticalPodAutoscaler's recommender, updater and admission
controller, run as host processes beside the control plane: the autoscalers the
integration tier runs Headroom beside.

metrics-server serves the resource metrics API through the API server's aggregation
layer (an APIService backed by an ExternalName Service for loopback) and scrapes either
what KWOK serves for nodes made with a ``kubelet_port`` (``devcluster.nodes.simulated_node``)
or real kubelets, whose serving certificates it verifies against the cluster's CA. The
binaries come from the cache ``hack/build-neighbours.sh`` fills (a no-op once built).
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.quantity import parse_cpu_millis
from devcluster.addons import HostProcess, http_ok, spawn, wait_until
from devcluster.binaries import neighbour_dir, pinned_versions
from devcluster.pki import write_loopback_serving_pair
from devcluster.ports import free_port

METRICS_API = "v1beta1.metrics.k8s.io"


def neighbour_bin(component: str) -> Path:
    """``vpa`` or ``metrics-server``: the directory of its binaries, built on first use."""
    versions = pinned_versions()
    version = versions["VPA_VERSION" if component == "vpa" else "METRICS_SERVER_VERSION"]
    return neighbour_dir(component, f"{component}-{version}") / "bin"


def _insecure() -> ssl.SSLContext:
    # Health ports serve a self-signed certificate of their own.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass
class MetricsServer:
    process: HostProcess

    @classmethod
    def start(
        cls,
        kubeconfig: Path,
        work_dir: Path,
        apply: Callable[[dict[str, Any]], object],
        *,
        kubelet_ca: Path | None = None,
    ) -> MetricsServer:
        """Start it, register its APIService with ``apply`` and wait until it is served.
        ``kubelet_ca``: the CA of real kubelets' serving certificates; None for KWOK, whose
        certificate names 127.0.0.1, not the node."""
        port = free_port()
        kc = str(kubeconfig)
        kubelet_tls = (
            "--kubelet-insecure-tls"
            if kubelet_ca is None
            else f"--kubelet-certificate-authority={kubelet_ca}"
        )
        process = spawn(
            "metrics-server",
            [
                str(neighbour_bin("metrics-server") / "metrics-server"),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={work_dir / 'metrics-server-certs'}",
                kubelet_tls,
                "--kubelet-use-node-status-port",
                "--kubelet-preferred-address-types=InternalIP",
                # Its shortest: VPA's recommender samples once per its own interval (a
                # scrape must time out sooner than that).
                "--metric-resolution=10s",
                "--kubelet-request-timeout=5s",
            ],
            log_dir=work_dir,
        )
        # Not /readyz: that waits for a first scrape, and no node may serve metrics yet.
        wait_until(
            process, lambda: http_ok(f"https://127.0.0.1:{port}/livez", _insecure()), "/livez"
        )
        for obj in _api_service(port):
            apply(obj)
        return cls(process)


@contextlib.contextmanager
def resource_metrics_api(
    kubeconfig: Path,
    work_dir: Path,
    kubectl: Callable[..., str],
    apply: Callable[[dict[str, Any]], object],
    *,
    kubelet_ca: Path | None = None,
) -> Iterator[None]:
    """metrics-server behind the resource metrics API until the block ends; then gone,
    APIService and Service with it."""
    metrics = MetricsServer.start(kubeconfig, work_dir, apply, kubelet_ca=kubelet_ca)
    try:
        kubectl("wait", f"apiservice/{METRICS_API}", "--for=condition=Available", "--timeout=60s")
        yield
    finally:
        metrics.process.stop()
        kubectl("delete", "apiservice", METRICS_API, "--ignore-not-found")
        kubectl("delete", "service", "metrics-server", "-n", "kube-system", "--ignore-not-found")


def _api_service(port: int) -> list[dict[str, Any]]:
    """The resource metrics API, served by the process on loopback."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "metrics-server", "namespace": "kube-system"},
        "spec": {
            "type": "ExternalName",
            "externalName": "localhost",
            "ports": [{"port": port, "protocol": "TCP"}],
        },
    }
    api_service = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": METRICS_API},
        "spec": {
            "service": {"name": "metrics-server", "namespace": "kube-system", "port": port},
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            # Its certificate is self-signed.
            "insecureSkipTLSVerify": True,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    return [service, api_service]


@dataclass
class Vpa:
    """The three components, each a process of its own."""

    processes: tuple[HostProcess, ...]

    @classmethod
    def start(cls, kubeconfig: Path, work_dir: Path, *, pki_dir: Path) -> Vpa:
        """Start the recommender, the admission controller (registering its own webhook,
        served on loopback with a certificate from the cluster's CA in ``pki_dir``) and the
        updater; wait until each serves its metrics."""
        binaries = neighbour_bin("vpa")
        kc = f"--kubeconfig={kubeconfig}"
        started: list[HostProcess] = []
        try:
            health = free_port()
            started.append(
                _started(
                    "vpa-recommender",
                    [
                        str(binaries / "vpa-recommender"),
                        kc,
                        f"--address=127.0.0.1:{health}",
                        # Its shortest useful pace: a recommendation every 10 s.
                        "--recommender-interval=10s",
                    ],
                    work_dir,
                    health,
                )
            )
            cert, key = write_loopback_serving_pair(pki_dir, work_dir, "vpa-webhook")
            webhook, health = free_port(), free_port()
            started.append(
                _started(
                    "vpa-admission-controller",
                    [
                        str(binaries / "vpa-admission-controller"),
                        kc,
                        f"--address=127.0.0.1:{health}",
                        f"--port={webhook}",
                        "--register-by-url",
                        "--webhook-address=https://127.0.0.1",
                        f"--webhook-port={webhook}",
                        f"--client-ca-file={pki_dir / 'ca.crt'}",
                        f"--tls-cert-file={cert}",
                        f"--tls-private-key={key}",
                    ],
                    work_dir,
                    health,
                )
            )
            health = free_port()
            started.append(
                _started(
                    "vpa-updater",
                    [
                        str(binaries / "vpa-updater"),
                        kc,
                        f"--address=127.0.0.1:{health}",
                        "--updater-interval=10s",
                        # A Deployment of one replica is the tests' workload.
                        "--min-replicas=1",
                    ],
                    work_dir,
                    health,
                )
            )
        except BaseException:
            for process in started:
                process.stop()
            raise
        return cls(tuple(started))

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


@contextlib.contextmanager
def running_vpa(
    kubeconfig: Path, work_dir: Path, kubectl: Callable[..., str], *, pki_dir: Path
) -> Iterator[None]:
    """VPA's three components until the block ends; then gone, with the webhook
    configuration its admission controller registered."""
    started = Vpa.start(kubeconfig, work_dir, pki_dir=pki_dir)
    try:
        yield
    finally:
        started.stop()
        kubectl(
            "delete", "mutatingwebhookconfiguration", "vpa-webhook-config", "--ignore-not-found"
        )


def _started(name: str, args: Sequence[str], work_dir: Path, health: int) -> HostProcess:
    process = spawn(name, args, log_dir=work_dir)
    try:
        # Each serves its metrics there once started.
        wait_until(process, lambda: http_ok(f"http://127.0.0.1:{health}/metrics"), "/metrics")
    except BaseException:
        process.stop()
        raise
    return process


def resource_metrics(kubectl: Callable[..., str], namespace: str) -> dict[str, int]:
    """Pod name → the CPU (millicores) the resource metrics API reports it using."""
    listed = json.loads(
        kubectl("get", "--raw", f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods")
    )
    return {
        item["metadata"]["name"]: sum(
            parse_cpu_millis(c["usage"]["cpu"]) for c in item["containers"]
        )
        for item in listed["items"]
    }
