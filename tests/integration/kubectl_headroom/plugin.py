"""Running ``kubectl headroom`` the way an operator does: through kubectl's plugin lookup."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.integration.conftest import Cluster

VENV_BIN = Path(sys.executable).parent


def kubectl_headroom(
    cluster: Cluster, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """kubectl finds kubectl-headroom on PATH; ``env`` adds to (or overrides) the cluster's."""
    environ = {**cluster.environ(), **(env or {})}
    environ["PATH"] = f"{VENV_BIN}:{environ['PATH']}"
    return subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "headroom", *args],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def kubectl_headroom_json(cluster: Cluster, *args: str, timeout: float = 120) -> dict[str, Any]:
    """``kubectl headroom <args> -o json``, which must succeed: the document it prints."""
    result = kubectl_headroom(cluster, *args, "-o", "json", timeout=timeout)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def kubeconfig_copy(
    cluster: Cluster, path: Path, *, namespace: str | None = None, server: str | None = None
) -> Path:
    """The control plane's kubeconfig, its context given a namespace or another server."""
    config: dict[str, Any] = json.loads(cluster.kubeconfig.read_text())
    if namespace is not None:
        for entry in config["contexts"]:
            entry["context"]["namespace"] = namespace
    if server is not None:
        for entry in config["clusters"]:
            entry["cluster"]["server"] = server
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path
