"""Benchmark the reconciler on a simulated cluster: sync, memory, burst convergence, patches.

Starts the real control plane (etcd, kube-apiserver, controller manager, scheduler, KWOK)
with at least 200 simulated nodes and 8,000 pods, a quarter of them in managed
namespaces, then runs the real `headroom-reconciler` as a subprocess and prints:

- initial sync time (process start to caches synced, from its own log) and the time to
  the first full convergence;
- the reconciler's resident memory, and bytes per cached pod (against the same process
  on an empty cluster);
- the time from a burst of 500 pod bindings to full convergence;
- resize patches issued during the burst versus the minimum the policy requires (pods
  whose limit had to change);
- reconcile duration p50/p99 (from the reconciler's own histogram);
- the cost of decoding and stripping a page of pods with and without garbage collection
  paused, which is why the reflector pauses it.

Convergence is judged independently: this process keeps its own watch-fed cache and runs
the pure policy over every node; the cluster has converged when no managed pod's limit is
outside its deadband.

    .venv/bin/python -m bench.reconciler_bench [--nodes 200] [--pods 8000] [--burst 500]

Needs the control-plane binaries (`make control-plane`). Takes several minutes.
"""

import argparse
import asyncio
import gc
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from app.config import Settings
from app.kube.config import async_api_client
from app.pods import booked_cpu_m, pod_info_from_dict
from app.policy import NodeInput, compute_node
from app.selection import ineligibility
from devcluster import ControlPlane, locate_binaries
from devcluster.binaries import kubernetes_version
from devcluster.controlplane import free_port
from devcluster.nodes import simulated_node
from reconciler.cache import CacheFeed, ClusterCache
from reconciler.kubeapi import KubeApi
from reconciler.watches import Reflector

REPO = Path(__file__).resolve().parents[1]
MANAGED_NAMESPACES = 4
UNMANAGED_NAMESPACES = 12
CREATE_CONCURRENCY = 48
CONFIG_SPEC = {
    "dryRun": False,
    # The benchmark measures the reconciler, not the configured politeness towards the
    # API server: the client budget is raised well above what this machine can serve.
    "rateLimits": {"perNodePatchesPerSecond": 50, "clientQPS": 2000, "clientBurst": 4000},
}


class Oracle:
    """A watch-fed cache in this process and the pure policy: which pods still need a patch.

    Only nodes that changed since the last check are recomputed, so checking often does
    not steal much CPU from the processes being measured.
    """

    def __init__(self) -> None:
        self.cache = ClusterCache(listener=self)
        self._dirty: set[str] = set()
        self._pending: dict[str, int] = {}

    def node_dirty(self, node: str, *, prompt: bool) -> None:
        self._dirty.add(node)

    def node_removed(self, node: str) -> None:
        self._pending.pop(node, None)

    def settings_changed(self, settings: Settings) -> None:
        self._dirty.update(self.cache.node_names())

    def pending(self) -> int:
        for name in self._dirty:
            self._pending[name] = self._pending_on(name)
        self._dirty.clear()
        return sum(self._pending.values())

    def _pending_on(self, name: str) -> int:
        cache = self.cache
        node = cache.nodes.get(name)
        if node is None:
            return 0
        pods = cache.pods_on(name)
        managed = [
            pod
            for pod in pods
            if ineligibility(
                cache.settings,
                pod,
                namespace_labels=cache.namespaces.get(pod.namespace),
                node=node,
                vpas=(),
            )
            is None
        ]
        result = compute_node(
            NodeInput(
                name=name,
                allocatable_m=node.allocatable_m,
                booked_m=booked_cpu_m(pods),
                pods=managed,
            ),
            cache.settings,
        )
        return sum(1 for pod in result.pods if pod.patch)

    def managed_limits(self) -> dict[str, int]:
        return {
            key: pod.limit_m
            for key, pod in self.cache.pods.items()
            if pod.namespace.startswith("managed-")
        }


