"""``make demo`` end to end, unattended: it runs its own embedded cluster; with
``--keep`` the test inspects the state it leaves, then stops it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from devcluster import locate_binaries
from tests.integration.conftest import REPO
from tests.unit.docs.test_commands import COVERED, DEMO


def _read_until(proc: subprocess.Popen[str], marker: str, *, timeout: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if marker in line:
            return lines
    raise AssertionError(f"demo never printed {marker!r}:\n" + "\n".join(lines))


def test_demo_walks_the_rollout_and_leaves_the_promised_state() -> None:
    proc = subprocess.Popen(
        # The README's command, as a person would type it (plus unattended flags).
        ["make", "demo", "DEMO_ARGS=--non-interactive --keep --cluster=embedded"],
        cwd=REPO,
        # Its own process group, so Ctrl-C (SIGINT) reaches make and the demo alike.
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = _read_until(proc, "The cluster keeps running", timeout=300)
        lines += _read_until(proc, "kubectl headroom status", timeout=10)
        output = "\n".join(lines)
        assert "All steps behaved as the runbook says." in output, output
        # Every docs command the docs test maps to the demo was run verbatim ($ lines).
        ran = [line.strip()[2:] for line in lines if line.strip().startswith("$ ")]
        for command, where in COVERED.items():
            if where != DEMO or command == "make demo":
                continue
            pattern = re.escape(command).replace(re.escape("<pod>"), r"\S+")
            assert any(re.fullmatch(pattern, r) for r in ran), f"demo never ran: {command}"
        found_kubeconfig = re.search(r"export KUBECONFIG=(\S+)", output)
        found_namespace = re.search(r"kubectl get pods -n (\S+)", output)
        assert found_kubeconfig, output
        assert found_namespace, output
        kubeconfig, namespace = Path(found_kubeconfig.group(1)), found_namespace.group(1)
        kubectl_bin = locate_binaries() / "kubectl"

        def kubectl(*args: str) -> Any:
            out = subprocess.run(
                [
                    str(kubectl_bin),
                    f"--kubeconfig={kubeconfig}",
                    *args,
                    "-o",
                    "json",
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            return json.loads(out)

        pods = {
            p["metadata"]["labels"]["app"]: p
            for p in kubectl("get", "pods", "-n", namespace)["items"]
        }
        web = pods["web"]
        assert web["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1380m"
        assert web["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
        assert web["metadata"]["generation"] >= 3  # climbed, then shrank, through pods/resize
        events = [
            e["message"]
            for e in kubectl("get", "events", "-n", namespace)["items"]
            if e["reason"] == "CPULimitAdjusted"
            and e["involvedObject"]["name"] == web["metadata"]["name"]
        ]
        assert any(m.startswith("unset -> 5000m") for m in events), events
        assert any(m.startswith("5000m -> 1380m") for m in events), events
        assert kubectl("get", "resourcequotas", "-n", namespace)["items"] == []
        # The walk ends with every rollback: limits frozen, label gone, config deleted.
        assert kubectl("get", "hcfg")["items"] == []
        labels = kubectl("get", "namespace", namespace)["metadata"]["labels"]
        assert "kube-headroom.dev/mode" not in labels
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    # make itself reports the interrupt; the demo must have torn its cluster down.
    assert "Stopped the demo cluster." in rest, rest
