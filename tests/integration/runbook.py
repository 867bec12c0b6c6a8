"""Running the runbook's shell commands exactly as it shows them, against the test cluster."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping

from tests.integration.conftest import REPO, Cluster
from tests.unit.docs.markdown import RUNBOOK, section, shell_commands


def runbook_commands(title: str) -> list[str]:
    """The shell commands of the runbook's section ``title`` (its subsections too), in order."""
    return shell_commands(section(RUNBOOK.read_text(), title))


def shell_environ(cluster: Cluster, **extra: str) -> dict[str, str]:
    """An operator's shell: the cluster's KUBECONFIG, and its kubectl and helm first on PATH."""
    env = {**cluster.environ(), **extra}
    env["PATH"] = f"{cluster.bin_dir}{os.pathsep}{env['PATH']}"
    return env


def run_shell(
    command: str, *, env: Mapping[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """One command line through bash, from the repository root, as a reader would type it."""
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
