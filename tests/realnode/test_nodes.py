"""The guests are ordinary nodes: real kubelets authenticated and authorized as nodes,
reached by the API server with its own client certificate, on addresses that exist only
inside the harness's network namespace."""

from __future__ import annotations

import ipaddress
import json
import os
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from app.core.apipaths import NODES, SECRETS
from devcluster.binaries import kubernetes_version, pinned_versions
from devcluster.kubepods import cpu_max_millis
from devcluster.realnet import BRIDGE, NODE_NETWORK, POD_NETWORK
from devcluster.realnodes import FLEET, STATIC, STATIC_POLICY_LABEL, WORKLOAD, RealCluster
from tests.integration.conftest import Cluster
from tests.realnode import builders
from tests.realnode.kubelets import Kubelets

GUEST_NETWORKS = (NODE_NETWORK, POD_NETWORK)


def host_netns() -> Path:
    """The machine's own network namespace: where this run started, before
    hack/realnode.sh unshared one for it (it passes a descriptor of it)."""
    return Path(f"/proc/{os.getpid()}/fd/{os.environ['HEADROOM_HOST_NETNS_FD']}")


def _node_client(cluster: RealCluster, node: str) -> ssl.SSLContext:
    pki = cluster.plane.node_pki(node, ip=cluster.guest(node).spec.address)
    context = ssl.create_default_context(cafile=str(cluster.plane.ca_file))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


def _call(url: str, context: ssl.SSLContext, *, method: str = "GET", body: Any = None) -> int:
    request = urllib.request.Request(
        url,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_every_guest_is_a_ready_node_running_the_pinned_software(real_cluster: RealCluster) -> None:
    versions = pinned_versions()
    for spec in FLEET:
        node = real_cluster.api.get(NODES.path(name=spec.name))
        assert node is not None
        info = node["status"]["nodeInfo"]
        assert info["kubeletVersion"] == kubernetes_version()
        containerd = versions["CONTAINERD_VERSION"].removeprefix("v")
        assert info["containerRuntimeVersion"] == f"containerd://{containerd}"
        assert info["operatingSystem"] == "linux"
        assert node["status"]["capacity"]["cpu"] == str(spec.cpus)
        addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
        assert addresses["InternalIP"] == spec.address
    static = real_cluster.api.get(NODES.path(name=STATIC.name))
    assert static is not None
    assert static["metadata"]["labels"][STATIC_POLICY_LABEL] == "static"
    # The static policy's reserved CPU is taken off the node's allocatable.
    assert static["status"]["allocatable"]["cpu"] == "1500m"


def test_kubelets_authenticate_with_node_certificates_under_the_node_authorizer(
    real_cluster: RealCluster,
) -> None:
    guest = real_cluster.guest(WORKLOAD.name)
    kubeconfig = json.loads((guest.config_dir / "kubeconfig").read_text())
    assert set(kubeconfig["users"][0]["user"]) == {"client-certificate", "client-key"}
    server = real_cluster.plane.server
    context = _node_client(real_cluster, WORKLOAD.name)
    own = f"{server}{NODES.path(name=WORKLOAD.name)}"
    assert _call(own, context) == 200
    # The Node authorizer and NodeRestriction: a node may not touch another node, nor read
    # Secrets no pod of its own uses.
    label = {"metadata": {"labels": {"headroom.test/touched": "yes"}}}
    other = f"{server}{NODES.path(name=STATIC.name)}"
    assert _call(other, context, method="PATCH", body=label) == 403
    secrets = f"{server}{SECRETS.path(namespace='default')}"
    assert _call(secrets, context) == 403
    # NodeRestriction also keeps a node off the labels that steer workloads to it.
    restricted = {"metadata": {"labels": {"node-restriction.kubernetes.io/x": "y"}}}
    assert _call(own, context, method="PATCH", body=restricted) == 403


def test_the_api_server_reaches_kubelets_with_its_own_client_certificate(
    real_cluster: RealCluster, control_plane: Cluster, namespace: str, kubelets: Kubelets
) -> None:
    reached = builders.container(cpu="100m", limits={"cpu": "2"}, args=["gomaxprocs"])
    control_plane.apply(builders.pod("reached", reached, namespace=namespace, node=WORKLOAD.name))
    control_plane.kubectl(
        "wait", "pod/reached", "-n", namespace, "--for=condition=Ready", "--timeout=110s"
    )
    # Logs and exec go from the API server to the kubelet on its node address.
    assert control_plane.kubectl("logs", "-n", namespace, "reached").splitlines()[0] == (
        "gomaxprocs 2"
    )
    inside = control_plane.kubectl(
        "exec", "-n", namespace, "reached", "--", "/probe", "cat", "/sys/fs/cgroup/cpu.max"
    )
    pod = kubelets.pod(namespace, "reached")
    assert cpu_max_millis(inside) == kubelets.cgroup_limits(pod, container="app") == 2000
    # The kubelet itself refuses anyone without a certificate of the cluster's CA.
    anonymous = ssl.create_default_context(cafile=str(real_cluster.plane.ca_file))
    assert _call(f"https://{WORKLOAD.address}:10250/pods", anonymous) == 401
    pki = real_cluster.plane.pki_dir
    api_server = ssl.create_default_context(cafile=str(real_cluster.plane.ca_file))
    api_server.load_cert_chain(str(pki / "kubelet-client.crt"), str(pki / "kubelet-client.key"))
    assert _call(f"https://{WORKLOAD.address}:10250/pods", api_server) == 200


def _ip_json(*args: str, netns: Path | None = None) -> list[dict[str, Any]]:
    command = ["ip", "-j", *args]
    if netns is not None:
        command = ["nsenter", f"--net={netns}", *command]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=10)
    return list(json.loads(result.stdout or "[]"))


