"""The probe's modes that make bench-tenant runs in the guest, built with the machine's Go
and run here on loopback: the server spends each request's CPU, the open-loop load keeps
its schedule and counts latency from it, and ``pace`` uses the CPU it is given."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.tenant_figures import parse_load
from devcluster.ports import free_port

SOURCE = Path(__file__).resolve().parents[2] / "realnode" / "images" / "probe" / "main.go"
# /proc/<pid>/stat counts CPU time in clock ticks.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built as hack/build-realnode.sh builds it."""
    work = tmp_path_factory.mktemp("probe")
    (work / "main.go").write_text(SOURCE.read_text())
    (work / "go.mod").write_text("module headroom.local/probe\n\ngo 1.26\n")
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    subprocess.run(["go", "build", "-o", "probe", "."], cwd=work, env=env, check=True)
    return work / "probe"


@pytest.fixture
def server(probe: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([str(probe), "serve", str(port)])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket_to(port):
                    break
            except OSError:
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def socket_to(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=1)


def test_the_load_keeps_its_schedule_and_each_request_costs_its_cpu(
    probe: Path, server: str
) -> None:
    # Half a second at 10 a second, then half a second at 2: 5 + 1 requests.
    output = subprocess.run(
        [str(probe), "load", server, "20", "1", "10@0.5,2@0.5"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    requests = parse_load(output)
    assert [round(r.scheduled, 3) for r in requests] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert all(r.ok for r in requests)
    # 20 ms of the server thread's CPU: no answer comes sooner.
    assert min(r.latency for r in requests) >= 0.020


def test_a_malformed_request_is_answered_with_an_error(probe: Path, server: str) -> None:
    with socket_to(int(server.rsplit(":", 1)[1])) as conn:
        conn.sendall(b"soon\n")
        assert conn.recv(200).startswith(b"error: a request is a whole number")


def test_pace_uses_the_cpu_it_asks_for(probe: Path) -> None:
    process = subprocess.Popen([str(probe), "pace", "250"])
    try:
        time.sleep(2.0)
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        used = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert 0.35 <= used <= 0.65, used
