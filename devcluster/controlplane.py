"""Start and stop a real local control plane: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and KWOK (simulated kubelets); with
``kubelets=KubeletAccess(...)``, ready for real kubelets to register as nodes too."""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.apipaths import SERVICE_ACCOUNTS
from devcluster.binaries import kwok_metrics_file, locate_binaries
from devcluster.kubeapi import KubeAPI
from devcluster.pki import (
    FRONT_PROXY_USER,
    KUBELET_CLIENT_USER,
    NodePki,
    write_control_plane_pki,
    write_kubelet_client_pki,
    write_node_pki,
)
from devcluster.ports import free_port

logger = logging.getLogger(__name__)

STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# Pods carrying this annotation are ignored by the simulated kubelet, so a test
# can write kubelet-owned status (resize conditions) itself.
KWOK_CUSTOM_STATUS_ANNOTATION = "kwok.x-k8s.io/status"
SERVICE_CIDR = "10.0.0.0/24"
# The command-line Go tools the harness runs (kubectl, helm) exit before a collection would
# give memory back: without the collector until the heap nears 256 MiB, a call takes about
# a quarter less CPU (docs/development.md). The servers keep Go's defaults.
CLI_GC = {"GOGC": "off", "GOMEMLIMIT": "256MiB"}
PROXY_USER = "system:kube-proxy"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    # A control plane must not outlive a killed test run.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ControlPlaneError(RuntimeError):
    """The control plane did not come up; the message names the component and its log."""


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    args: list[str]


# Writes to the objects Headroom touches, at Metadata level: who changed what, and when
# the API server received it. Tests and benchmarks read it to count and time writes.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": ["create", "update", "patch", "delete"],
            "resources": [
                {"group": "", "resources": ["pods", "pods/resize", "events", "namespaces"]},
                {
                    "group": "kube-headroom.dev",
                    "resources": ["headroomconfigs", "headroomconfigs/status"],
                },
            ],
        },
        {"level": "None"},
    ],
}


@dataclass(frozen=True)
class KubeletAccess:
    """Real kubelets registering as nodes.

    The API server authorizes them as nodes do (``--authorization-mode=Node,RBAC`` and the
    NodeRestriction admission plugin), from client certificates its CA signs
    (``ControlPlane.node_pki``); it reaches them (logs, exec) at their InternalIP with a
    client certificate of its own, verifying their serving certificates against the same
    CA. It listens on every address of its network namespace, ``address`` (the one the
    kubelets dial) on its certificate: use it only in a namespace of its own
    (``devcluster.realnet``). It advertises ``address`` too, so the ``kubernetes``
    Service's endpoint is where pods reach it, through each node's kube-proxy (which
    authenticates as ``system:kube-proxy``, with ``ControlPlane.proxy_token``).
    """

    address: str


