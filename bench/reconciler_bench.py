"""Benchmark the reconciler on a simulated cluster at the default write budget.

Starts the real control plane (etcd, kube-apiserver, controller manager, scheduler, KWOK)
with `--nodes` simulated 64-core nodes and `--pods` pods, a quarter of them in managed
namespaces and none with a CPU limit yet, applies a HeadroomConfig that only turns
enforcing on (clientQPS 50, clientBurst 100, perNodePatchesPerSecond 10: the defaults),
then runs the real `headroom-reconciler` as a subprocess and prints:

- initial sync (process start to caches synced, from its own log);
- first full convergence, and a burst of `--burst` bindings to convergence (timed from the
  first binding's creation), each as a ratio to its physical limit, (resizes needed -
  clientBurst) / clientQPS + debounce, and to the looser resizes / clientQPS + debounce
  that leaves the burst credit out;
- when every changed pod of each phase was fully explained (its annotation and event
  written), as a ratio to the explanation lane's physical limit: 2 writes per changed pod
  past explanationBurst at explanationQPS, plus the debounce, and never before the
  resizes' own limit;
- the writes of each phase by kind, from the API server's audit log, and the resizes
  against the policy's minimum (pods whose limit had to change);
- writes during 30 s of steady state;
- reconciler CPU seconds per converged pod, its resident memory and bytes per cached pod
  (converged: at the end of the steady window);
- the machine's load while each phase ran (1-minute load average and busy CPU share).

Convergence is judged independently: this process keeps its own watch-fed cache and runs
the pure policy over every node; the cluster has converged when no managed pod's limit is
outside its deadband.

    .venv/bin/python -m bench.reconciler_bench [--nodes 200] [--pods 8000] [--burst 500]
    .venv/bin/python -m bench.reconciler_bench --nodes 1000 --pods 30000 --burst 2000

Needs the control-plane binaries (`make control-plane`). Takes several minutes.
`--profile FILE` runs the reconciler under cProfile and prints its hottest functions;
`--reconciler-root DIR` runs the reconciler of another checkout, to compare versions.
"""

import argparse
import asyncio
import gc
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from app.core import apipaths
from app.core.config import Settings
from app.core.pods import decode_pod, pod_info
from app.io.http import KubeHttp, Request
from app.io.kubeconfig import async_api_client
from app.io.reflector import DEFAULT_PAGE_SIZE, cache_reflectors
from devcluster import ControlPlane, locate_binaries
from devcluster.binaries import kubernetes_version
from devcluster.nodes import simulated_node
from devcluster.oracle import Oracle
from devcluster.ports import free_port
from devcluster.timestamps import epoch_seconds

REPO = Path(__file__).resolve().parents[1]
MANAGED_SHARE = 4
NAMESPACES = 16
CREATE_CONCURRENCY = 48
STEADY_SECONDS = 30.0
# The explanations of a phase are complete when the reconciler has written nothing for
# this long.
QUIET_SECONDS = 5.0
CONFIG_SPEC: dict[str, Any] = {"dryRun": False}


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


async def create_all(
    api: KubeHttp, items: Sequence[tuple[str, dict[str, Any]]]
) -> list[tuple[float, dict[str, Any]]]:
    """Create every object; when each was created (wall clock), in that order."""
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)
    created: list[tuple[float, dict[str, Any]]] = []

    async def worker() -> None:
        while not queue.empty():
            path, body = queue.get_nowait()
            for _ in range(5):
                response = await api.request(Request("POST", path, body))
                if response.ok or response.code == 409:
                    created.append((time.time(), body))
                    break
                await asyncio.sleep(0.5)
            else:
                raise RuntimeError(f"cannot create {path}: {response.message}")

    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))
    return created


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sockets(pid: int) -> int:
    """Sockets the process holds: its listeners, watches and pooled connections."""
    fds = Path(f"/proc/{pid}/fd")
    return sum(1 for fd in fds.iterdir() if os.readlink(fd).startswith("socket:"))


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class LoadMeter:
    """The machine's load over a phase: mean 1-minute load average and busy CPU share."""

    def __init__(self) -> None:
        self._samples: list[float] = []
        self._busy, self._total = _cpu_times()

    def sample(self) -> None:
        self._samples.append(float(Path("/proc/loadavg").read_text().split()[0]))

    def report(self) -> str:
        busy, total = _cpu_times()
        share = (busy - self._busy) / max(1, total - self._total)
        mean = statistics.mean(self._samples) if self._samples else float("nan")
        return f"load {mean:.1f}, CPU {share:.0%} busy ({os.cpu_count()} cores)"


