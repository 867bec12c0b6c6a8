"""The third-party parts of the end-to-end install path: cert-manager's controller and
cainjector and a local OCI registry (distribution, Debian's ``docker-registry``) serving
TLS, run as host processes beside the control plane, and the Prometheus Operator's own
manifests for its pod.

Their binaries come from the caches ``hack/build-e2e.sh`` fills beside the control
plane's (``addon_paths``); nothing here downloads anything.
"""

from __future__ import annotations

import contextlib
import datetime
import gzip
import hashlib
import http.client
import io
import json
import os
import ssl
import subprocess
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from certs.generate import generate_ca, generate_serving
from devcluster.binaries import REPO, pinned_versions
from devcluster.containers import cache_root
from devcluster.controlplane import ControlPlaneError, die_with_parent
from devcluster.ports import free_port

BUILD_SCRIPT = REPO / "hack" / "build-e2e.sh"


class AddonNotBuiltError(RuntimeError):
    """A cached third-party binary is missing: hack/build-e2e.sh builds it."""


@dataclass(frozen=True)
class AddonPaths:
    cert_manager_bin: Path
    prometheus_operator_bin: Path
    prometheus_operator_crds: Path
    # The release's own manifests for its pod: ServiceAccount, RBAC, Deployment.
    prometheus_operator_deploy: Path
    prometheus: Path
    docker_registry: Path
    base_rootfs: Path

    def missing(self) -> list[str]:
        wanted = [
            self.cert_manager_bin / "cert-manager-controller",
            self.cert_manager_bin / "cert-manager-cainjector",
            self.prometheus_operator_bin / "prometheus-operator",
            self.prometheus_operator_bin / "prometheus-config-reloader",
            self.prometheus_operator_crds / ".complete",
            self.prometheus_operator_deploy / ".complete",
            self.prometheus,
            self.docker_registry,
            self.base_rootfs,
        ]
        return [str(path) for path in wanted if not path.exists()]


def _prometheus_path() -> Path:
    version = pinned_versions()["PROMETHEUS_VERSION"]
    return cache_root() / f"prometheus-{version}" / "bin" / "prometheus"


def prometheus_binary() -> Path:
    """The Prometheus server alone (``bash hack/build-e2e.sh prometheus`` builds it)."""
    path = _prometheus_path()
    if not path.exists():
        raise AddonNotBuiltError(f"missing {path}: run bash {BUILD_SCRIPT} prometheus")
    return path


def _registry_path() -> Path:
    v = pinned_versions()
    return (
        cache_root()
        / f"debian-{v['DEBIAN_SUITE']}"
        / f"docker-registry-{v['DOCKER_REGISTRY_DEB_VERSION']}"
        / "usr/bin/docker-registry"
    )


def registry_binary() -> Path:
    """The registry alone, which ``hack/build-neighbours.sh`` unpacks too (for Flux)."""
    path = _registry_path()
    if not path.exists():
        raise AddonNotBuiltError(f"missing {path}: run bash {REPO / 'hack/build-neighbours.sh'}")
    return path


def addon_paths() -> AddonPaths:
    """Where hack/build-e2e.sh caches each part; raises naming what is missing."""
    v, cache = pinned_versions(), cache_root()
    debian = cache / f"debian-{v['DEBIAN_SUITE']}"
    operator = cache / f"prometheus-operator-{v['PROMETHEUS_OPERATOR_VERSION']}"
    paths = AddonPaths(
        cert_manager_bin=cache / f"cert-manager-{v['CERT_MANAGER_VERSION']}" / "bin",
        prometheus_operator_bin=operator / "bin",
        prometheus_operator_crds=operator / "crds",
        prometheus_operator_deploy=operator / "deploy",
        prometheus=_prometheus_path(),
        docker_registry=_registry_path(),
        base_rootfs=debian / "base-rootfs.tar",
    )
    missing = paths.missing()
    if missing:
        raise AddonNotBuiltError(f"missing {', '.join(missing)}: run bash {BUILD_SCRIPT}")
    return paths