@dataclass
class ControlPlane:
    """A running local control plane.

    ``start()`` blocks until the API server is ready, the controller manager has
    created the default ServiceAccount, and the scheduler and KWOK answer health
    checks. ``stop()`` always tears every process down.
    """

    work_dir: Path
    bin_dir: Path = field(default_factory=locate_binaries)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    # kube-proxy's, on real nodes: the bootstrap policy binds system:node-proxier to it.
    proxy_token: str = field(default_factory=lambda: secrets.token_hex(16))
    startup_timeout: float = 120.0
    extra_apiserver_args: tuple[str, ...] = ()
    kubelets: KubeletAccess | None = None
    _procs: list[_Process] = field(default_factory=list, init=False, repr=False)
    apiserver_port: int = field(default=0, init=False)
    # Where KWOK serves its simulated kubelets' endpoints (127.0.0.1, TLS): a node that
    # names it as its kubelet port gets its resource metrics scraped (``metrics_node``).
    kwok_port: int = field(default=0, init=False)
    scheduler_port: int = field(default=0, init=False)

    @property
    def pki_dir(self) -> Path:
        return self.work_dir / "pki"

    @property
    def log_dir(self) -> Path:
        return self.work_dir / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.work_dir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubelet_server(self) -> str:
        """The API server's URL as the real kubelets dial it."""
        if self.kubelets is None:
            raise ControlPlaneError("started without KubeletAccess: no kubelet can reach it")
        return f"https://{self.kubelets.address}:{self.apiserver_port}"

    def node_pki(self, node: str, *, ip: str) -> NodePki:
        """Client and serving certificates for the kubelet of ``node`` (at ``ip``)."""
        return write_node_pki(self.pki_dir, self.pki_dir / "nodes" / node, node=node, ip=ip)

    @property
    def ca_file(self) -> Path:
        return self.pki_dir / "ca.crt"

    @property
    def api(self) -> KubeAPI:
        """The REST API as the admin, for the harness's reads: a poll through it costs
        the harness milliseconds where a kubectl process costs tens of CPU milliseconds."""
        return KubeAPI(server=self.server, token=self.token, ca_file=self.ca_file)

    @property
    def audit_log(self) -> Path:
        """The API server's audit log of writes to pods, events and HeadroomConfigs."""
        return self.log_dir / "audit.log"

    def audit_events(self) -> list[dict[str, Any]]:
        events = []
        with contextlib.suppress(FileNotFoundError), self.audit_log.open() as handle:
            for line in handle:
                with contextlib.suppress(ValueError):
                    events.append(json.loads(line))
        return events

    def tool(self, name: str) -> Path:
        return self.bin_dir / name

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        started = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        extra_ips = () if self.kubelets is None else (self.kubelets.address,)
        write_control_plane_pki(self.pki_dir, extra_ips=extra_ips)
        if self.kubelets is not None:
            write_kubelet_client_pki(self.pki_dir)
        try:
            self._start_etcd()
            self._start_apiserver()
            self._write_kubeconfig()
            self._grant_kubelet_api()
            self._start_controller_manager()
            self._start_scheduler()
            self._start_kwok()
            self._wait_for_default_service_account()
        except BaseException:
            self.stop()
            raise
        logger.info("control plane ready in %.1fs at %s", time.monotonic() - started, self.server)

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.popen.poll() is None:
                proc.popen.terminate()
        deadline = time.monotonic() + 10
        for proc in reversed(self._procs):
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        self._procs.clear()

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def keep_logs(self, destination: Path) -> Path:
        """Copy component logs somewhere that outlives the work directory."""
        destination.mkdir(parents=True, exist_ok=True)
        for log in self.log_dir.glob("*.log"):
            shutil.copy2(log, destination / log.name)
        return destination

    # -- components ------------------------------------------------------------

    def _spawn(self, name: str, args: list[str]) -> _Process:
        log = self.log_dir / f"{name}.log"
        handle = log.open("ab")
        popen = subprocess.Popen(
            args,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
            cwd=self.work_dir,
        )
        handle.close()
        proc = _Process(name=name, popen=popen, log=log, args=args)
        self._procs.append(proc)
        return proc

    # -- faults, for tests of what survives them --------------------------------

    def _component(self, name: str) -> _Process:
        return next(p for p in self._procs if p.name == name)

    def pause(self, name: str) -> None:
        """Freeze a component (SIGSTOP): its connections stay open, nothing answers."""
        self._component(name).popen.send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self._component(name).popen.send_signal(signal.SIGCONT)

    def restart_etcd(self, *, down_seconds: float) -> None:
        """Kill etcd (SIGKILL), keep it down, then start it on the same data and ports."""
        proc = self._component("etcd")
        proc.popen.kill()
        proc.popen.wait()
        self._procs.remove(proc)
        time.sleep(down_seconds)
        restarted = self._spawn("etcd", proc.args)
        self._wait(restarted, lambda: _http_ok(f"{self.etcd_url}/health"), "etcd health")

    def wait_ready(self, *, timeout: float = 60.0) -> None:
        """Until the API server reports itself ready (after a fault)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
                if self._api_get("/readyz") == "ok":
                    return
            time.sleep(0.1)
        raise ControlPlaneError(f"the API server was not ready within {timeout}s")

    def _wait(self, proc: _Process, check: Any, what: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise ControlPlaneError(
                    f"{proc.name} exited with {proc.popen.returncode} before {what}; "
                    f"log {proc.log}:\n{_tail(proc.log)}"
                )
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
                if check():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{proc.name}: timed out after {self.startup_timeout}s waiting for {what}; "
            f"log {proc.log}:\n{_tail(proc.log)}"
        )

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        proc = self._spawn(
            "etcd",
            [
                str(self.tool("etcd")),
                f"--data-dir={self.work_dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                # Throwaway data: fsync only costs time here.
                "--unsafe-no-fsync",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
        )
        self._wait(proc, lambda: _http_ok(f"{self.etcd_url}/health"), "etcd health")

    def _start_apiserver(self) -> None:
        self.apiserver_port = free_port()
        tokens = self.pki_dir / "tokens.csv"
        users = [f'{self.token},admin,admin-uid,"system:masters"']
        if self.kubelets is not None:
            users.append(f"{self.proxy_token},{PROXY_USER},kube-proxy-uid")
        tokens.write_text("".join(f"{user}\n" for user in users))
        tokens.chmod(0o600)
        audit_policy = self.work_dir / "audit-policy.json"
        audit_policy.write_text(json.dumps(AUDIT_POLICY))
        pki = self.pki_dir
        proc = self._spawn(
            "kube-apiserver",
            [
                str(self.tool("kube-apiserver")),
                f"--etcd-servers={self.etcd_url}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--secure-port={self.apiserver_port}",
                "--bind-address=127.0.0.1",
                *self._advertised(),
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # Repeating this (list) flag would add modes, so it is given once.
                f"--authorization-mode={'RBAC' if self.kubelets is None else 'Node,RBAC'}",
                f"--token-auth-file={tokens}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--allow-privileged=true",
                "--profiling=false",
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
                # The aggregation layer, for metrics-server's resource metrics API.
                f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
                f"--requestheader-allowed-names={FRONT_PROXY_USER}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
                *self._kubelet_args(),
                *self.extra_apiserver_args,
            ],
        )
        self._wait(proc, lambda: self._api_get("/readyz") == "ok", "/readyz")

    def _advertised(self) -> list[str]:
        if self.kubelets is None:
            # Loopback cannot back the kubernetes Service endpoints; nothing here needs them.
            return ["--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none"]
        return [f"--advertise-address={self.kubelets.address}", "--endpoint-reconciler-type=lease"]

    def _kubelet_args(self) -> list[str]:
        if self.kubelets is None:
            return []
        pki = self.pki_dir
        return [
            "--bind-address=0.0.0.0",
            "--enable-admission-plugins=NodeRestriction",
            f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'kubelet-client.key'}",
            f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP",
        ]

    def _grant_kubelet_api(self) -> None:
        """The API server's kubelet-client user gets the kubelet API (kubelets authorize
        it through a SubjectAccessReview)."""
        if self.kubelets is None:
            return
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": KUBELET_CLIENT_USER},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:kubelet-api-admin",
            },
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "User",
                    "name": KUBELET_CLIENT_USER,
                }
            ],
        }
        self.kubectl("apply", "-f", "-", input=json.dumps(binding))

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "headroom-local",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "headroom-local",
                    "context": {"cluster": "headroom-local", "user": "admin"},
                }
            ],
            "current-context": "headroom-local",
        }
        self.kubeconfig.write_text(json.dumps(config, indent=2))
        self.kubeconfig.chmod(0o600)

    def _start_component(self, name: str, extra: list[str]) -> int:
        """kube-controller-manager or kube-scheduler: admin credentials, no election,
        a secure port of its own on loopback, which it returns."""
        port = free_port()
        kc = str(self.kubeconfig)
        proc = self._spawn(
            name,
            [
                str(self.tool(name)),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.work_dir / f'{name}-certs'}",
                *extra,
            ],
        )
        self._wait(proc, lambda: _https_ok(f"https://127.0.0.1:{port}/healthz"), "/healthz")
        return port

    def _start_controller_manager(self) -> None:
        self._start_component(
            "kube-controller-manager",
            [
                f"--service-account-private-key-file={self.pki_dir / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--use-service-account-credentials=false",
                # Short resync so ResourceQuota usage is recalculated promptly.
                "--resource-quota-sync-period=10s",
                "--concurrent-resource-quota-syncs=2",
            ],
        )

    def _start_scheduler(self) -> None:
        self.scheduler_port = self._start_component("kube-scheduler", [])

    def scheduler_resource_metrics(self) -> str:
        """kube-scheduler's own account of what each pod books
        (``kube_pod_resource_request`` by pod and node, on ``/metrics/resources``)."""
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.scheduler_port}/metrics/resources",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, context=_self_signed(), timeout=10) as response:
            return str(response.read().decode())

    def _start_kwok(self) -> None:
        self.kwok_port = port = free_port()
        proc = self._spawn(
            "kwok",
            [
                str(self.tool("kwok")),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={STAGES}",
                f"--config={kwok_metrics_file(self.bin_dir)}",
                # Its kubelet endpoints (metrics) are served with TLS, as a kubelet's are.
                f"--tls-cert-file={self.pki_dir / 'kwok.crt'}",
                f"--tls-private-key-file={self.pki_dir / 'kwok.key'}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                f"--disregard-status-with-annotation-selector={KWOK_CUSTOM_STATUS_ANNOTATION}=custom",
                f"--server-address=127.0.0.1:{port}",
                "--cidr=10.244.0.1/16",
                "--node-ip=10.250.0.1",
            ],
        )
        self._wait(proc, lambda: _https_ok(f"https://127.0.0.1:{port}/healthz"), "/healthz")

    def _wait_for_default_service_account(self) -> None:
        # The ServiceAccount admission plugin refuses pods until this exists,
        # and it only exists once the controller manager is working.
        proc = next(p for p in self._procs if p.name == "kube-controller-manager")
        self._wait(
            proc,
            lambda: bool(self._api_get(SERVICE_ACCOUNTS.path(namespace="default", name="default"))),
            "the default ServiceAccount",
        )

    # -- small API helpers -----------------------------------------------------

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _api_get(self, path: str) -> str:
        request = urllib.request.Request(
            f"{self.server}{path}", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, context=self._ssl(), timeout=5) as response:
            return str(response.read().decode())

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """Run the real kubectl against this control plane and return stdout."""
        result = subprocess.run(
            [str(self.tool("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            env=self.environ(),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, result.args, result.stdout, result.stderr
            )
        return result.stdout

    def environ(self) -> Mapping[str, str]:
        """Environment for child processes (kubectl, helm, Headroom) aimed at this cluster."""
        return {
            **os.environ,
            **CLI_GC,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def processes(self) -> Iterator[tuple[str, int | None]]:
        for proc in self._procs:
            yield proc.name, proc.popen.poll()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)


def _self_signed() -> ssl.SSLContext:
    # Component ports on loopback serve a self-signed certificate of their own.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _https_ok(url: str) -> bool:
    with urllib.request.urlopen(url, context=_self_signed(), timeout=2) as response:
        return bool(response.status == 200)
