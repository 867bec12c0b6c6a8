"""Real-node guests: qemu, under TCG emulation, booting the image ``hack/build-realnode.sh``
builds, each running containerd, runc and a kubelet that registers with the local
control plane as an ordinary node.

A guest is configured at boot from a read-only 9p share holding its ``node.env`` (name,
address, routes, kubelet flags), its kubeconfig and certificates (a client certificate
for ``system:node:<name>`` signed by the control plane's CA, and a serving certificate
for the API server to verify), its KubeletConfiguration and its CNI configuration, and
kube-proxy's configuration and kubeconfig (``system:kube-proxy``'s token). The
root disk is booted with ``snapshot=on``: every boot starts from the pristine image.
``hack/realnode/node-init`` is what runs in it.

The accelerator this machine exposes cannot run a stock kernel, so the guests are
emulated (``-accel tcg``); code in them runs about 17 times slower than on the host, which
sizes everything here: few guests, small ones.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from devcluster.binaries import kubernetes_version
from devcluster.controlplane import ControlPlane, die_with_parent
from devcluster.guestagent import GuestAgent
from devcluster.realnet import (
    POD_NETWORK,
    mac_address,
    node_address,
    pod_cidr,
    pod_routes,
    tap_name,
)

QEMU = "qemu-system-x86_64"
# Where hack/realnode/node-init mounts the per-boot share.
CONFIG_MOUNT = "/run/headroom/config"
# The images on the root disk (hack/build-realnode.sh): nothing is ever pulled.
PROBE_IMAGE = "localhost/headroom/probe:1"
AGENT_PORT = "headroom.agent"
# Written by the node's init once containerd holds the images.
IMAGES_IMPORTED = "/run/headroom/images-imported"
# containerd's registry hosts directory (``config_path`` in hack/realnode/containerd.toml):
# the per-boot share's ``certs.d``.
REGISTRY_HOSTS = f"{CONFIG_MOUNT}/certs.d"


class GuestError(RuntimeError):
    """A guest could not be built, booted or registered; the message says where to look."""


@dataclass(frozen=True)
class GuestImage:
    """The kernel, initramfs and root disk of one Kubernetes version's guests."""

    directory: Path

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def initramfs(self) -> Path:
        return self.directory / "initramfs.cpio.gz"

    @property
    def root(self) -> Path:
        return self.directory / "root.ext4"

    @classmethod
    def locate(cls, version: str | None = None) -> GuestImage:
        cache = Path(os.environ.get("HEADROOM_CACHE", Path.home() / ".cache" / "headroom"))
        image = cls(cache / f"realnode-{version or kubernetes_version()}")
        missing = [p.name for p in (image.kernel, image.initramfs, image.root) if not p.exists()]
        if missing:
            raise GuestError(
                f"{image.directory} lacks {', '.join(missing)}: run hack/build-realnode.sh "
                "(make realnode builds it)"
            )
        return image


@dataclass(frozen=True)
class RegistryMirror:
    """Pulls from ``upstream`` (a registry host, such as the chart image's) go to
    ``endpoint`` (``https://host:port``), whose certificate ``ca_pem`` signed."""

    upstream: str
    endpoint: str
    ca_pem: bytes


def registry_hosts(mirrors: Sequence[RegistryMirror]) -> dict[str, str | bytes]:
    """containerd's hosts directory for ``mirrors``: each upstream's ``hosts.toml`` and the
    CA it trusts, by path below ``certs.d``. A guest has no route out, so an image the
    mirror lacks fails its pull rather than reaching the upstream."""
    files: dict[str, str | bytes] = {}
    for mirror in mirrors:
        directory = mirror.upstream
        files[f"{directory}/ca.crt"] = mirror.ca_pem
        files[f"{directory}/hosts.toml"] = (
            f'server = "https://{mirror.upstream}"\n\n'
            f'[host."{mirror.endpoint}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
            f'  ca = "{REGISTRY_HOSTS}/{directory}/ca.crt"\n'
        )
    return files


