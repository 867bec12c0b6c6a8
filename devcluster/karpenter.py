"""Karpenter with its KWOK cloud provider, run as a host process beside the control plane:
the node autoscaler the integration tier runs Headroom beside.

Its NodeClaims become Nodes annotated for KWOK, which this control plane's KWOK then runs
like any simulated node. The binary and CRDs come from the cache
``hack/build-neighbours.sh`` fills (``karpenter_dir`` runs it; a no-op once built).
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from devcluster.addons import HostProcess, http_ok, spawn, wait_until
from devcluster.binaries import neighbour_dir, pinned_versions
from devcluster.ports import free_port


def karpenter_dir() -> Path:
    """The cache holding ``bin/karpenter-kwok`` and ``crds/``, built on first use."""
    return neighbour_dir("karpenter", f"karpenter-{pinned_versions()['KARPENTER_VERSION']}")


def instance_type(name: str, *, cpu: str, memory: str, price: float) -> dict[str, Any]:
    """One on-demand Linux amd64 instance type in the KWOK provider's file format (Karpenter
    reserves 100m of its CPU for the kubelet: allocatable is ``cpu`` - 100m)."""
    requirements = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]},
    ]
    return {
        "name": name,
        "offerings": [{"Price": price, "Available": True, "Requirements": requirements}],
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": cpu, "memory": memory, "pods": "110"},
    }


@dataclass
class Karpenter:
    process: HostProcess
    metrics_url: str

    @classmethod
    def start(
        cls, kubeconfig: Path, work_dir: Path, instance_types: list[dict[str, Any]]
    ) -> Karpenter:
        """Start it against ``kubeconfig``'s cluster, offering only ``instance_types``, and
        wait until its caches have synced and its CRDs are served."""
        binary = karpenter_dir() / "bin" / "karpenter-kwok"
        work_dir.mkdir(parents=True, exist_ok=True)
        types = work_dir / "instance-types.json"
        types.write_text(json.dumps(instance_types))
        probe, metrics = free_port(), free_port()
        process = spawn(
            "karpenter",
            [
                str(binary),
                "--disable-leader-election",
                f"--metrics-port={metrics}",
                f"--health-probe-port={probe}",
                f"--instance-types-file-path={types}",
            ],
            log_dir=work_dir,
            # Like every controller-runtime manager, it reads its cluster from KUBECONFIG.
            env={"KUBECONFIG": str(kubeconfig)},
        )
        wait_until(process, lambda: http_ok(f"http://127.0.0.1:{probe}/readyz"), "/readyz")
        return cls(process, f"http://127.0.0.1:{metrics}/metrics")

    def disruption_passes(self) -> int:
        """How many times its disruption loop has looked for nodes to consolidate, drift
        or expire: once every 10 s while it finds nothing to do."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            text = response.read().decode()
        return sum(
            int(sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "controller_runtime_reconcile_total"
            and sample.labels.get("controller") == "disruption"
        )