def reflectors(api: KubeApi, cache: ClusterCache) -> list[Reflector]:
    def feed(apply: Any, kind: str) -> CacheFeed:
        return CacheFeed(apply=apply, keys=lambda: cache.keys(kind))

    return [
        Reflector(
            api=api,
            path="/apis/kube-headroom.dev/v1alpha1/headroomconfigs",
            handler=feed(cache.apply_config, "config"),
        ),
        Reflector(
            api=api, path="/api/v1/namespaces", handler=feed(cache.apply_namespace, "namespaces")
        ),
        Reflector(api=api, path="/api/v1/nodes", handler=feed(cache.apply_node, "nodes")),
        Reflector(
            api=api,
            path="/api/v1/pods",
            handler=feed(cache.apply_pod, "pods"),
            field_selector="spec.nodeName!=",
        ),
    ]


def pod_manifest(name: str, *, namespace: str, node: str, cpu_m: int, index: int) -> dict[str, Any]:
    """A pod of realistic size (~5 KB of JSON once the API server has filled it in)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": f"svc-{index % 97}",
                "app.kubernetes.io/instance": f"svc-{index % 97}-prod",
                "app.kubernetes.io/version": "1.4.2",
                "team": f"team-{index % 13}",
            },
            "annotations": {"example.com/build": f"{index:08x}" * 4},
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": f"registry.example/svc-{index % 97}:1.4.2",
                    "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": "256Mi"}},
                    "env": [
                        {"name": f"SETTING_{i}", "value": f"value-{i}-{index}"} for i in range(12)
                    ],
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
                }
            ],
            "volumes": [{"name": "config", "emptyDir": {}}],
        },
    }


async def create_all(api: KubeApi, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def worker() -> None:
        while not queue.empty():
            path, body = queue.get_nowait()
            for _ in range(5):
                response = await api.request("POST", path, body=body)
                if response.ok or response.code == 409:
                    break
                await asyncio.sleep(0.5)
            else:
                raise RuntimeError(f"cannot create {path}: {response.message}")

    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class ReconcilerProcess:
    def __init__(self, *, kubeconfig: Path, log: Path) -> None:
        self.metrics_port = free_port()
        self.log = log
        self.started = time.time()
        with log.open("wb") as handle:
            self.popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "reconciler.main",
                    f"--kubeconfig={kubeconfig}",
                    "--metrics-secure=false",
                    f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                    "--health-probe-bind-address=0",
                ],
                cwd=REPO,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )

    def synced_after(self) -> float | None:
        start = synced = None
        for line in self.log.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == "starting":
                start = entry["ts"]
            elif entry.get("msg") == "caches synced":
                synced = entry["ts"]
        if start is None or synced is None:
            return None
        return _seconds(synced) - _seconds(start)

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())

    def stop(self) -> None:
        self.popen.terminate()
        self.popen.wait(timeout=60)


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def counter(text: str, result: str) -> float:
    match = re.search(rf'^headroom_resizes_total{{result="{result}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def buckets(text: str) -> list[tuple[float, float]]:
    found = re.findall(
        r'^headroom_reconcile_duration_seconds_bucket{le="([^"]+)"} (\S+)$', text, re.M
    )
    return [(float(le), float(count)) for le, count in found]


def quantile(q: float, before: list[tuple[float, float]], after: list[tuple[float, float]]) -> str:
    """histogram_quantile over the increase between two scrapes (linear within a bucket)."""
    counts = [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]
    total = counts[-1][1]
    if total <= 0:
        return "n/a"
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for le, count in counts:
        if count >= rank:
            if le == float("inf"):
                return f">{lower_bound * 1000:.0f} ms"
            share = (rank - lower_count) / max(count - lower_count, 1e-9)
            return f"{(lower_bound + (le - lower_bound) * share) * 1000:.1f} ms"
        lower_bound, lower_count = le, count
    return "n/a"


async def until(predicate: Any, *, limit: float, interval: float = 0.5) -> None:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > limit:
            raise TimeoutError(f"not reached within {limit}s")
        await asyncio.sleep(interval)


def decode_cost(page: bytes, *, paused: bool) -> float:
    """Microseconds per pod to decode and strip one page of pods."""
    was_enabled = gc.isenabled()
    started = time.perf_counter()
    if paused:
        gc.disable()
    try:
        items = orjson.loads(page)["items"]
        records = [pod_info_from_dict(item) for item in items]
    finally:
        if was_enabled:
            gc.enable()
    elapsed = time.perf_counter() - started
    return elapsed / max(1, len(records)) * 1e6


async def run(args: argparse.Namespace, plane: ControlPlane, work: Path) -> None:
    client = await async_api_client(kubeconfig=str(plane.kubeconfig))
    api = KubeApi(client, timeout_seconds=60)
    rand = random.Random(7)  # noqa: S311 - reproducible workload
    report: list[tuple[str, str]] = []

    print("idle reconciler on an empty cluster ...", flush=True)
    idle = ReconcilerProcess(kubeconfig=plane.kubeconfig, log=work / "idle.log")
    await until(lambda: idle.synced_after() is not None, limit=60)
    await asyncio.sleep(2)
    idle_rss = rss_bytes(idle.popen.pid)
    idle.stop()

    print(f"creating {args.nodes} nodes and {args.pods} pods ...", flush=True)
    started = time.monotonic()
    nodes = [f"sim-{i:04d}" for i in range(args.nodes)]
    await create_all(
        api, [("/api/v1/nodes", simulated_node(n, cpu="64", pods="250")) for n in nodes]
    )
    namespaces = [f"managed-{i}" for i in range(MANAGED_NAMESPACES)] + [
        f"plain-{i}" for i in range(UNMANAGED_NAMESPACES)
    ]
    await create_all(
        api,
        [
            (
                "/api/v1/namespaces",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": ns,
                        "labels": {"kube-headroom.dev/mode": "managed"}
                        if ns.startswith("managed-")
                        else {},
                    },
                },
            )
            for ns in namespaces
        ],
    )
    pods = []
    for i in range(args.pods):
        ns = namespaces[i % len(namespaces)]
        node = nodes[i % len(nodes)]
        body = pod_manifest(
            f"p-{i:05d}", namespace=ns, node=node, cpu_m=rand.choice((100, 250, 500, 1000)), index=i
        )
        pods.append((f"/api/v1/namespaces/{ns}/pods", body))
    await create_all(api, pods)
    await create_all(
        api,
        [
            (
                "/apis/kube-headroom.dev/v1alpha1/headroomconfigs",
                {
                    "apiVersion": "kube-headroom.dev/v1alpha1",
                    "kind": "HeadroomConfig",
                    "metadata": {"name": "cluster"},
                    "spec": CONFIG_SPEC,
                },
            )
        ],
    )
    report.append(("cluster created", f"{time.monotonic() - started:.0f} s"))
    page = (await api.request("GET", "/api/v1/pods", query=[("limit", "500")])).body
    for label, paused in (("running", False), ("paused", True)):
        cost = statistics.median(decode_cost(page, paused=paused) for _ in range(5))
        report.append((f"decode+strip a page of 500 pods, GC {label}", f"{cost:.0f} us/pod"))

    oracle = Oracle()
    tasks = [asyncio.create_task(r.run()) for r in reflectors(KubeApi(client), oracle.cache)]
    await until(lambda: len(oracle.cache.pods) >= args.pods, limit=600)

    print("starting the reconciler ...", flush=True)
    process = ReconcilerProcess(kubeconfig=plane.kubeconfig, log=work / "reconciler.log")
    await until(lambda: process.synced_after() is not None, limit=300, interval=0.05)
    synced_rss = rss_bytes(process.popen.pid)
    cached = len(oracle.cache.pods)
    report.append(("initial sync (start to caches synced)", f"{process.synced_after():.2f} s"))
    await until(lambda: oracle.pending() == 0, limit=1800, interval=1.0)
    report.append(("first full convergence after start", f"{time.time() - process.started:.1f} s"))
    await asyncio.sleep(3)
    rss = rss_bytes(process.popen.pid)
    report.append(("reconciler RSS, empty cluster", f"{idle_rss / 2**20:.1f} MiB"))
    report.append((f"reconciler RSS, {cached} pods, at sync", f"{synced_rss / 2**20:.1f} MiB"))
    report.append(("reconciler RSS, after first convergence", f"{rss / 2**20:.1f} MiB"))
    report.append(("bytes per cached pod, at sync", f"{(synced_rss - idle_rss) / cached:,.0f}"))
    report.append(("bytes per cached pod, converged", f"{(rss - idle_rss) / cached:,.0f}"))

    before_limits = oracle.managed_limits()
    before = process.metrics()
    cpu_before = cpu_seconds(process.popen.pid)
    print(f"binding a burst of {args.burst} managed pods ...", flush=True)
    burst = []
    for i in range(args.burst):
        ns = f"managed-{i % MANAGED_NAMESPACES}"
        body = pod_manifest(
            f"burst-{i:04d}",
            namespace=ns,
            node=rand.choice(nodes),
            cpu_m=rand.choice((100, 250, 500, 1000)),
            index=i,
        )
        burst.append((f"/api/v1/namespaces/{ns}/pods", body))
    burst_started = time.monotonic()
    await create_all(api, burst)
    total = args.pods + args.burst
    await until(
        lambda: len(oracle.cache.pods) >= total and oracle.pending() == 0,
        limit=1800,
        interval=0.5,
    )
    burst_seconds = time.monotonic() - burst_started
    burst_cpu = cpu_seconds(process.popen.pid) - cpu_before
    after = process.metrics()
    after_limits = oracle.managed_limits()
    required = sum(1 for key, limit in after_limits.items() if before_limits.get(key, 0) != limit)
    outcomes = {
        r: counter(after, r) - counter(before, r)
        for r in ("ok", "conflict", "error", "quota-denied")
    }
    issued = sum(outcomes.values())
    report.append((f"burst of {args.burst} bindings to convergence", f"{burst_seconds:.1f} s"))
    report.append(("reconciler CPU during the burst", f"{burst_cpu:.1f} s"))
    breakdown = ", ".join(f"{r} {n:.0f}" for r, n in outcomes.items() if n)
    report.append(("resize patches issued during the burst", f"{issued:.0f} ({breakdown})"))
    report.append(("minimum the policy requires (pods changed)", f"{required}"))
    empty = [(le, 0.0) for le, _ in buckets(after)]
    for label, start in (("burst", buckets(before)), ("whole run", empty)):
        p50, p99 = (quantile(q, start, buckets(after)) for q in (0.5, 0.99))
        report.append((f"reconcile duration p50 / p99 ({label})", f"{p50} / {p99}"))

    process.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.close()  # type: ignore[no-untyped-call]

    width = max(len(label) for label, _ in report)
    print()
    for label, value in report:
        print(f"{label:<{width}}  {value}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reconciler_bench", description=__doc__)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=8000)
    parser.add_argument("--burst", type=int, default=500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="headroom-bench-") as tmp:
        work = Path(tmp)
        plane = ControlPlane(work_dir=work / "control-plane", bin_dir=locate_binaries(build=True))
        plane.start()
        try:
            rendered = subprocess.run(
                [
                    str(plane.bin_dir / "helm"),
                    "template",
                    "crds",
                    "chart/kube-headroom-crds",
                    f"--kube-version={kubernetes_version().lstrip('v')}",
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            plane.kubectl("apply", "-f", "-", input=rendered)
            plane.kubectl(
                "wait", "crd/headroomconfigs.kube-headroom.dev", "--for=condition=Established"
            )
            asyncio.run(run(args, plane, work))
        finally:
            plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