@dataclass(frozen=True)
class NodeSpec:
    """One guest: its node name, its place on the guest network (``index``, from 1), its
    size, its node labels and KubeletConfiguration fields over the defaults."""

    name: str
    index: int
    cpus: int = 2
    memory_mib: int = 2048
    labels: Mapping[str, str] = field(default_factory=dict)
    kubelet: Mapping[str, Any] = field(default_factory=dict)
    # A swap file of this size, switched on before the kubelet starts.
    swap_mib: int = 0
    # qemu's emulation threads. "single" runs all the guest's vCPUs on one host thread, so
    # the fleet's 5 vCPUs do not overcommit a 2-core machine (make bench-realnode-idle).
    # "multi", a thread per vCPU, is for a guest that must show real parallelism alone.
    threads: Literal["single", "multi"] = "single"

    @property
    def address(self) -> str:
        return node_address(self.index)


def kubelet_configuration(spec: NodeSpec) -> dict[str, Any]:
    """The guest's KubeletConfiguration: cgroup v2 with the cgroupfs driver (there is no
    systemd), containerd, x509 and webhook authentication and webhook authorization,
    thresholds loose enough for a small throwaway disk."""
    files = CONFIG_MOUNT
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "address": spec.address,
        "readOnlyPort": 0,
        "tlsCertFile": f"{files}/serving.crt",
        "tlsPrivateKeyFile": f"{files}/serving.key",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": f"{files}/ca.crt"},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "failSwapOn": spec.swap_mib == 0,
        "maxPods": 30,
        "serializeImagePulls": False,
        "evictionHard": {
            "memory.available": "64Mi",
            "nodefs.available": "2%",
            "imagefs.available": "2%",
            "nodefs.inodesFree": "2%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "shutdownGracePeriod": "0s",
        "logging": {"format": "text", "verbosity": 2},
    }
    if spec.swap_mib:
        config["memorySwap"] = {"swapBehavior": "LimitedSwap"}
    config.update(spec.kubelet)
    return config


