"""The real ``headroom-webhook`` process on loopback, for tests of the process itself."""

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import httpx
import yaml

from certs.cli import main as headroom_certs
from devcluster.ports import free_port


def unreachable_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig for an API server that is not there: the cache can never sync."""
    path = tmp_path / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    ports: dict[str, int]
    certs: Path
    log: TextIO


@contextmanager
def webhook_process(tmp_path: Path) -> Iterator[Running]:
    """The real webhook over TLS on loopback; its cluster cache can never sync."""
    unreachable = unreachable_kubeconfig(tmp_path)
    certs = tmp_path / "certs"
    assert headroom_certs(["--out-dir", str(certs), "--ip", "127.0.0.1"]) == 0
    ports = {"webhook": free_port(), "metrics": free_port(), "probe": free_port()}
    log = (tmp_path / "webhook.log").open("w+")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook.main",
            f"--bind-address=127.0.0.1:{ports['webhook']}",
            f"--metrics-bind-address=127.0.0.1:{ports['metrics']}",
            "--metrics-secure=false",
            f"--health-probe-bind-address=127.0.0.1:{ports['probe']}",
            f"--cert-dir={certs}",
            f"--kubeconfig={unreachable}",
        ],
        stderr=log,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{ports['probe']}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, "webhook exited during start-up"
                assert time.monotonic() < deadline, "webhook did not start"
                time.sleep(0.1)
        yield Running(process=process, ports=ports, certs=certs, log=log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
