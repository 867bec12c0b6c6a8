import socket

import pytest

from devcluster import ports
from devcluster.ports import free_port, port_block


def _ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
        return int(handle.read().split()[0])


def test_every_block_lies_below_the_kernels_ephemeral_range() -> None:
    low = _ephemeral_low()
    for worker in [None, "", "gw0", "gw3", "gw7", "gw12", "master"]:
        assert port_block(worker).stop <= low, worker


def test_each_worker_draws_from_a_block_of_its_own() -> None:
    blocks = [set(port_block(f"gw{n}")) for n in range(8)]
    for n, block in enumerate(blocks):
        for other in blocks[n + 1 :]:
            assert not block & other


def test_a_worker_gets_ports_from_its_block_and_never_the_same_one_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    monkeypatch.setattr(ports, "_handed_out", set())
    handed = [free_port() for _ in range(50)]
    assert len(set(handed)) == 50
    assert all(port in port_block("gw2") for port in handed)


def test_a_port_something_listens_on_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    block = port_block("gw5")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw5")
    monkeypatch.setattr(ports, "_handed_out", set(block) - {block[0], block[1]})
    with socket.create_server(("127.0.0.1", block[0])):
        assert free_port() == block[1]


def test_an_exhausted_block_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    block = port_block("gw6")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw6")
    monkeypatch.setattr(ports, "_handed_out", set(block))
    with pytest.raises(RuntimeError, match=f"{block.start}-{block.stop - 1}"):
        free_port()