def _cpu_times() -> tuple[int, int]:
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class ReconcilerProcess:
    def __init__(
        self, *, kubeconfig: Path, log: Path, root: Path = REPO, profile: Path | None = None
    ) -> None:
        self.metrics_port = free_port()
        self.log = log
        self.started = time.time()
        prefix = [sys.executable]
        if profile is not None:
            prefix += ["-m", "cProfile", "-o", str(profile)]
        with log.open("wb") as handle:
            self.popen = subprocess.Popen(
                [
                    *prefix,
                    "-m",
                    "reconciler.main",
                    f"--kubeconfig={kubeconfig}",
                    "--metrics-secure=false",
                    f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                    "--health-probe-bind-address=0",
                ],
                cwd=root,
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
        return epoch_seconds(synced) - epoch_seconds(start)

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())

    def stop(self) -> None:
        self.popen.terminate()
        self.popen.wait(timeout=60)


@dataclass(frozen=True)
class Write:
    kind: str
    received: float
    # namespace/name of the object written.
    key: str


# What explains a limit: the pod's annotation and its CPULimitAdjusted event.
EXPLANATIONS = frozenset({"annotation", "event"})
# Everything else that writes during a run: this benchmark and the control plane.
BENCH_AGENT = "headroom-bench"
_NOT_RECONCILER = (BENCH_AGENT, "kwok", "kube-controller-manager", "kube-scheduler", "kubectl")


class Audit:
    """The reconciler's writes, read from the API server's audit log as it grows."""

    def __init__(self, plane: ControlPlane) -> None:
        self._path = plane.audit_log
        self._offset = 0
        self.writes: list[Write] = []

    def refresh(self) -> None:
        with self._path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            event = orjson.loads(line)
            agent = str(event.get("userAgent", ""))
            if event.get("stage") != "ResponseComplete" or agent.startswith(_NOT_RECONCILER):
                continue
            ref = event.get("objectRef") or {}
            kind = _kind(event.get("verb", ""), ref)
            key = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
            self.writes.append(Write(kind, epoch_seconds(event["requestReceivedTimestamp"]), key))

    def between(self, start: float, end: float) -> Counter[str]:
        self.refresh()
        return Counter(w.kind for w in self.writes if start <= w.received < end)

    def resized_more_than_once(self, start: float, end: float) -> dict[str, list[float]]:
        """Pods resized more than once between `start` and `end`: their resize times."""
        self.refresh()
        times: dict[str, list[float]] = {}
        for w in self.writes:
            if w.kind == "resize" and start <= w.received < end:
                times.setdefault(w.key, []).append(w.received)
        return {key: sorted(found) for key, found in times.items() if len(found) > 1}

    def last_after(self, start: float, kinds: frozenset[str] | None = None) -> float | None:
        """When the last write (of one of `kinds`, when given) since `start` was received."""
        self.refresh()
        times = [
            w.received
            for w in self.writes
            if w.received >= start and (kinds is None or w.kind in kinds)
        ]
        return max(times, default=None)


def _kind(verb: str, ref: dict[str, Any]) -> str:
    resource, sub = ref.get("resource", ""), ref.get("subresource", "")
    if sub == "resize":
        return "resize"
    if resource == "events":
        return "event"
    if resource == "pods" and verb == "patch":
        return "annotation"
    if sub == "status":
        return "config status"
    return f"{verb} {resource}/{sub}".rstrip("/")


def twice_text(
    audit: Audit,
    landed: Sequence[tuple[float, dict[str, Any]]],
    *,
    since: float,
    end: float,
    oracle: Oracle,
) -> str:
    """How many pods were resized more than once in a phase, and why: the bindings to their
    node that landed between their first and last resize."""
    again = audit.resized_more_than_once(since, end)
    if not again:
        return "0"
    by_node: dict[str, list[float]] = {}
    for created, body in landed:
        by_node.setdefault(body["spec"]["nodeName"], []).append(created)
    between = []
    for key, times in again.items():
        pod = oracle.cache.pods.get(key)
        bindings = by_node.get(pod.node_name, []) if pod is not None else []
        between.append(sum(1 for t in bindings if times[0] < t < times[-1]))
    gaps = [times[-1] - times[0] for times in again.values()]
    return (
        f"{len(again)}; their node got new bindings between the resizes for "
        f"{sum(1 for n in between if n)} of them; median {statistics.median(gaps):.1f} s "
        f"between first and last resize"
    )