def cni_configuration(spec: NodeSpec) -> dict[str, Any]:
    """The node's pod network: a bridge with the node's own pod range (host-local)."""
    return {
        "cniVersion": "1.0.0",
        "name": "headroom",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_cidr(spec.index)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


def kube_proxy_configuration(spec: NodeSpec) -> dict[str, Any]:
    """The guest's KubeProxyConfiguration: nftables mode, the kernel's conntrack table
    left as it is, metrics and health on loopback only."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "nftables",
        "clientConnection": {"kubeconfig": f"{CONFIG_MOUNT}/kube-proxy.kubeconfig"},
        "hostnameOverride": spec.name,
        "bindAddress": spec.address,
        "clusterCIDR": str(POD_NETWORK),
        "conntrack": {"maxPerCore": 0},
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
        "logging": {"format": "text", "verbosity": 2},
    }


def node_environment(spec: NodeSpec, *, indices: list[int]) -> str:
    """``node.env``, sourced by the guest's init."""
    labels = ",".join(f"{key}={value}" for key, value in sorted(spec.labels.items()))
    values = {
        "NODE_NAME": spec.name,
        "NODE_IP": spec.address,
        "NODE_PREFIX": "24",
        "POD_ROUTES": " ".join(f"{cidr}@{via}" for cidr, via in pod_routes(spec.index, indices)),
        "SWAP_MIB": str(spec.swap_mib),
        "KUBELET_ARGS": f"--node-labels={labels}" if labels else "",
    }
    return "".join(f"{key}={shlex.quote(value)}\n" for key, value in values.items())


def kubeconfig(plane: ControlPlane, user: Mapping[str, str]) -> dict[str, Any]:
    """A kubeconfig for a node daemon: the API server as the guests dial it, ``user``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": plane.kubelet_server,
                    "certificate-authority": f"{CONFIG_MOUNT}/ca.crt",
                },
            }
        ],
        "users": [{"name": "node", "user": dict(user)}],
        "contexts": [{"name": "node", "context": {"cluster": "local", "user": "node"}}],
        "current-context": "node",
    }


@dataclass
class Guest:
    """One qemu guest, its files in ``work_dir`` and its agent's socket in ``run_dir``."""

    spec: NodeSpec
    image: GuestImage
    work_dir: Path
    run_dir: Path
    popen: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    agent: GuestAgent = field(init=False)

    def __post_init__(self) -> None:
        self.agent = GuestAgent(self.run_dir / f"{self.spec.index}.sock")

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def console(self) -> Path:
        """The serial console: the kernel's messages and the node init's milestones."""
        return self.work_dir / "console.log"

    @property
    def config_dir(self) -> Path:
        return self.work_dir / "config"

    def write_config(
        self,
        plane: ControlPlane,
        *,
        indices: list[int],
        mirrors: Sequence[RegistryMirror] = (),
    ) -> None:
        config = self.config_dir
        config.mkdir(parents=True, exist_ok=True)
        for relative, content in registry_hosts(mirrors).items():
            path = config / "certs.d" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        pki = plane.node_pki(self.name, ip=self.spec.address)
        for source, name in (
            (plane.ca_file, "ca.crt"),
            (pki.client_cert, "client.crt"),
            (pki.client_key, "client.key"),
            (pki.serving_cert, "serving.crt"),
            (pki.serving_key, "serving.key"),
        ):
            shutil.copyfile(source, config / name)
        node = {
            "client-certificate": f"{CONFIG_MOUNT}/client.crt",
            "client-key": f"{CONFIG_MOUNT}/client.key",
        }
        for name, user in (
            ("kubeconfig", node),
            ("kube-proxy.kubeconfig", {"token": plane.proxy_token}),
        ):
            (config / name).write_text(json.dumps(kubeconfig(plane, user), indent=2))
        (config / "kubelet.yaml").write_text(json.dumps(kubelet_configuration(self.spec), indent=2))
        (config / "kube-proxy.yaml").write_text(
            json.dumps(kube_proxy_configuration(self.spec), indent=2)
        )
        (config / "cni.conflist").write_text(json.dumps(cni_configuration(self.spec), indent=2))
        (config / "node.env").write_text(node_environment(self.spec, indices=indices))

    def qemu_args(self) -> list[str]:
        spec, image = self.spec, self.image
        return [
            QEMU,
            "-name", spec.name,
            "-accel", f"tcg,thread={spec.threads}",
            "-cpu", "max,-la57",
            "-smp", str(spec.cpus),
            "-m", str(spec.memory_mib),
            "-nodefaults", "-display", "none", "-no-reboot",
            "-kernel", str(image.kernel),
            "-initrd", str(image.initramfs),
            "-append", "console=ttyS0 panic=-1 loglevel=4",
            "-drive", f"file={image.root},if=virtio,format=raw,snapshot=on,cache=unsafe",
            "-netdev", f"tap,id=net0,ifname={tap_name(spec.index)},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=net0,mac={mac_address(spec.index)}",
            "-virtfs",
            f"local,path={self.config_dir},mount_tag=config,security_model=none,readonly=on",
            "-device", "virtio-serial-pci",
            "-chardev", f"socket,id=agent,path={self.agent.path},server=on,wait=off",
            "-device", f"virtserialport,chardev=agent,name={AGENT_PORT}",
            "-device", "virtio-rng-pci",
            "-serial", f"file:{self.console}",
        ]  # fmt: skip

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log = (self.work_dir / "qemu.log").open("ab")
        self.started = time.monotonic()
        self.popen = subprocess.Popen(
            self.qemu_args(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        log.close()

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def console_tail(self, lines: int = 25) -> str:
        try:
            text = self.console.read_text(errors="replace")
        except OSError:
            return "(no console output)"
        return "\n".join(text.splitlines()[-lines:])

    def read(self, *patterns: str, tail: int = 0) -> dict[str, str]:
        """Files of the guest matching ``patterns`` (globs), through the node agent."""
        return self.agent.read(*patterns, tail=tail)

    def shift_clock(self, seconds: float) -> str:
        """Move the guest's wall clock by ``seconds`` (back, when negative), through the
        agent; the guest's new time."""
        return self.agent.shift_clock(seconds)

    def wait_for_images(self, *, timeout: float) -> None:
        """Until the agent answers and containerd holds the images on the root disk."""
        deadline = time.monotonic() + timeout
        self.agent.wait(timeout=timeout)
        while not self.read(IMAGES_IMPORTED):
            if time.monotonic() > deadline or not self.running():
                raise GuestError(
                    f"{self.name}: images not imported within {timeout}s; console "
                    f"{self.console}:\n{self.console_tail()}"
                )
            time.sleep(0.5)

    def keep_logs(self, destination: Path) -> None:
        """The console, and the guest's own logs when its agent still answers."""
        destination.mkdir(parents=True, exist_ok=True)
        if self.console.exists():
            shutil.copy2(self.console, destination / f"{self.name}.console.log")
        try:
            logs = self.read("/var/log/*.log", tail=4 << 20)
        except (OSError, RuntimeError):
            return
        for path, content in logs.items():
            (destination / f"{self.name}.{Path(path).name}").write_text(content)

    def stop(self) -> None:
        self.agent.close()
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