@dataclass
class HostProcess:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def running(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def check(self) -> None:
        if not self.running():
            raise ControlPlaneError(
                f"{self.name} exited with {self.popen.returncode}; log {self.log}:\n{self.tail()}"
            )


def spawn(
    name: str, args: Sequence[str], *, log_dir: Path, env: Mapping[str, str] | None = None
) -> HostProcess:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("ab") as handle:
        popen = subprocess.Popen(
            list(args),
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
            env={**os.environ, **(env or {})},
        )
    return HostProcess(name, popen, log)


def wait_until(process: HostProcess, ready: object, what: str, *, timeout: float = 60) -> None:
    """Poll ``ready()`` until true while ``process`` lives."""
    assert callable(ready)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process.check()
        with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
            if ready():
                return
        time.sleep(0.2)
    raise ControlPlaneError(f"{process.name}: no {what} after {timeout}s; log:\n{process.tail()}")


def start_cert_manager(
    paths: AddonPaths, *, kubeconfig: Path, log_dir: Path
) -> tuple[HostProcess, HostProcess]:
    """cert-manager's controller (certificates, CA and self-signed issuers) and cainjector."""
    controller = spawn(
        "cert-manager-controller",
        [
            str(paths.cert_manager_bin / "cert-manager-controller"),
            f"--kubeconfig={kubeconfig}",
            "--cluster-resource-namespace=cert-manager",
        ],
        log_dir=log_dir,
    )
    cainjector = spawn(
        "cert-manager-cainjector",
        [str(paths.cert_manager_bin / "cert-manager-cainjector"), f"--kubeconfig={kubeconfig}"],
        log_dir=log_dir,
    )
    time.sleep(1)
    try:
        controller.check()
        cainjector.check()
    except ControlPlaneError:
        controller.stop()
        cainjector.stop()
        raise
    return controller, cainjector


# The reloader's default CPU limit (10m) starves a Go program on an emulated node: the
# Prometheus pod's init container alone took minutes to start.
OPERATOR_ARGS = ("--config-reloader-cpu-limit=0",)


def prometheus_operator_kustomization(paths: AddonPaths, directory: Path, namespace: str) -> Path:
    """A kustomization of the release's own manifests for the operator's pod, in
    ``namespace``, its Deployment's arguments extended with ``OPERATOR_ARGS``; returns the
    directory for ``kubectl apply -k``."""
    directory.mkdir(parents=True, exist_ok=True)
    resources = []
    for manifest in sorted(paths.prometheus_operator_deploy.glob("*.yaml")):
        (directory / manifest.name).write_bytes(manifest.read_bytes())
        resources.append(manifest.name)
    patch = [
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": arg}
        for arg in OPERATOR_ARGS
    ]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": namespace,
        "resources": resources,
        "patches": [
            {
                "target": {"kind": "Deployment", "name": "prometheus-operator"},
                "patch": json.dumps(patch),
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(json.dumps(kustomization, indent=2))
    return directory


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=context) as response:
        return bool(200 <= response.status < 300)


@dataclass
class Registry:
    """distribution's registry over TLS, with a CA of its own in ``cert_dir`` (``ca.crt``:
    what podman's ``--cert-dir``, helm's ``SSL_CERT_FILE`` and the real nodes' containerd
    trust), on loopback or, for real nodes, on an address of the guest network."""

    binary: Path
    work_dir: Path
    address: str = "127.0.0.1"
    process: HostProcess | None = None
    port: int = 0

    @property
    def host(self) -> str:
        return f"{self.address}:{self.port}"

    @property
    def cert_dir(self) -> Path:
        return self.work_dir / "certs"

    @property
    def ca_file(self) -> Path:
        return self.cert_dir / "ca.crt"

    def start(self) -> None:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        ca = generate_ca(
            common_name="headroom-e2e-registry-ca", valid_for=datetime.timedelta(days=2), now=now
        )
        serving = generate_serving(
            ca=ca,
            dns_names=("localhost",),
            ip_addresses=tuple(dict.fromkeys(("127.0.0.1", self.address))),
            valid_for=datetime.timedelta(days=2),
            now=now,
        )
        self.ca_file.write_bytes(ca.cert_pem)
        server = self.work_dir / "server"
        server.mkdir(exist_ok=True)
        (server / "tls.crt").write_bytes(serving.cert_pem)
        (server / "tls.key").write_bytes(serving.key_pem)
        (server / "tls.key").chmod(0o600)
        self.port = free_port()
        config = {
            "version": 0.1,
            "log": {"level": "warn"},
            "storage": {
                "filesystem": {"rootdirectory": str(self.work_dir / "data")},
                "delete": {"enabled": True},
            },
            "http": {
                "addr": self.host,
                "tls": {
                    "certificate": str(server / "tls.crt"),
                    "key": str(server / "tls.key"),
                },
            },
        }
        # JSON is YAML: the registry reads this as its configuration file.
        (self.work_dir / "config.yml").write_text(json.dumps(config))
        self.process = spawn(
            "docker-registry",
            [str(self.binary), "serve", str(self.work_dir / "config.yml")],
            log_dir=self.work_dir,
        )
        context = ssl.create_default_context(cafile=str(self.ca_file))
        wait_until(self.process, lambda: http_ok(f"https://{self.host}/v2/", context), "/v2/")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def tags(self, repository: str) -> list[str]:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        url = f"https://{self.host}/v2/{repository}/tags/list"
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            tags: list[str] = json.loads(response.read()).get("tags") or []
            return tags

    def digest(self, repository: str, tag: str) -> str:
        """The manifest digest the registry holds for ``repository:tag``."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        request = urllib.request.Request(
            f"https://{self.host}/v2/{repository}/manifests/{tag}",
            method="HEAD",
            headers={
                "Accept": ", ".join(
                    (
                        "application/vnd.oci.image.manifest.v1+json",
                        "application/vnd.docker.distribution.manifest.v2+json",
                    )
                )
            },
        )
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return str(response.headers["Docker-Content-Digest"])

    def push_files(
        self,
        repository: str,
        tag: str,
        files: Mapping[str, bytes],
        *,
        media_type: str,
        config_media_type: str,
    ) -> str:
        """Push ``files`` as one gzipped tar layer of ``media_type`` under
        ``repository:tag``, with an empty config of ``config_media_type`` (the shape of
        ``flux push artifact``); returns the manifest's digest."""
        archive = io.BytesIO()
        # Fixed times and owners: the same files are the same artifact.
        with (
            gzip.GzipFile(fileobj=archive, mode="wb", mtime=0) as zipped,
            tarfile.open(fileobj=zipped, mode="w") as tar,
        ):
            for name, content in sorted(files.items()):
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
        layer, config = archive.getvalue(), b"{}"
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": self._push_blob(repository, config, config_media_type),
                "layers": [self._push_blob(repository, layer, media_type)],
                "annotations": {"org.opencontainers.image.revision": f"{tag}@{_sha256(layer)}"},
            }
        ).encode()
        response = self._request(
            "PUT",
            f"/v2/{repository}/manifests/{tag}",
            manifest,
            "application/vnd.oci.image.manifest.v1+json",
        )
        return str(response.headers["Docker-Content-Digest"])

    def _push_blob(self, repository: str, content: bytes, media_type: str) -> dict[str, object]:
        digest = _sha256(content)
        started = self._request("POST", f"/v2/{repository}/blobs/uploads/", b"")
        location = urllib.parse.urljoin(f"https://{self.host}", started.headers["Location"])
        joiner = "&" if "?" in location else "?"
        parts = urllib.parse.urlsplit(f"{location}{joiner}digest={digest}")
        self._request("PUT", f"{parts.path}?{parts.query}", content, "application/octet-stream")
        return {"mediaType": media_type, "digest": digest, "size": len(content)}

    def _request(
        self, method: str, path: str, body: bytes, content_type: str | None = None
    ) -> http.client.HTTPResponse:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        headers = {"Content-Type": content_type} if content_type else {}
        request = urllib.request.Request(
            f"https://{self.host}{path}", data=body, method=method, headers=headers
        )
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            response.read()
            return response  # type: ignore[no-any-return]


def _sha256(content: bytes) -> str:
    return f"sha256:{hashlib.sha256(content).hexdigest()}"
