"""Pod networking for containers that play KWOK's pods.

KWOK gives each pod an IP from its pod CIDR and reports it in ``status.podIP``; nothing
routes to it. Here each such pod gets a network namespace of its own holding that IP on
an ``eth0`` veth, so the container sees the same address the API server publishes in the
pod's EndpointSlices, and listeners bound to ``:port`` in two pods do not collide. The
other ends of the veths stay in the harness's network namespace (``hack/e2e.sh`` runs the
whole end-to-end tier in a fresh one, so nothing here touches the machine's network):

- ``NODE_IP`` (KWOK's ``--node-ip``) sits on that namespace's loopback and is every pod's
  gateway; the harness reaches a pod at its IP through a host route over its veth, and
  pods reach each other through that namespace, which forwards like a node;
- ``API_SERVICE_IP`` (the ``kubernetes`` Service's ClusterIP, a name on the API server's
  certificate) sits there too, and the API server listens on all of that namespace's
  addresses, so a pod reaches it at ``API_SERVICE_IP`` and the server's own port.
"""

from __future__ import annotations

import logging
import secrets
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

NODE_IP = "10.250.0.1"
API_SERVICE_IP = "10.0.0.1"
NETNS_DIR = Path("/run/netns")
# Per network namespace: this one's, never the machine's (setup() refuses a shared one).
FORWARDING = Path("/proc/sys/net/ipv4/ip_forward")


class PodNetworkError(RuntimeError):
    """An ``ip`` command failed; the message carries it and its output."""


def ip(*args: str, netns: str | None = None) -> str:
    command = ["ip", *(["-n", netns] if netns else []), *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
    if result.returncode != 0:
        raise PodNetworkError(f"{' '.join(command)}: {result.stderr.strip()}")
    return result.stdout


def interfaces() -> list[str]:
    """Names of the links in this network namespace."""
    return [line.split("@")[0].split()[0] for line in ip("-o", "-br", "link").splitlines()]


@dataclass
class PodNetwork:
    """Network namespaces for pods, named ``<prefix>-<n>``, with veths into this one."""

    prefix: str = field(default_factory=lambda: f"hre2e-{secrets.token_hex(3)}")
    _count: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _pods: dict[str, tuple[str, str, str]] = field(default_factory=dict, init=False)

    def setup(self) -> None:
        """The node's addresses on this namespace's loopback (refuses a shared namespace:
        its only link must be the loopback)."""
        others = [name for name in interfaces() if name != "lo"]
        if others:
            raise PodNetworkError(
                f"the pod network is built only in a network namespace of its own (found "
                f"{', '.join(others)}): run the end-to-end tier with `make e2e`"
            )
        ip("link", "set", "lo", "up")
        for address in (NODE_IP, API_SERVICE_IP):
            ip("addr", "replace", f"{address}/32", "dev", "lo")
        # Pod to pod (Prometheus scraping Headroom) is forwarded here, as on a node.
        FORWARDING.write_text("1\n")

    def attach(self, *, key: str, pod_ip: str) -> Path:
        """A namespace holding ``pod_ip`` for the pod identified by ``key``; returns its path."""
        with self._lock:
            if key in self._pods:
                return NETNS_DIR / self._pods[key][0]
            self._count += 1
            netns, veth = f"{self.prefix}-{self._count}", f"hrv{self._count}"
        ip("netns", "add", netns)
        try:
            ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
            ip("link", "set", "lo", "up", netns=netns)
            ip("addr", "add", f"{pod_ip}/32", "dev", "eth0", netns=netns)
            ip("link", "set", "eth0", "up", netns=netns)
            ip("route", "add", NODE_IP, "dev", "eth0", "scope", "link", netns=netns)
            ip("route", "add", "default", "via", NODE_IP, "dev", "eth0", netns=netns)
            ip("link", "set", veth, "up")
            ip("route", "replace", f"{pod_ip}/32", "dev", veth, "src", NODE_IP)
        except PodNetworkError:
            ip("netns", "del", netns)
            raise
        with self._lock:
            self._pods[key] = (netns, veth, pod_ip)
        logger.info("pod %s: %s in network namespace %s", key, pod_ip, netns)
        return NETNS_DIR / netns

    def detach(self, key: str) -> None:
        with self._lock:
            found = self._pods.pop(key, None)
        if found is None:
            return
        netns, _veth, _pod_ip = found
        # Deleting the namespace deletes its veth end, the peer here and the route with it.
        ip("netns", "del", netns)

    def teardown(self) -> None:
        for key in list(self._pods):
            try:
                self.detach(key)
            except PodNetworkError as err:
                logger.warning("%s", err)
