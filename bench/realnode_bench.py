"""Benchmark: how fast a managed container's CPU ceiling follows its node's bookings on a
real kubelet (containerd, runc, cgroup v2) in a qemu guest.

Boots the real-node fleet's workload guest (``devcluster.realnodes.WORKLOAD``, 3 vCPUs)
with the local control plane, installs the CRD, runs Headroom's webhook and reconciler
as the demo does (``devcluster.headroom``), enforcing with every other setting at its
default, and places one managed pod (a 500m request) alone on the node. Then it runs
``--trials`` trials of ``devcluster.latency``: a neighbour requesting 1500m is bound next
to it (its ``cpu.max`` shrinks from 3 cores to 1.5) and deleted (it rises back once the
neighbour has finished). Prints
the guest's boot-to-Ready time, the managed pod's create-to-Running time, and p50, p90
and max of each latency with Headroom's and the kubelet's shares.

    make bench-realnode                               # root; cached parts built once
    make bench-realnode REALNODE_ARGS="--trials 40"

It must run in a network namespace of its own (``hack/realnode.sh --bench``, which the
make target runs): the guest's addresses exist only there.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

from app.core.apipaths import PODS
from app.core.labels import MODE_LABEL
from app.core.quantity import parse_cpu_millis
from devcluster.guests import PROBE_IMAGE
from devcluster.headroom import enforcing
from devcluster.latency import CeilingTrials, Trial, report
from devcluster.realnodes import WORKLOAD, RealCluster, throwaway_cluster

MANAGED = "bench-managed"
NEIGHBOURS = "bench-neighbours"


def _pod(name: str, *, namespace: str, node: str, cpu: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "app",
                    "image": PROBE_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": ["sleep"],
                    "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}},
                }
            ],
        },
    }


def _wait_limit(cluster: RealCluster, *, millis: int, timeout: float = 60.0) -> None:
    """Until Headroom has raised the managed pod to ``millis`` (alone on its node)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = cluster.api.get(PODS.path(namespace=MANAGED, name="web")) or {}
        limit = pod.get("spec", {}).get("containers", [{}])[0].get("resources", {})
        cpu = limit.get("limits", {}).get("cpu")
        if cpu is not None and parse_cpu_millis(str(cpu)) == millis:
            return
        time.sleep(0.5)
    raise SystemExit(f"the managed pod's limit did not reach {millis}m in {timeout}s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="trials of each change")
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    with throwaway_cluster((WORKLOAD,), prefix="headroom-bench-realnode-") as cluster:
        print(cluster.startup())
        plane = cluster.plane
        with enforcing(plane, cluster.work_dir / "headroom"):
            plane.kubectl("create", "namespace", NEIGHBOURS)
            plane.kubectl("create", "namespace", MANAGED)
            plane.kubectl("label", "namespace", MANAGED, f"{MODE_LABEL}=managed")
            created = time.monotonic()
            plane.kubectl(
                "create", "-f", "-",
                input=json.dumps(_pod("web", namespace=MANAGED, node=WORKLOAD.name, cpu="500m")),
            )  # fmt: skip
            plane.kubectl(
                "wait", "pod/web", "-n", MANAGED, "--for=jsonpath={.status.phase}=Running",
                "--timeout=110s",
            )  # fmt: skip
            print(f"managed pod created to Running in {time.monotonic() - created:.1f}s")
            _wait_limit(cluster, millis=3000)
            trials = CeilingTrials(
                plane=plane,
                api=cluster.api,
                guest=cluster.guest(WORKLOAD.name),
                namespace=MANAGED,
                pod="web",
                container="app",
                neighbour_namespace=NEIGHBOURS,
                neighbour_cpu="1500m",
            )

            def progress(done: int, trial: Trial) -> None:
                print(
                    f"  trial {done}/{args.trials}: shrink {trial.shrink.total:.2f}s "
                    f"(kubelet {trial.shrink.kubelet:.2f}s), rise {trial.rise.total:.2f}s "
                    f"(kubelet {trial.rise.kubelet:.2f}s)",
                    flush=True,
                )

            print(report(trials.run(args.trials, progress=progress)))
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