def kinds_text(counts: Counter[str]) -> str:
    order = ("resize", "annotation", "event", "config status")
    parts = [f"{counts[k]} {k}" for k in order if counts[k]]
    parts += [f"{n} {k}" for k, n in counts.items() if k not in order]
    return f"{sum(counts.values())} ({', '.join(parts) or 'none'})"


def physical_limit(resizes: int, settings: Settings) -> float:
    """The fastest the write budget allows: resizes past the burst at clientQPS, plus the
    debounce before the first reconcile."""
    return max(0, resizes - settings.client_burst) / settings.client_qps + settings.debounce_seconds


def explanation_limit(resizes: int, settings: Settings) -> float:
    """The fastest every changed pod can be explained: an annotation and an event each,
    past the explanation burst at explanationQPS, and never before its resize."""
    writes = 2 * resizes
    own = max(0, writes - settings.explanation_burst) / settings.explanation_qps
    return max(own + settings.debounce_seconds, physical_limit(resizes, settings))


def explained_text(seconds: float, resizes: int, settings: Settings) -> str:
    limit = explanation_limit(resizes, settings)
    return (
        f"{seconds:.1f} s = {seconds / limit:.2f} x the explanation lane's physical limit "
        f"({limit:.1f} s for {2 * resizes} annotations and events)"
    )


def limits_text(seconds: float, resizes: int, settings: Settings) -> str:
    strict = physical_limit(resizes, settings)
    loose = resizes / settings.client_qps + settings.debounce_seconds
    return (
        f"{seconds:.1f} s = {seconds / strict:.2f} x physical limit ({strict:.1f} s for "
        f"{resizes} resizes); {seconds / loose:.2f} x without the burst credit ({loose:.1f} s)"
    )


async def until(
    predicate: Callable[[], bool],
    *,
    limit: float,
    interval: float = 0.5,
    meter: LoadMeter | None = None,
) -> None:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > limit:
            raise TimeoutError(f"not reached within {limit}s")
        if meter is not None:
            meter.sample()
        await asyncio.sleep(interval)


