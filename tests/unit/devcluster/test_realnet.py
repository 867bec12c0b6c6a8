"""The guests' addresses: node addresses on the guest network, one pod range per node."""

import ipaddress

from devcluster.realnet import (
    HOST_ADDRESS,
    NODE_NETWORK,
    POD_NETWORK,
    mac_address,
    node_address,
    pod_cidr,
    pod_routes,
)


def test_each_guest_has_its_own_node_address_and_pod_range() -> None:
    assert [node_address(i) for i in (1, 2)] == ["10.251.0.11", "10.251.0.12"]
    assert [pod_cidr(i) for i in (1, 2)] == ["10.244.1.0/24", "10.244.2.0/24"]
    for index in range(1, 20):
        assert ipaddress.ip_address(node_address(index)) in NODE_NETWORK
        assert node_address(index) != HOST_ADDRESS
        assert ipaddress.ip_network(pod_cidr(index)).subnet_of(POD_NETWORK)
    assert mac_address(2) == "52:54:00:fb:00:02"


def test_a_guest_routes_the_other_guests_pod_ranges_via_their_node_addresses() -> None:
    assert pod_routes(1, [1, 2, 3]) == [
        ("10.244.2.0/24", "10.251.0.12"),
        ("10.244.3.0/24", "10.251.0.13"),
    ]
    assert pod_routes(1, [1]) == []
