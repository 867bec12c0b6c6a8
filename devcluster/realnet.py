"""The real-node guests' network: addresses that exist only inside the harness's own
network namespace.

``hack/realnode.sh`` runs the real-node tier in a fresh network namespace (``unshare
--net``); everything here is built in it and vanishes with it:

- a bridge holding ``HOST_ADDRESS``, the harness's end of the guest network, where the
  control plane (listening on every address of the namespace) is reached by the kubelets;
- one tap device per guest on that bridge: qemu's virtio-net card, with the node address
  ``node_address(i)`` inside the guest;
- a route per node to its pod range ``pod_cidr(i)`` via its node address, so the API
  server and the harness reach pods the way a routed cluster network would (the guests
  get the same routes to each other's ranges);
- a route to the Service range via the first node, whose kube-proxy forwards a Service's
  virtual IP to an endpoint (masquerading, since the sender is outside the pod network):
  how the API server reaches a webhook's Service, as a control plane beside its nodes
  does.

The namespace has no default route and no link to any other namespace: no packet to or
from a guest can leave it, and nothing in the machine's own namespace can reach a guest.
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass, field

from devcluster.controlplane import SERVICE_CIDR

# Set by hack/realnode.sh in the namespace it creates: what runs there may build the
# guest network.
NAMESPACE_ENV = "HEADROOM_REALNODE"
BRIDGE = "hrbr0"
NODE_NETWORK = ipaddress.ip_network("10.251.0.0/24")
HOST_ADDRESS = "10.251.0.1"
POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")


class GuestNetworkError(RuntimeError):
    """An ``ip`` command failed; the message carries it and its output."""


def ip(*args: str) -> str:
    command = ["ip", *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
    if result.returncode != 0:
        raise GuestNetworkError(f"{' '.join(command)}: {result.stderr.strip()}")
    return result.stdout


def interfaces() -> list[str]:
    """Names of the links in this network namespace."""
    return [line.split("@")[0].split()[0] for line in ip("-o", "-br", "link").splitlines()]


def node_address(index: int) -> str:
    """The node address of guest ``index`` (1-based)."""
    return str(NODE_NETWORK[10 + index])


def pod_cidr(index: int) -> str:
    """The pod range of guest ``index``: its CNI bridge hands out addresses from it."""
    return f"{POD_NETWORK[0] + 256 * index}/24"


def tap_name(index: int) -> str:
    return f"hrtap{index}"


def mac_address(index: int) -> str:
    return f"52:54:00:fb:00:{index:02x}"


def pod_routes(index: int, indices: list[int]) -> list[tuple[str, str]]:
    """(pod range, via node address) of every other guest: what guest ``index`` routes."""
    return [(pod_cidr(other), node_address(other)) for other in indices if other != index]


@dataclass
class GuestNetwork:
    """The bridge and taps in this network namespace, which must be one of its own."""

    taps: list[int] = field(default_factory=list)

    def setup(self) -> None:
        others = [name for name in interfaces() if name != "lo"]
        if others:
            raise GuestNetworkError(
                "the guest network is built only in a network namespace of its own (found "
                f"{', '.join(others)}): run the real-node tier with `make realnode`"
            )
        ip("link", "set", "lo", "up")
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", f"{HOST_ADDRESS}/{NODE_NETWORK.prefixlen}", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")

    def add_tap(self, index: int) -> str:
        """A tap device for guest ``index`` on the bridge, and the route to its pods."""
        name = tap_name(index)
        ip("tuntap", "add", "dev", name, "mode", "tap")
        ip("link", "set", name, "master", BRIDGE)
        ip("link", "set", name, "up")
        ip("route", "replace", pod_cidr(index), "via", node_address(index))
        if not self.taps:
            ip("route", "replace", SERVICE_CIDR, "via", node_address(index))
        self.taps.append(index)
        return name

    def teardown(self) -> None:
        for index in self.taps:
            ip("link", "del", tap_name(index))
        self.taps.clear()
        if BRIDGE in interfaces():
            ip("link", "del", BRIDGE)