def _in_guest_networks(text: str) -> bool:
    if text in ("default", ""):
        return False
    network = ipaddress.ip_network(text, strict=False)
    return any(network.overlaps(guest) for guest in GUEST_NETWORKS)


def test_guest_addresses_exist_only_inside_the_harness_namespace(
    real_cluster: RealCluster,
) -> None:
    """Read (never dialled) from the machine's own namespace: no address, link or route
    there leads to a guest, so nothing on the host can reach one; and the harness's
    namespace has no way out."""
    host = host_netns()
    if os.stat(host).st_ino == os.stat("/proc/self/ns/net").st_ino:
        pytest.fail("the tier must run in a network namespace of its own (make realnode)")
    host_addresses = [
        info["local"] for link in _ip_json("addr", netns=host) for info in link.get("addr_info", [])
    ]
    assert not [a for a in host_addresses if _in_guest_networks(a)]
    host_links = {link["ifname"] for link in _ip_json("link", netns=host)}
    assert BRIDGE not in host_links
    assert not [name for name in host_links if name.startswith("hrtap")]
    host_routes = _ip_json("route", "show", "table", "all", netns=host)
    assert not [r for r in host_routes if _in_guest_networks(r.get("dst", ""))]
    for guest in real_cluster:
        # Asking the host's routing table (which sends nothing): a guest address is on no
        # link of the host, so at most it would go to the host's router, off the machine,
        # where no guest is.
        asked = subprocess.run(
            ["nsenter", f"--net={host}", "ip", "-j", "route", "get", guest.spec.address],
            capture_output=True, text=True, check=False, timeout=10,
        )  # fmt: skip
        if asked.returncode == 0:
            route = json.loads(asked.stdout)[0]
            assert route.get("type", "unicast") == "unicast", route
            assert "gateway" in route, route
        else:
            assert "unreachable" in asked.stderr, asked.stderr
    # The harness's namespace: the bridge, the guests' taps and loopback, no default route.
    links = {link["ifname"] for link in _ip_json("link")}
    assert links == {"lo", BRIDGE, *(f"hrtap{g.spec.index}" for g in real_cluster)}
    assert not [r for r in _ip_json("route") if r.get("dst") == "default"]
    addresses = {info["local"] for link in _ip_json("addr") for info in link.get("addr_info", [])}
    assert {g.spec.address for g in real_cluster}.isdisjoint(addresses)