async def explanations_done(audit: Audit, since: float, *, limit: float) -> float:
    """When the reconciler's last write of a phase was received (quiet for a while)."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        last = audit.last_after(since)
        if last is not None and time.time() - last >= QUIET_SECONDS:
            return last
        await asyncio.sleep(1.0)
    raise TimeoutError("the reconciler kept writing")


async def paged_list_seconds(api: KubeHttp) -> tuple[float, int]:
    """Seconds to list every pod in pages, as the reflector does, without decoding them."""
    started = time.perf_counter()
    token, pages = "", 0
    while True:
        query = (("limit", str(DEFAULT_PAGE_SIZE)),) + ((("continue", token),) if token else ())
        body = (await api.request(Request("GET", apipaths.PODS.path(), query=query))).body
        pages += 1
        token = orjson.loads(body)["metadata"].get("continue") or ""
        if not token:
            return time.perf_counter() - started, pages


def decode_cost(page: bytes) -> float:
    """Microseconds per pod to decode and strip one page of pods (as the reflector does)."""
    items = orjson.loads(page)["items"]
    raws = [orjson.dumps(item) for item in items]
    gc.collect()
    started = time.perf_counter()
    records = [pod_info(decode_pod(raw)) for raw in raws]
    return (time.perf_counter() - started) / max(1, len(records)) * 1e6


async def run(args: argparse.Namespace, plane: ControlPlane, work: Path) -> list[tuple[str, str]]:
    api = KubeHttp(
        await async_api_client(kubeconfig=str(plane.kubeconfig)),
        timeout_seconds=60,
        user_agent=BENCH_AGENT,
    )
    rand = random.Random(7)  # noqa: S311 - reproducible workload
    report: list[tuple[str, str]] = []
    rate_limits = {
        "clientQPS": args.client_qps,
        "clientBurst": 2 * args.client_qps,
        "explanationQPS": args.client_qps,
        "explanationBurst": 2 * args.client_qps,
    }
    settings = Settings(
        dry_run=False,
        client_qps=args.client_qps,
        client_burst=2 * args.client_qps,
        explanation_qps=args.client_qps,
        explanation_burst=2 * args.client_qps,
    )
    audit = Audit(plane)

    print("idle reconciler on an empty cluster ...", flush=True)
    idle = ReconcilerProcess(
        kubeconfig=plane.kubeconfig, log=work / "idle.log", root=args.reconciler_root
    )
    await until(lambda: idle.synced_after() is not None, limit=60)
    await asyncio.sleep(2)
    idle_rss = rss_bytes(idle.popen.pid)
    idle.stop()

    print(f"creating {args.nodes} nodes and {args.pods} pods ...", flush=True)
    started = time.monotonic()
    nodes = [f"sim-{i:04d}" for i in range(args.nodes)]
    await create_all(
        api, [(apipaths.NODES.path(), simulated_node(n, cpu="64", pods="250")) for n in nodes]
    )
    managed_count = NAMESPACES // MANAGED_SHARE
    namespaces = [f"managed-{i}" for i in range(managed_count)] + [
        f"plain-{i}" for i in range(NAMESPACES - managed_count)
    ]
    await create_all(
        api,
        [
            (
                apipaths.NAMESPACES.path(),
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
        pods.append((apipaths.PODS.path(namespace=ns), body))
    await create_all(api, pods)
    await create_all(
        api,
        [
            (
                apipaths.HEADROOM_CONFIGS.path(),
                {
                    "apiVersion": apipaths.HEADROOM_CONFIGS.api_version,
                    "kind": "HeadroomConfig",
                    "metadata": {"name": "cluster"},
                    "spec": {**CONFIG_SPEC, "rateLimits": rate_limits},
                },
            )
        ],
    )
    report.append(("cluster created", f"{time.monotonic() - started:.0f} s"))
    listed, pages = await paged_list_seconds(api)
    report.append(
        (
            "paged list of every pod, API server and transfer alone",
            f"{listed:.2f} s = {listed / max(1, args.pods) * 1e6:.0f} us per pod ({pages} pages)",
        )
    )
    page = (await api.request(Request("GET", apipaths.PODS.path(), query=(("limit", "500"),)))).body
    cost = statistics.median(decode_cost(page) for _ in range(5))
    report.append(("decode+strip one pod from a page of 500", f"{cost:.0f} us"))

    oracle = Oracle()
    watch_api = KubeHttp(
        await async_api_client(kubeconfig=str(plane.kubeconfig)), user_agent=BENCH_AGENT
    )
    tasks = [
        asyncio.create_task(r.run())
        for r in cache_reflectors(api=watch_api, cache=oracle.cache).values()
    ]
    await until(lambda: len(oracle.cache.pods) >= args.pods, limit=900)
    await until(lambda: oracle.cache.config.present, limit=60)
    needed = oracle.pending()
    print(f"starting the reconciler ({needed} pods need a resize) ...", flush=True)

    meter = LoadMeter()
    process = ReconcilerProcess(
        kubeconfig=plane.kubeconfig,
        log=work / "reconciler.log",
        root=args.reconciler_root,
        profile=args.profile,
    )
    start_wall = process.started
    await until(lambda: process.synced_after() is not None, limit=300, interval=0.05, meter=meter)
    sync_load = meter.report()
    meter = LoadMeter()
    synced_rss = rss_bytes(process.popen.pid)
    cached = len(oracle.cache.pods)
    synced = process.synced_after() or 0.0
    report.append(
        (
            "initial sync (start to caches synced)",
            f"{synced:.2f} s = {synced / max(1, cached) * 1e6:.0f} us per cached pod",
        )
    )
    report.append(("  machine during sync", sync_load))
    await until(lambda: oracle.pending() == 0, limit=3600, interval=0.5, meter=meter)
    first = time.time() - start_wall
    first_cpu = cpu_seconds(process.popen.pid)
    report.append(("first full convergence after start", limits_text(first, needed, settings)))
    report.append(("  machine during first convergence", meter.report()))
    explained = await explanations_done(audit, start_wall, limit=3600)
    fully = audit.last_after(start_wall, EXPLANATIONS) or explained
    report.append(
        ("  fully explained after start", explained_text(fully - start_wall, needed, settings))
    )
    explained_cpu = cpu_seconds(process.popen.pid)
    first_writes = audit.between(start_wall, explained + 1)
    report.append(("  writes", kinds_text(first_writes)))
    report.append(
        ("reconciler CPU per converged pod", f"{first_cpu / max(1, needed) * 1000:.2f} ms")
    )
    report.append(
        (
            "  per write, until fully explained",
            f"{explained_cpu / max(1, first_writes.total()) * 1000:.2f} ms",
        )
    )
    steady_start = time.time()
    await asyncio.sleep(STEADY_SECONDS)
    steady = audit.between(steady_start, time.time())
    # Converged means settled: measured at the end of the steady window, once the wave's
    # idle connections have been closed.
    rss = rss_bytes(process.popen.pid)
    report.append(("reconciler RSS, empty cluster", f"{idle_rss / 2**20:.1f} MiB"))
    report.append((f"reconciler RSS, {cached} pods, at sync", f"{synced_rss / 2**20:.1f} MiB"))
    report.append(("reconciler RSS, converged", f"{rss / 2**20:.1f} MiB"))
    report.append(("  sockets open then", str(sockets(process.popen.pid))))
    report.append(("bytes per cached pod, at sync", f"{(synced_rss - idle_rss) / cached:,.0f}"))
    report.append(("bytes per cached pod, converged", f"{(rss - idle_rss) / cached:,.0f}"))
    report.append((f"writes in {STEADY_SECONDS:.0f} s of steady state", kinds_text(steady)))

    before_limits = oracle.managed_limits("managed-")
    cpu_before = cpu_seconds(process.popen.pid)
    meter = LoadMeter()
    print(f"binding a burst of {args.burst} pods ...", flush=True)
    burst = []
    for i in range(args.burst):
        ns = namespaces[i % len(namespaces)]
        body = pod_manifest(
            f"burst-{i:05d}",
            namespace=ns,
            node=rand.choice(nodes),
            cpu_m=rand.choice((100, 250, 500, 1000)),
            index=i,
        )
        burst.append((apipaths.PODS.path(namespace=ns), body))
    burst_started = time.time()
    landed = await create_all(api, burst)
    report.append(("  bindings created over", f"{max(t for t, _ in landed) - burst_started:.1f} s"))
    total = args.pods + args.burst
    await until(
        lambda: len(oracle.cache.pods) >= total and oracle.pending() == 0,
        limit=3600,
        interval=0.5,
        meter=meter,
    )
    burst_seconds = time.time() - burst_started
    burst_cpu = cpu_seconds(process.popen.pid) - cpu_before
    after_limits = oracle.managed_limits("managed-")
    required = sum(1 for key, limit in after_limits.items() if before_limits.get(key, 0) != limit)
    report.append(
        (
            f"burst of {args.burst} bindings to convergence",
            limits_text(burst_seconds, required, settings),
        )
    )
    report.append(("  machine during the burst", meter.report()))
    explained = await explanations_done(audit, burst_started, limit=3600)
    fully = audit.last_after(burst_started, EXPLANATIONS) or explained
    report.append(
        (
            "  fully explained after the burst",
            explained_text(fully - burst_started, required, settings),
        )
    )
    writes = audit.between(burst_started, explained + 1)
    report.append(("  writes", kinds_text(writes)))
    report.append(("  resize patches vs the policy's minimum", f"{writes['resize']} vs {required}"))
    report.append(
        (
            "  pods resized twice or more",
            twice_text(audit, landed, since=burst_started, end=explained + 1, oracle=oracle),
        )
    )
    report.append(
        ("  annotation patches vs resizes", f"{writes['annotation']} vs {writes['resize']}")
    )
    report.append(("  reconciler CPU during the burst", f"{burst_cpu:.1f} s"))

    process.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await watch_api.close()
    await api.close()
    if args.profile is not None:
        stats = pstats.Stats(str(args.profile))
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(25)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reconciler_bench", description=__doc__)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=8000)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument(
        "--client-qps",
        type=int,
        default=Settings().client_qps,
        help="clientQPS and explanationQPS (bursts twice that); the defaults: 50",
    )
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument(
        "--reconciler-root",
        type=Path,
        default=REPO,
        help="run the reconciler from this checkout (to compare another version)",
    )
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
            report = asyncio.run(run(args, plane, work))
        finally:
            plane.stop()
    width = max(len(label) for label, _ in report)
    print()
    for label, value in report:
        print(f"{label:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
