"""Run Headroom's two processes locally against a cluster, as the demo and the
integration tests do.

The webhook listens on 127.0.0.1 with a certificate from ``headroom-certs``; the
webhook configurations are the chart's own (rendered by the real helm), with the
in-cluster Service swapped for that local URL and the generated CA bundle.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.core.labels import API_VERSION, CONFIG_KIND, CONFIG_NAME
from devcluster.controlplane import ControlPlane, ControlPlaneError, die_with_parent
from devcluster.ports import free_port

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
# Where the processes hold and read the reconciler's Lease outside a pod: the chart's namespace.
LEASE_NAMESPACE = "kube-headroom-system"


def install_crds(plane: ControlPlane) -> None:
    """The CRD chart, installed with the real helm as ``make install`` does, and its CRD
    established."""
    subprocess.run(
        [str(plane.tool("helm")), "upgrade", "--install", "kube-headroom-crds",
         str(REPO / "chart" / "kube-headroom-crds")],
        env=dict(plane.environ()), check=True, capture_output=True,
    )  # fmt: skip
    plane.kubectl(
        "wait", "crd/headroomconfigs.kube-headroom.dev", "--for=condition=Established",
        "--timeout=60s",
    )  # fmt: skip


def render_webhook_configurations(
    helm: Path, *, url: str, ca_pem: bytes, values: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The chart's Mutating/ValidatingWebhookConfigurations rendered by the real helm,
    with each in-cluster Service reference replaced by ``url`` + the hook's path."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    sets = {
        "certmanager.enable": "false",
        "webhook.certSecretName": "local",
        "webhook.caBundle": ca_bundle,
        **(values or {}),
    }
    rendered = subprocess.run(
        [
            str(helm),
            "template",
            "kube-headroom",
            str(REPO / "chart" / "kube-headroom"),
            "--namespace=kube-headroom-system",
            "--show-only=templates/webhook-configurations.yaml",
            *[f"--set={key}={value}" for key, value in sets.items()],
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    objects: list[dict[str, Any]] = [doc for doc in yaml.safe_load_all(rendered) if doc]
    for obj in objects:
        for hook in obj["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca_bundle}
    return objects


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    health_port: int
    metrics_port: int

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self, *, timeout: float = 15.0) -> int:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return int(self.popen.returncode)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    def metrics(self) -> str:
        """The plain-HTTP /metrics text (processes started with --metrics-secure=false)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())


@dataclass
class LocalHeadroom:
    """Starts and stops ``headroom-webhook`` and ``headroom-reconciler`` subprocesses."""

    kubeconfig: Path
    work_dir: Path
    helm: Path
    kubectl: Path
    processes: list[Process] = field(default_factory=list)
    webhook_port: int = 0
    cert_dir: Path | None = None

    def _spawn(
        self, name: str, command: str, args: Sequence[str], *, extra: Sequence[str] = ()
    ) -> Process:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        health, metrics = free_port(), free_port()
        log = self.work_dir / f"{name}.log"
        handle = log.open("ab")
        popen = subprocess.Popen(
            [
                str(VENV_BIN / command),
                f"--kubeconfig={self.kubeconfig}",
                f"--health-probe-bind-address=127.0.0.1:{health}",
                f"--metrics-bind-address=127.0.0.1:{metrics}",
                "--metrics-secure=false",
                "--log-format=text",
                *args,
                *extra,
            ],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        handle.close()
        process = Process(name, popen, log, health, metrics)
        self.processes.append(process)
        return process

    def wait_ready(self, process: Process, *, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{process.health_port}/readyz"
        while time.monotonic() < deadline:
            if not process.running():
                raise ControlPlaneError(
                    f"{process.name} exited with {process.popen.returncode}; log {process.log}:\n"
                    + "\n".join(process.log.read_text(errors="replace").splitlines()[-30:])
                )
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url, timeout=2) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.2)
        raise ControlPlaneError(f"{process.name} not ready after {timeout}s; log {process.log}")

    # -- webhook ---------------------------------------------------------------

    def generate_webhook_certs(self) -> Path:
        cert_dir = self.work_dir / "webhook-certs"
        subprocess.run(
            [
                str(VENV_BIN / "headroom-certs"),
                f"--out-dir={cert_dir}",
                "--ip=127.0.0.1",
                "--dns=localhost",
            ],
            check=True,
            capture_output=True,
        )
        self.cert_dir = cert_dir
        return cert_dir

    def ensure_lease_namespace(self) -> None:
        """The namespace where both processes look for the reconciler's Lease by default
        outside a pod (an installation's release namespace): the webhook seeds birth
        limits only while the reconciler holds it."""
        subprocess.run(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", "create", "namespace",
             LEASE_NAMESPACE],
            check=False,
            capture_output=True,
        )  # fmt: skip

    def start_webhook(self, *, extra: Sequence[str] = ()) -> Process:
        self.ensure_lease_namespace()
        cert_dir = self.cert_dir or self.generate_webhook_certs()
        if not self.webhook_port:
            self.webhook_port = free_port()
        process = self._spawn(
            "webhook",
            "headroom-webhook",
            [f"--bind-address=127.0.0.1:{self.webhook_port}", f"--cert-dir={cert_dir}"],
            extra=extra,
        )
        self.wait_ready(process)
        return process

    def webhook_configurations(self, *, values: Mapping[str, str] | None = None) -> list[Any]:
        """The chart's webhook configurations, aimed at the local webhook."""
        assert self.cert_dir is not None, "generate_webhook_certs() first"
        return render_webhook_configurations(
            self.helm,
            url=f"https://127.0.0.1:{self.webhook_port}",
            ca_pem=(self.cert_dir / "ca.crt").read_bytes(),
            values=values,
        )

    def register_webhooks(self, *, values: Mapping[str, str] | None = None) -> list[str]:
        objects = self.webhook_configurations(values=values)
        subprocess.run(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", "apply", "-f", "-"],
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
            check=True,
            capture_output=True,
            text=True,
        )
        return [f"{obj['kind'].lower()}/{obj['metadata']['name']}" for obj in objects]

    # -- reconciler ------------------------------------------------------------

    def start_reconciler(self, *, extra: Sequence[str] = ()) -> Process:
        self.ensure_lease_namespace()
        process = self._spawn(
            f"reconciler-{len(self.processes)}", "headroom-reconciler", [], extra=extra
        )
        self.wait_ready(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()


@contextlib.contextmanager
def enforcing(plane: ControlPlane, work_dir: Path) -> Iterator[LocalHeadroom]:
    """Headroom as the real-node benchmarks run it: the CRD chart, a HeadroomConfig with
    every setting at its default but ``dryRun`` off, the webhook (registered) and the
    reconciler, stopped after."""
    install_crds(plane)
    config = {
        "apiVersion": API_VERSION,
        "kind": CONFIG_KIND,
        "metadata": {"name": CONFIG_NAME},
        "spec": {"dryRun": False},
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(config))
    headroom = LocalHeadroom(
        kubeconfig=plane.kubeconfig,
        work_dir=work_dir,
        helm=plane.tool("helm"),
        kubectl=plane.tool("kubectl"),
    )
    try:
        headroom.start_webhook()
        headroom.register_webhooks()
        headroom.start_reconciler()
        yield headroom
    finally:
        headroom.stop()
