"""Time ``kubectl headroom simulate`` over a 5,000-node, 150,000-pod snapshot.

Run: ``python -m bench.simulate_bench`` (``--nodes``/``--pods-per-node`` to resize). It
writes a deterministic synthetic snapshot (three node pools, 200 namespaces of which 120
enrolled, pods of one to three containers, sidecars, existing limits, pod-level pods,
LimitRanges and a few ``limits.cpu`` quotas), then runs the real command as a separate
process (interpreter start-up and imports included) and prints the median wall time of
several runs for each output format, plus the time of each phase in-process. Machines
shared with other work slow every figure down; compare runs on a quiet machine.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from kubectl_headroom.simulate import WhatIf, select, simulate
from kubectl_headroom.simulate_output import document, table
from kubectl_headroom.snapshot import FORMAT_VERSION, KIND, load
from kubectl_headroom.whatif import what_if_config, what_if_settings

_NAMESPACES = 200
_ENROLLED = 120
_POOLS = ("web", "batch", "gpu")
_RUNS = 3
_TARGET_SECONDS = 10.0


def _container(name: str, *, request_m: int, limit_m: int | None, sidecar: bool) -> dict[str, Any]:
    limits = {"memory": "512Mi"} | ({} if limit_m is None else {"cpu": f"{limit_m}m"})
    result: dict[str, Any] = {
        "name": name,
        "resources": {"requests": {"cpu": f"{request_m}m", "memory": "256Mi"}, "limits": limits},
    }
    if sidecar:
        result["restartPolicy"] = "Always"
    return result


def _pod(index: int, node: str) -> dict[str, Any]:
    namespace = f"team-{index % _NAMESPACES}"
    request_m = 50 + (index * 37) % 450
    spec: dict[str, Any] = {"nodeName": node}
    if index % 100 == 7:
        # Pod-level resources: the containers carry none of their own.
        spec["resources"] = {"requests": {"cpu": f"{request_m}m", "memory": "512Mi"}}
        spec["containers"] = [{"name": "app", "resources": {}}]
    else:
        spec["containers"] = [
            _container(
                f"c{c}",
                request_m=max(request_m // (c + 1), 10),
                limit_m=None if index % 3 else 2 * request_m,
                sidecar=False,
            )
            for c in range(1 + index % 3)
        ]
        if index % 5 == 0:
            spec["initContainers"] = [_container("proxy", request_m=20, limit_m=None, sidecar=True)]
    return {
        "metadata": {
            "name": f"pod-{index}",
            "namespace": namespace,
            "uid": f"uid-{index}",
            "labels": {"app": f"app-{index % 50}", "tier": "web" if index % 2 else "batch"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"app-{index % 50}-5d8f"}
            ],
            "generation": 1,
        },
        "spec": spec,
        "status": {"phase": "Running", "qosClass": "Burstable", "observedGeneration": 1},
    }


def synthetic_snapshot(*, nodes: int, pods_per_node: int) -> dict[str, Any]:
    node_objects = [
        {
            "metadata": {
                "name": f"node-{n}",
                "labels": {"kubernetes.io/os": "linux", "pool": _POOLS[n % len(_POOLS)]},
            },
            "status": {
                "allocatable": {"cpu": "32"},
                "declaredFeatures": ["InPlacePodLevelResourcesVerticalScaling"],
                "nodeInfo": {"kubeletVersion": "v1.37.2", "operatingSystem": "linux"},
            },
        }
        for n in range(nodes)
    ]
    namespaces = [
        {
            "metadata": {
                "name": f"team-{i}",
                "labels": {"kube-headroom.dev/mode": "managed"} if i < _ENROLLED else {},
            }
        }
        for i in range(_NAMESPACES)
    ]
    pods = [
        _pod(n * pods_per_node + p, f"node-{n}") for n in range(nodes) for p in range(pods_per_node)
    ]
    limit_ranges = [
        {
            "metadata": {"name": "limits", "namespace": f"team-{i}"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "4"}}]},
        }
        for i in range(0, _NAMESPACES, 10)
    ]
    quotas = [
        {
            "metadata": {"name": "cpu", "namespace": f"team-{i}"},
            "spec": {"hard": {"limits.cpu": "400"}},
            "status": {"hard": {"limits.cpu": "400"}, "used": {"limits.cpu": "350"}},
        }
        for i in range(5, _NAMESPACES, 40)
    ]
    config = {
        "apiVersion": "kube-headroom.dev/v1alpha1",
        "kind": "HeadroomConfig",
        "metadata": {"name": "cluster"},
        "spec": {
            "dryRun": False,
            "nodePools": [
                {
                    "name": "web",
                    "nodeSelector": {"matchLabels": {"pool": "web"}},
                    "maxMultiplier": "3",
                },
                {
                    "name": "batch",
                    "nodeSelector": {"matchLabels": {"pool": "batch"}},
                    "maxMultiplier": "20",
                },
            ],
        },
    }
    return {
        "kind": KIND,
        "version": FORMAT_VERSION,
        "serverVersion": "v1.37.2",
        "config": config,
        "nodes": node_objects,
        "namespaces": namespaces,
        "pods": pods,
        "limitRanges": limit_ranges,
        "resourceQuotas": quotas,
        "verticalPodAutoscalers": None,
    }


def _timed(action: Callable[[], object]) -> float:
    # As the command runs: without garbage-collection passes (see simulate_cli).
    gc.disable()
    try:
        started = time.perf_counter()
        action()
        return time.perf_counter() - started
    finally:
        gc.enable()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.simulate_bench")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "snapshot.json.gz"
        document_ = synthetic_snapshot(nodes=args.nodes, pods_per_node=args.pods_per_node)
        path.write_bytes(gzip.compress(orjson.dumps(document_), compresslevel=6))
        del document_
        pods = args.nodes * args.pods_per_node
        print(
            f"snapshot: {args.nodes:,} nodes, {pods:,} pods, "
            f"{path.stat().st_size / 1e6:.1f} MB gzipped"
        )
        for output in ("table", "json"):
            command = [
                sys.executable, "-m", "kubectl_headroom.main", "simulate",
                "--snapshot", str(path), "--enroll", "team-150", "--set", "maxMultiplier=5",
                "-o", output,
            ]  # fmt: skip
            samples = []
            for _ in range(_RUNS):
                started = time.perf_counter()
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
                samples.append(time.perf_counter() - started)
            median = statistics.median(samples)
            verdict = "within" if median < _TARGET_SECONDS else "OVER"
            print(
                f"kubectl headroom simulate -o {output}: median {median:.2f} s over {_RUNS} runs "
                f"({verdict} the {_TARGET_SECONDS:.0f} s target)"
            )
        snapshot = load(path)
        settings, _ = what_if_settings(what_if_config(snapshot.config, sets=["maxMultiplier=5"]))
        phases = {
            "load snapshot": lambda: load(path),
            "simulate": lambda: simulate(
                snapshot, settings, what_if=WhatIf(frozenset({"team-150"}))
            ),
        }
        for name, action in phases.items():
            print(f"  {name}: {_timed(action):.2f} s")
        simulation = simulate(snapshot, settings, what_if=WhatIf(frozenset({"team-150"})))
        view = select(simulation)
        outputs = {
            "select and sort": lambda: select(simulation),
            "render table": lambda: table(simulation, view),
            "build JSON document": lambda: document(simulation, view),
        }
        for name, action in outputs.items():
            print(f"  {name}: {_timed(action):.2f} s")


if __name__ == "__main__":
    main()
