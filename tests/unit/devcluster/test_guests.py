"""A guest's per-boot configuration: the kubelet's, the node's network and the qemu
command line that boots it."""

import shlex
import tomllib
from dataclasses import replace
from pathlib import Path

from devcluster.guests import (
    CONFIG_MOUNT,
    REGISTRY_HOSTS,
    Guest,
    GuestImage,
    NodeSpec,
    RegistryMirror,
    cni_configuration,
    kube_proxy_configuration,
    kubelet_configuration,
    node_environment,
    registry_hosts,
)
from devcluster.realnet import POD_NETWORK
from devcluster.realnodes import STATIC, WORKLOAD


def sourced(text: str) -> dict[str, str]:
    """node.env as the guest's shell reads it."""
    return {
        key: shlex.split(value)[0] if value else ""
        for key, _, value in (line.partition("=") for line in text.splitlines())
    }


def test_the_kubelet_runs_cgroupfs_with_node_credentials_and_webhook_authorization() -> None:
    config = kubelet_configuration(WORKLOAD)
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["authentication"]["x509"]["clientCAFile"].endswith("/ca.crt")
    assert config["authorization"] == {"mode": "Webhook"}
    assert config["address"] == WORKLOAD.address
    assert config["failSwapOn"] is True
    assert "cpuManagerPolicy" not in config


def test_a_nodes_own_kubelet_fields_and_swap() -> None:
    config = kubelet_configuration(STATIC)
    assert config["cpuManagerPolicy"] == "static"
    assert config["failSwapOn"] is False
    assert config["memorySwap"] == {"swapBehavior": "LimitedSwap"}


def test_the_pod_network_is_the_nodes_own_range() -> None:
    [bridge] = cni_configuration(STATIC)["plugins"]
    assert bridge["type"] == "bridge"
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.2.0/24"}]]


def test_kube_proxy_programs_nftables_as_its_node_with_its_own_credentials() -> None:
    config = kube_proxy_configuration(STATIC)
    assert config["mode"] == "nftables"
    assert config["hostnameOverride"] == STATIC.name
    assert config["bindAddress"] == STATIC.address
    # Traffic from outside the pod network to a Service is masqueraded: the API server's.
    assert config["clusterCIDR"] == str(POD_NETWORK)
    assert config["clientConnection"]["kubeconfig"] == f"{CONFIG_MOUNT}/kube-proxy.kubeconfig"
    assert config["conntrack"]["maxPerCore"] == 0


def test_node_env_carries_name_address_routes_labels_and_swap() -> None:
    values = sourced(node_environment(STATIC, indices=[1, 2]))
    assert values["NODE_NAME"] == "realnode-2"
    assert values["NODE_IP"] == "10.251.0.12"
    assert values["POD_ROUTES"] == "10.244.1.0/24@10.251.0.11"
    assert values["SWAP_MIB"] == "256"
    assert values["KUBELET_ARGS"] == "--node-labels=node.kubernetes.io/cpu-manager-policy=static"
    assert sourced(node_environment(WORKLOAD, indices=[1]))["KUBELET_ARGS"] == ""


def test_qemu_emulates_the_guest_on_its_tap_with_a_throwaway_root_disk(tmp_path: Path) -> None:
    spec = NodeSpec(name="n", index=3, cpus=3, memory_mib=1024)
    guest = Guest(spec=spec, image=GuestImage(tmp_path), work_dir=tmp_path / "n", run_dir=tmp_path)
    args = guest.qemu_args()
    pairs = dict(zip(args[1::2], args[2::2], strict=False))
    assert args[args.index("-accel") + 1] == "tcg,thread=single"
    threaded = Guest(
        spec=replace(spec, threads="multi"),
        image=GuestImage(tmp_path),
        work_dir=tmp_path / "m",
        run_dir=tmp_path,
    ).qemu_args()
    assert threaded[threaded.index("-accel") + 1] == "tcg,thread=multi"
    assert args[args.index("-smp") + 1] == "3"
    assert args[args.index("-m") + 1] == "1024"
    assert "snapshot=on" in args[args.index("-drive") + 1]
    assert "ifname=hrtap3" in args[args.index("-netdev") + 1]
    assert "readonly=on" in args[args.index("-virtfs") + 1]
    assert pairs["-serial"] == f"file:{guest.console}"


def test_each_mirrored_registry_gets_its_hosts_file_and_the_ca_it_trusts() -> None:
    ca = b"-----BEGIN CERTIFICATE-----\n...\n"
    endpoint = "https://10.251.0.1:21000"
    files = registry_hosts(
        [
            RegistryMirror(upstream="10.251.0.1:21000", endpoint=endpoint, ca_pem=ca),
            RegistryMirror(upstream="ghcr.io", endpoint=endpoint, ca_pem=ca),
        ]
    )
    assert set(files) == {
        "10.251.0.1:21000/hosts.toml",
        "10.251.0.1:21000/ca.crt",
        "ghcr.io/hosts.toml",
        "ghcr.io/ca.crt",
    }
    assert files["ghcr.io/ca.crt"] == ca
    hosts = tomllib.loads(str(files["ghcr.io/hosts.toml"]))
    assert hosts == {
        "server": "https://ghcr.io",
        "host": {
            endpoint: {
                "capabilities": ["pull", "resolve"],
                "ca": f"{REGISTRY_HOSTS}/ghcr.io/ca.crt",
            }
        },
    }


def test_no_mirror_no_hosts_files() -> None:
    assert registry_hosts([]) == {}


def test_the_guests_containerd_reads_its_registry_hosts_where_the_harness_writes_them() -> None:
    config = tomllib.loads(
        (Path(__file__).parents[3] / "hack/realnode/containerd.toml").read_text()
    )
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["registry"]["config_path"] == REGISTRY_HOSTS
