"""Benchmark: what a tenant's latency-sensitive server gets under Headroom, under a static
limit and under no limit, on a real kubelet (containerd, runc, cgroup v2) in a qemu guest.

The node: one guest of 4 vCPUs with 1600m reserved for the node's daemons
(``kubeReserved``), so 2400m allocatable (at a 50% booking its slack must exceed the one
CPU the server can use), the default CPU manager policy; the local control plane;
Headroom's webhook and reconciler enforcing with every other setting at its default. In
the emulated guest the kubelet, containerd and the shims use about half a CPU, more while
pods start (every run prints what ran outside the pods): the reservation leaves them a
CPU beside every booking, so that what a neighbour receives measures the pods' limits,
not a node short of CPU for its own daemons.

The workload, exactly:

- **The server**: one container running ``probe serve``, requesting 250m (and 32Mi), one
  worker thread (``GOMAXPROCS=1``), so it never needs more than a CPU. Each
  request, a line ``10`` on a TCP connection, is answered once it has burnt 10 ms of the
  handling thread's own CPU time (``CLOCK_THREAD_CPUTIME_ID``): time spent throttled or
  waiting for a CPU does not count, so a request costs the same CPU in every case and only
  its wait differs. A line protocol rather than HTTP: in the emulated guest, Go's HTTP
  server and client cost more CPU per request than the work itself (measured: 28 ms of
  server CPU per 10 ms request).
- **The load**: ``probe load`` in another pod on the same node (requesting 100m, no
  limit; traffic goes over the guest's bridge, never its emulated network card), open
  loop: requests are sent on a fixed schedule whether or not earlier ones were answered,
  each on a connection of its own from a pool (opened when none is free), and each
  latency is counted from the request's scheduled instant (as wrk2 does), so a stalled
  server's queue shows in it. The schedule alternates one second at 30 requests per
  second with one second at 3, for ``--seconds`` (25). In the emulated guest a request
  costs the server about 18 ms of CPU in all (the 10 ms of work, then the guest's TCP
  stack and Go's runtime): with no limit, about 570m in the peak seconds, 2.3x the
  request, and 320m on average.
- **The limit modes**: ``static``, a limit of 500m (2x the request) in a namespace
  Headroom does not manage; ``no-limit``, no limit, same namespace; ``headroom``, no limit
  written, in a managed namespace, so the webhook seeds one and the reconciler keeps it
  at the node's slack.
- **The bookings** (the node's total requests, the server's and the load's included):
  ``none``, nothing else (350m booked, 15%); ``idle-50%``, two neighbours in an unmanaged
  namespace sleeping (booked, not used: what Headroom is built for); ``busy-90%``, two
  neighbours with no limit, each using exactly its request (``probe pace``: it spends its
  CPU a millisecond at a time and sleeps whenever it is ahead, so CPU it was denied it
  takes back as soon as it can run, and what it used over the run shows whether the node
  gave it its request; a neighbour limited to its request instead would lose a few
  percent to the emulated guest's late quota timers, whatever the server does).

Each round runs every booking and, within it, the three modes back to back; ``--rounds``
(5) rounds interleave them. Each run creates the server afresh and waits for its limit to
settle, then runs the load while sampling the server's ``cpu.max`` and CPU every 0.5 s,
and reads the ``cpu.stat`` of the server and of each neighbour before and after. Over a
whole run the server uses only what its requests cost, whatever it was allowed; its CPU
in the sampled intervals inside the peak seconds is what it got while asking for twice
its request.

Then the reaction under load (``--reaction-trials``, 10): the server alone under Headroom
(its limit near the node) and loaded as above; 5 s in, a busy neighbour (1500m, limited to
it, burning two CPUs) is bound to the node; the time from the binding to the server's
``cpu.max`` shrinking (``devcluster.latency``, with Headroom's and the kubelet's shares)
is as long as the neighbour may get less than its request. The server's latency before
the binding and after the shrink is printed beside it.

Then the weighted case (HeadroomConfig's ``spec.weights``; ``--weighted-only`` runs it
alone): **two CPU-hungry servers on the node**, each ``probe serve`` requesting 250m with
two worker threads (``GOMAXPROCS=2``, so each can use up to two CPUs), server A in a
PriorityClass of its own (``bench-critical``, value 1000) and server B in none. Each gets
its own ``probe load`` from the load pod, both started together, at 80 requests per second
for one second in four and 5 in the other three (``80@1,5@3``): with no limit each used
1.2 CPUs in its peak seconds (medians; 0.98 to 1.38 in single runs, both at once: more
than a CPU, less than the two it could use) and 0.36 over the whole run (about 15 ms of CPU
a request). The modes, back to back in each round:

- ``headroom``: both in the managed namespace, no weight rule (both weight 1);
- ``headroom-weighted``: the same with ``spec.weights: [{priorityClassName: bench-critical,
  weight: 4}]``;
- ``static``: a limit of 500m (2x the request) each, in the unmanaged namespace;
- ``no-limit``: no limit, in the unmanaged namespace.

Both Headroom modes run at ``minBurstFloor: "0"``, every other setting at its default, and
the case puts the config back to its defaults afterwards. Why: the floor gives every pod
at least ``min(floor, S/N)`` of the slack whatever its weight. With the default 1000m and
two pods, that is ``min(1000m, S/2)``: here S = 2400m - 600m booked (both servers and the
load) = 1800m, so 900m each, which is exactly each one's unweighted share. Under the
weight, A's share grows to 1800m x 4/5 = 1440m (ceiling 1690m) while B's falls to 360m,
below its 900m floor, so B keeps 1150m: the node's slack is then promised 1.3 times over,
and what the weight did is hard to tell from what the floor adds. At floor 0 the shares
are the weights' alone and add up to the slack: 1150m and 1150m without the weight, 1690m
and 610m with it; and with every weight 1 the floor changes nothing here (900m either
way), so ``headroom`` is Headroom as installed. Booking the node tight instead would make
the floor small too, but would bring the busy neighbours' CPU into the comparison.

Each run creates both servers together, waits until both limits have settled (and neither
moved while the other settled), predicts each managed server's ceiling from the node's
allocatable CPU and its bookings as the API lists them (``bench.tenant_weights``: the
formula written out from its contract, not Headroom's code) and reads each one's status
annotation (its weight and rule), then loads both while sampling both cgroups. For each
server it prints the predicted and the settled ``cpu.max``, the throttled ratio, its CPU in
the peak seconds and its p50/p99 (medians over the rounds), a table for the docs and the
criteria: A's ceiling is the predicted one within a quantum (10m) and its p99 is lower with
the weight than without; B still gets at least its request at its peaks; with no limit
each server wants more than a CPU. It adds about 3.5 minutes a round (measured: 10.5
minutes for ``--weighted-only --rounds 3 --seconds 20``, the guest's start included).

Prints every run, the medians per case with Headroom's ratios to static and to no limit, the
docs' table, the criteria and the reaction; draws one PNG per booking in ``--out``; then the
weighted case's runs, medians, table and criteria. The node is emulated (about 17x slower
than the host): only ratios between cases mean anything.

    make bench-tenant                                  # root; about 65 minutes
    make bench-tenant REALNODE_ARGS="--rounds 1 --seconds 10 --reaction-trials 1"
    make bench-tenant REALNODE_ARGS="--weighted-only --rounds 3 --seconds 20"

It runs in a network namespace of its own (``hack/realnode.sh --bench-tenant``, which the
make target runs): the guest's addresses exist only there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.apipaths import NODES, PODS
from app.core.labels import CONFIG_NAME, MODE_LABEL, STATUS_ANNOTATION
from app.core.pods import booked_cpu_m, pod_info_from_dict
from app.core.quantity import parse_cpu_millis
from bench.tenant_figures import (
    MODES,
    CpuStat,
    Reaction,
    Request,
    Results,
    Run,
    cases_table,
    criteria,
    markdown_table,
    parse_load,
    parse_phases,
    reaction_report,
    runs_table,
)
from bench.tenant_plot import draw
from bench.tenant_weights import (
    HEADROOM_MODES,
    WEIGHTED_MODES,
    ManagedPod,
    Policy,
    ServerRun,
    WeightedResults,
    WeightRule,
    predict_ceilings,
    weight_of,
    weighted_cases_table,
    weighted_criteria,
    weighted_markdown_table,
    weighted_runs_table,
)
from devcluster.guests import PROBE_IMAGE, Guest, NodeSpec
from devcluster.headroom import enforcing
from devcluster.kubeapi import KubeAPIError
from devcluster.kubepods import CGROUP_ROOT, container_cgroup, cpu_max_millis
from devcluster.latency import CeilingTrials, neighbour
from devcluster.realnodes import RealCluster, throwaway_cluster

REPO = Path(__file__).resolve().parents[1]
# Reserved as an operator reserves what a node's daemons use, here with a CPU to spare
# (see above). With 3 vCPUs and 600m reserved, the daemons and the pods booked to 90%
# wanted more than the guest had, and every neighbour got 72 to 91% of its request under
# each of the three limits. Not enforced as a cgroup weight: at that weight the emulated
# kubelet, starved under the 90% booking, took more than 5 minutes to delete a pod.
# A thread per vCPU: the unlimited pods' bursts need both host cores.
NODE = NodeSpec(
    name="realnode-1",
    index=1,
    cpus=4,
    memory_mib=2048,
    kubelet={"kubeReserved": {"cpu": "1600m"}},
    threads="multi",
)
MANAGED = "tenant-managed"
PLAIN = "tenant-plain"
NEIGHBOURS = "tenant-neighbours"
SERVER_REQUEST = 250
STATIC_LIMIT = 500
LOAD_REQUEST = 100
PORT = 8080
COST_MS = 10
PHASES = "30@1,3@1"
# name, the node's booked fraction, whether its neighbours use their requests (None: no
# neighbours)
BOOKINGS: tuple[tuple[str, float, bool | None], ...] = (
    ("none", 0.0, None),
    ("idle-50%", 0.5, False),
    ("busy-90%", 0.9, True),
)
REACTION_LEAD = 5.0
REACTION_NEIGHBOUR = 1500
REACTION_HOLD = 5.0
SAMPLE_SECONDS = 0.5
# The whole guest's CPU and its pods': what ran outside the pods is the difference.
NODE_STAT = "/sys/fs/cgroup/cpu.stat"
PODS_STAT = f"{CGROUP_ROOT}/cpu.stat"
SETTLE_SECONDS = 4.0
# The weighted case (see the docstring).
PRIORITY_CLASS = "bench-critical"
PRIORITY_VALUE = 1000
WEIGHT = 4
WEIGHT_RULES = (WeightRule(weight=WEIGHT, priority_class=PRIORITY_CLASS),)
WEIGHTED_FLOOR = "0"
WEIGHTED_GOMAXPROCS = 2
WEIGHTED_PHASES = "80@1,5@3"
WEIGHTED_STATIC_LIMIT = 2 * SERVER_REQUEST
# Each server and its PriorityClass.
WEIGHTED_SERVERS: tuple[tuple[str, str | None], ...] = (("A", PRIORITY_CLASS), ("B", None))
WEIGHTED_LABELS = {"A": f"A (`{PRIORITY_CLASS}`)", "B": "B (none)"}
QUANTUM = 10
CONFIG_RESOURCE = "headroomconfigs"


class BenchError(RuntimeError):
    """Something the benchmark waited for never came; the message says what."""


def _wait(check: Callable[[], bool], *, timeout: float, what: str, every: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise BenchError(f"timed out after {timeout}s waiting for {what}")


def server_pod(
    name: str,
    *,
    namespace: str,
    limit: int | None,
    gomaxprocs: int = 1,
    priority_class: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, dict[str, str]] = {
        "requests": {"cpu": f"{SERVER_REQUEST}m", "memory": "32Mi"}
    }
    if limit is not None:
        resources["limits"] = {"cpu": f"{limit}m"}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "server"}},
        "spec": {
            "nodeName": NODE.name,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "server",
                    "image": PROBE_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": ["serve", str(PORT)],
                    "env": [{"name": "GOMAXPROCS", "value": str(gomaxprocs)}],
                    "resources": resources,
                }
            ],
        },
    }
    if priority_class is not None:
        pod["spec"]["priorityClassName"] = priority_class
    return pod


def placed(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` bound to the node at creation."""
    pod["spec"].pop("schedulerName", None)
    pod["spec"]["nodeName"] = NODE.name
    return pod


@dataclass
class Bench:
    cluster: RealCluster
    seconds: float

    @property
    def guest(self) -> Guest:
        return self.cluster.guest(NODE.name)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.cluster.api.get(PODS.path(namespace=namespace, name=name))

    def create_running(self, pod: dict[str, Any]) -> dict[str, Any]:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.cluster.api.post(PODS.path(namespace=namespace), pod)
        return self.running(namespace, name)

    def running(self, namespace: str, name: str) -> dict[str, Any]:
        """The pod once it runs."""
        _wait(
            lambda: (self.pod(namespace, name) or {}).get("status", {}).get("phase") == "Running",
            timeout=300,
            what=f"{namespace}/{name} to run",
        )
        running = self.pod(namespace, name)
        assert running is not None
        return running

    def delete(self, namespace: str, name: str) -> None:
        self.cluster.api.request("DELETE", PODS.path(namespace=namespace, name=name))
        self.gone(namespace, name)

    def gone(self, namespace: str, name: str) -> None:
        _wait(lambda: self.pod(namespace, name) is None, timeout=300, what=f"{name} to be gone")

    def read(self, *paths: str) -> dict[str, str]:
        files = self.guest.read(*paths)
        missing = [p for p in paths if p not in files]
        if missing:
            raise BenchError(f"{', '.join(missing)} not in {NODE.name}")
        return files

    def settle(self, namespace: str, name: str) -> str:
        """Until the server's ``cpu.max`` holds its spec limit and the limit has not moved
        for SETTLE_SECONDS; the container's cgroup."""
        pod = self.pod(namespace, name)
        assert pod is not None
        path = f"{container_cgroup(pod, 'server')}/cpu.max"
        seen: list[tuple[float, str | None]] = []

        def settled() -> bool:
            current = self.pod(namespace, name) or {}
            limit = current["spec"]["containers"][0]["resources"].get("limits", {}).get("cpu")
            cpu_max = cpu_max_millis(self.read(path)[path])
            agreed = (limit is None and cpu_max is None) or (
                limit is not None and cpu_max == parse_cpu_millis(str(limit))
            )
            now = time.monotonic()
            if not agreed or (seen and seen[-1][1] != limit):
                seen.clear()
            if agreed:
                seen.append((now, limit))
            return bool(seen) and now - seen[0][0] >= SETTLE_SECONDS

        _wait(settled, timeout=120, what=f"{name}'s limit to settle")
        return path.rsplit("/", 1)[0]

    def start_load(self, server: str, seconds: float) -> tuple[subprocess.Popen[str], float]:
        """``probe load`` through ``kubectl exec`` in the load pod; its start instant."""
        process = self.spawn_load(server, seconds)
        return process, self.load_started(process)

    def spawn_load(
        self, server: str, seconds: float, phases: str = PHASES
    ) -> subprocess.Popen[str]:
        """``probe load`` through ``kubectl exec`` in the load pod, not waited for."""
        plane = self.cluster.plane
        return subprocess.Popen(
            [str(plane.tool("kubectl")), f"--kubeconfig={plane.kubeconfig}", "exec",
             "-n", NEIGHBOURS, "load", "--", "/probe", "load", server, str(COST_MS),
             f"{seconds:g}", phases],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def load_started(self, process: subprocess.Popen[str]) -> float:
        """The instant the load generator says it starts."""
        assert process.stdout is not None
        first = process.stdout.readline()
        started = time.time()
        if first.strip() != "start":
            process.kill()
            raise BenchError(f"the load generator did not start: {first!r} {process.stderr}")
        return started

    def finish_load(self, process: subprocess.Popen[str], seconds: float) -> list[Request]:
        out, err = process.communicate(timeout=seconds + 180)
        if process.returncode != 0:
            raise BenchError(f"the load generator failed ({process.returncode}): {err}")
        return parse_load("start\n" + out)

    def run(
        self, *, booking: str, mode: str, round: int, neighbours: Sequence[tuple[int, str]]
    ) -> Run:
        namespace = MANAGED if mode == "headroom" else PLAIN
        name = f"server-{mode}"
        limit = STATIC_LIMIT if mode == "static" else None
        pod = self.create_running(server_pod(name, namespace=namespace, limit=limit))
        server = f"{pod['status']['podIP']}:{PORT}"
        cgroup = self.settle(namespace, name)
        stats = [
            f"{cgroup}/cpu.stat",
            NODE_STAT,
            PODS_STAT,
            *(f"{path}/cpu.stat" for _, path in neighbours),
        ]
        before = self.read(*stats)
        read_before = time.monotonic()
        samples: list[tuple[float, int | None, int]] = []
        stop = threading.Event()

        def sample() -> None:
            limit, stat = f"{cgroup}/cpu.max", f"{cgroup}/cpu.stat"
            while not stop.is_set():
                asked = time.time()
                files = self.read(limit, stat)
                # The agent's answer is somewhere in the round trip: its middle.
                at = (asked + time.time()) / 2
                samples.append(
                    (at, cpu_max_millis(files[limit]), CpuStat.parse(files[stat]).usage_usec)
                )
                stop.wait(SAMPLE_SECONDS)

        sampler = threading.Thread(target=sample, daemon=True)
        process, started = self.start_load(server, self.seconds)
        sampler.start()
        requests = self.finish_load(process, self.seconds)
        after = self.read(*stats)
        measured = time.monotonic() - read_before
        stop.set()
        sampler.join()
        self.delete(namespace, name)
        delta = {path: CpuStat.parse(after[path]) - CpuStat.parse(before[path]) for path in stats}
        return Run(
            booking=booking,
            mode=mode,
            round=round,
            seconds=self.seconds,
            requests=requests,
            server=delta[stats[0]],
            measured=measured,
            outside_pods=delta[NODE_STAT] - delta[PODS_STAT],
            server_request=SERVER_REQUEST,
            neighbours=[(request, delta[f"{path}/cpu.stat"]) for request, path in neighbours],
            limits=[
                (at - started, millis) for at, millis, _ in samples if at - started <= self.seconds
            ],
            load=os.getloadavg()[0],
            usage=[(at - started, usage) for at, _, usage in samples],
            phases=parse_phases(PHASES),
        )

    def book(self, fraction: float, busy: bool | None, allocatable: int) -> list[tuple[int, str]]:
        """Two neighbours booking the node to ``fraction`` of ``allocatable`` (with the
        server's and the load's requests), each sleeping or, when ``busy``, using exactly
        its request; each one's request and container cgroup."""
        if busy is None:
            return []
        each = (round(fraction * allocatable) - SERVER_REQUEST - LOAD_REQUEST) // 2
        args = ("pace", str(each)) if busy else ("sleep",)
        placed_pods = []
        for index in range(2):
            pod = placed(
                neighbour(f"neighbour-{index}", namespace=NEIGHBOURS, cpu=f"{each}m", args=args)
            )
            running = self.create_running(pod)
            placed_pods.append((each, container_cgroup(running, "neighbour")))
        return placed_pods

    def unbook(self, neighbours: Sequence[tuple[int, str]]) -> None:
        for index in range(len(neighbours)):
            self.delete(NEIGHBOURS, f"neighbour-{index}")


def react(bench: Bench, trials: int) -> list[Reaction]:
    name = "server-reacting"
    pod = bench.create_running(server_pod(name, namespace=MANAGED, limit=None))
    server = f"{pod['status']['podIP']}:{PORT}"
    ceiling = CeilingTrials(
        plane=bench.cluster.plane,
        api=bench.cluster.api,
        guest=bench.guest,
        namespace=MANAGED,
        pod=name,
        container="server",
        neighbour_namespace=NEIGHBOURS,
        neighbour_cpu=f"{REACTION_NEIGHBOUR}m",
        neighbour_args=("burn", "2"),
        neighbour_limited=True,
        hold=REACTION_HOLD,
        timeout=120,
    )
    # Long enough for the lead, the neighbour's start (several seconds on this node) and
    # the hold.
    seconds = REACTION_LEAD + 15 + REACTION_HOLD
    reactions = []
    for index in range(trials):
        bench.settle(MANAGED, name)
        process, started = bench.start_load(server, seconds)
        time.sleep(REACTION_LEAD)
        trial = ceiling.trial()
        requests = bench.finish_load(process, seconds)
        shrunk = trial.bound + trial.shrink.total
        reactions.append(
            Reaction(
                trial=trial,
                before=[r for r in requests if started + r.scheduled < trial.bound],
                after=[r for r in requests if shrunk <= started + r.scheduled < trial.deleted],
            )
        )
        print(
            f"  reaction {index + 1}/{trials}: cpu.max shrank {trial.shrink.total:.2f}s "
            f"after the binding (kubelet {trial.shrink.kubelet:.2f}s)",
            flush=True,
        )
    bench.delete(MANAGED, name)
    return reactions


@dataclass
class WeightedCase:
    """Two CPU-hungry servers on the node, A in the PriorityClass a weight rule names and
    B in none, under each of WEIGHTED_MODES (see the module's docstring)."""

    bench: Bench
    allocatable: int

    def prepare(self) -> None:
        priority_class = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": PRIORITY_CLASS},
            "value": PRIORITY_VALUE,
            "globalDefault": False,
            "preemptionPolicy": "Never",
            "description": "make bench-tenant's weighted server",
        }
        self.bench.cluster.plane.kubectl("apply", "-f", "-", input=json.dumps(priority_class))

    def configure(self, spec: dict[str, Any]) -> None:
        """HeadroomConfig's ``spec`` merged with ``spec`` (None removes a field), and
        checked as stored: a field the CRD does not know would be dropped silently."""
        plane = self.bench.cluster.plane
        patch = json.dumps({"spec": spec})
        try:
            plane.kubectl("patch", CONFIG_RESOURCE, CONFIG_NAME, "--type=merge", "-p", patch)
        except subprocess.CalledProcessError as error:
            raise BenchError(
                f"HeadroomConfig refused the patch {patch}: {str(error.stderr).strip()}"
            ) from error
        stored = json.loads(plane.kubectl("get", CONFIG_RESOURCE, CONFIG_NAME, "-o", "json"))
        for key, value in spec.items():
            got = stored.get("spec", {}).get(key)
            if value is None and key == "weights" and got:
                raise BenchError(f"HeadroomConfig kept spec.weights after removing it: {got}")
            if value is not None and not _holds(got, value):
                raise BenchError(
                    f"HeadroomConfig stored spec.{key} as {got!r}, not {value!r} (patch {patch})"
                )

    def rules(self, mode: str) -> tuple[WeightRule, ...]:
        return WEIGHT_RULES if mode == "headroom-weighted" else ()

    def run(self, mode: str, round: int) -> list[ServerRun]:
        bench = self.bench
        headroom = mode in HEADROOM_MODES
        namespace = MANAGED if headroom else PLAIN
        limit = WEIGHTED_STATIC_LIMIT if mode == "static" else None
        if headroom:
            weights = [rule.spec() for rule in self.rules(mode)]
            self.configure({"minBurstFloor": WEIGHTED_FLOOR, "weights": weights or None})
        names = {server: f"server-{server.lower()}-{mode}" for server, _ in WEIGHTED_SERVERS}
        # Both posted before either is waited for: the node's bookings move once.
        for server, priority_class in WEIGHTED_SERVERS:
            pod = server_pod(
                names[server],
                namespace=namespace,
                limit=limit,
                gomaxprocs=WEIGHTED_GOMAXPROCS,
                priority_class=priority_class,
            )
            bench.cluster.api.post(PODS.path(namespace=namespace), pod)
        pods = {server: bench.running(namespace, name) for server, name in names.items()}
        cgroups = self.settle(namespace, list(names.values()))
        settled = dict(zip(names, cgroups.values(), strict=True))
        maxes = bench.read(*(f"{cgroup}/cpu.max" for cgroup in settled.values()))
        ceilings = {s: cpu_max_millis(maxes[f"{c}/cpu.max"]) for s, c in settled.items()}
        predicted, slack = self.predict(mode) if headroom else ({}, None)
        annotations = {
            server: self.annotation(namespace, name) if headroom else {}
            for server, name in names.items()
        }
        stats = [f"{cgroup}/cpu.stat" for cgroup in settled.values()]
        every = [*stats, NODE_STAT, PODS_STAT]
        before = bench.read(*every)
        read_before = time.monotonic()
        samples: dict[str, list[tuple[float, int | None, int]]] = {s: [] for s in settled}
        stop = threading.Event()

        def sample() -> None:
            paths = [f"{c}/{f}" for c in settled.values() for f in ("cpu.max", "cpu.stat")]
            while not stop.is_set():
                asked = time.time()
                files = bench.read(*paths)
                at = (asked + time.time()) / 2
                for server, cgroup in settled.items():
                    samples[server].append(
                        (
                            at,
                            cpu_max_millis(files[f"{cgroup}/cpu.max"]),
                            CpuStat.parse(files[f"{cgroup}/cpu.stat"]).usage_usec,
                        )
                    )
                stop.wait(SAMPLE_SECONDS)

        sampler = threading.Thread(target=sample, daemon=True)
        # Both generators spawned before either is waited for, so their peaks coincide.
        processes = {
            server: bench.spawn_load(
                f"{pods[server]['status']['podIP']}:{PORT}", bench.seconds, WEIGHTED_PHASES
            )
            for server in names
        }
        started = {server: bench.load_started(process) for server, process in processes.items()}
        sampler.start()
        requests = {
            server: bench.finish_load(process, bench.seconds)
            for server, process in processes.items()
        }
        after = bench.read(*every)
        measured = time.monotonic() - read_before
        stop.set()
        sampler.join()
        for name in names.values():
            bench.cluster.api.request("DELETE", PODS.path(namespace=namespace, name=name))
        for name in names.values():
            bench.gone(namespace, name)
        delta = {path: CpuStat.parse(after[path]) - CpuStat.parse(before[path]) for path in every}
        found = []
        for server, stat in zip(settled, stats, strict=True):
            start = started[server]
            fields = annotations[server]
            annotated = bool(fields)
            found.append(
                ServerRun(
                    server=server,
                    run=Run(
                        booking="two-servers",
                        mode=mode,
                        round=round,
                        seconds=bench.seconds,
                        requests=requests[server],
                        server=delta[stat],
                        measured=measured,
                        outside_pods=delta[NODE_STAT] - delta[PODS_STAT],
                        server_request=SERVER_REQUEST,
                        limits=[
                            (at - start, millis)
                            for at, millis, _ in samples[server]
                            if at - start <= bench.seconds
                        ],
                        load=os.getloadavg()[0],
                        usage=[(at - start, usage) for at, _, usage in samples[server]],
                        phases=parse_phases(WEIGHTED_PHASES),
                    ),
                    settled=ceilings[server],
                    predicted=predicted.get(names[server]),
                    weight=int(fields.get("weight", 1)) if annotated else None,
                    weight_rule=fields.get("weightRule") if annotated else None,
                    slack=slack,
                )
            )
        return found

    def settle(self, namespace: str, names: Sequence[str]) -> dict[str, str]:
        """Until every server's limit has settled (``Bench.settle``) and none moved while
        the others settled; each one's container cgroup."""
        for _ in range(5):
            cgroups, limits = {}, {}
            for name in names:
                cgroups[name] = self.bench.settle(namespace, name)
                limits[name] = self.limit(namespace, name)
            if all(self.limit(namespace, name) == limits[name] for name in names):
                return cgroups
        raise BenchError(f"the limits of {', '.join(names)} kept moving")

    def limit(self, namespace: str, name: str) -> str | None:
        pod = self.bench.pod(namespace, name) or {}
        limit = pod["spec"]["containers"][0]["resources"].get("limits", {}).get("cpu")
        return None if limit is None else str(limit)

    def annotation(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.bench.pod(namespace, name) or {}
        text = pod.get("metadata", {}).get("annotations", {}).get(STATUS_ANNOTATION)
        return {} if text is None else dict(json.loads(text))

    def predict(self, mode: str) -> tuple[dict[str, int], int]:
        """Each managed pod's ceiling by the formula, from the node's bookings now, and
        the node's slack."""
        listed = self.bench.cluster.api.get(PODS.path(), fieldSelector=f"spec.nodeName={NODE.name}")
        pods = (listed or {}).get("items", [])
        infos = [pod_info_from_dict(pod) for pod in pods]
        booked = booked_cpu_m(infos)
        managed = [
            ManagedPod(
                name=info.name,
                request=info.facts.request_m,
                weight=weight_of(pod, self.rules(mode))[0],
            )
            for pod, info in zip(pods, infos, strict=True)
            if info.namespace == MANAGED and not info.terminal and info.facts.request_m > 0
        ]
        policy = Policy(floor=parse_cpu_millis(WEIGHTED_FLOOR))
        return (
            predict_ceilings(
                allocatable=self.allocatable, booked=booked, pods=managed, policy=policy
            ),
            self.allocatable - booked,
        )


def _holds(stored: Any, wanted: Any) -> bool:
    """Whether ``stored`` has everything ``wanted`` has (defaults the API added aside)."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(_holds(stored.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(wanted)
            and all(_holds(s, w) for s, w in zip(stored, wanted, strict=True))
        )
    return bool(stored == wanted)


def weighted(bench: Bench, *, rounds: int, allocatable: int) -> WeightedResults:
    case = WeightedCase(bench=bench, allocatable=allocatable)
    case.prepare()
    results = WeightedResults()
    try:
        for round_ in range(1, rounds + 1):
            for mode in WEIGHTED_MODES:
                found = case.run(mode, round_)
                results.runs.extend(found)
                for line in weighted_runs_table(WeightedResults(found)).splitlines()[1:]:
                    print(line, flush=True)
    finally:
        # Back to the defaults the other cases run under.
        case.configure({"minBurstFloor": None, "weights": None})
    return results


def weighted_report(results: WeightedResults, *, allocatable: int) -> None:
    print(
        f"\ntwo servers by weight on {NODE.name} ({allocatable}m allocatable): each requests "
        f"{SERVER_REQUEST}m, GOMAXPROCS={WEIGHTED_GOMAXPROCS}, load {WEIGHTED_PHASES} "
        f"requests/s of {COST_MS} ms; A in PriorityClass {PRIORITY_CLASS}, B in none; "
        f"Headroom at minBurstFloor {WEIGHTED_FLOOR!r}, weights "
        f"{[rule.spec() for rule in WEIGHT_RULES]} under headroom-weighted; static "
        f"{WEIGHTED_STATIC_LIMIT}m"
    )
    print("\nevery run (weight: from the status annotation; predicted: by the formula):")
    print(weighted_runs_table(results))
    rounds = len({r.round for r in results.runs})
    print(f"\nmedians of {rounds} rounds:")
    print(weighted_cases_table(results))
    print("\nfor the docs (What Headroom buys, by weight):")
    print(weighted_markdown_table(results, labels=WEIGHTED_LABELS))
    print("\ncriteria (by weight):")
    rule = "spec.weights[0]"
    for criterion in weighted_criteria(
        results, favoured="A", other="B", weight=WEIGHT, rule=rule, quantum=QUANTUM
    ):
        print(f"  [{'met' if criterion.met else 'NOT met'}] {criterion.text}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of every case")
    parser.add_argument("--seconds", type=float, default=25.0, help="each run's load")
    parser.add_argument("--reaction-trials", type=int, default=10)
    parser.add_argument(
        "--out", type=Path, default=REPO / "_artifacts" / "bench-tenant", help="the pictures"
    )
    parser.add_argument(
        "--weighted-only",
        action="store_true",
        help="only the weighted case (two servers, one favoured by a weight rule)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds < 4 or args.reaction_trials < 0:
        parser.error("--rounds must be at least 1, --seconds at least 4, trials at least 0")
    with throwaway_cluster((NODE,), prefix="headroom-bench-tenant-") as cluster:
        print(cluster.startup(), flush=True)
        plane = cluster.plane
        node = cluster.api.get(NODES.path(name=NODE.name)) or {}
        allocatable = parse_cpu_millis(str(node["status"]["allocatable"]["cpu"]))
        with enforcing(plane, cluster.work_dir / "headroom"):
            for namespace in (MANAGED, PLAIN, NEIGHBOURS):
                plane.kubectl("create", "namespace", namespace)
            plane.kubectl("label", "namespace", MANAGED, f"{MODE_LABEL}=managed")
            bench = Bench(cluster=cluster, seconds=args.seconds)
            load = neighbour("load", namespace=NEIGHBOURS, cpu=f"{LOAD_REQUEST}m")
            bench.create_running(placed(load))
            results = Results()
            reactions: list[Reaction] = []
            if not args.weighted_only:
                for round_ in range(1, args.rounds + 1):
                    for booking, fraction, busy in BOOKINGS:
                        neighbours = bench.book(fraction, busy, allocatable)
                        for mode in MODES:
                            run = bench.run(
                                booking=booking, mode=mode, round=round_, neighbours=neighbours
                            )
                            results.runs.append(run)
                            print(runs_table(Results([run])).splitlines()[1], flush=True)
                        bench.unbook(neighbours)
                reactions = react(bench, args.reaction_trials) if args.reaction_trials else []
            by_weight: WeightedResults | None = None
            failure: Exception | None = None
            try:
                by_weight = weighted(bench, rounds=args.rounds, allocatable=allocatable)
            except (BenchError, KubeAPIError, subprocess.CalledProcessError) as error:
                if args.weighted_only:
                    raise
                # The cases above are printed whatever becomes of this one.
                failure = error
        if not args.weighted_only:
            report(results, reactions, allocatable=allocatable, rounds=args.rounds, out=args.out)
        if by_weight is None:
            print(f"\nthe weighted case failed: {failure}")
            return 1
        weighted_report(by_weight, allocatable=allocatable)
        return 0


def report(
    results: Results,
    reactions: Sequence[Reaction],
    *,
    allocatable: int,
    rounds: int,
    out: Path,
) -> None:
    """The bookings' cases and the reaction, as the benchmark printed them before the
    weighted case."""
    print(f"\nnode {NODE.name}: {NODE.cpus} vCPUs, {allocatable}m allocatable")
    print("\nevery run (p50/p99/p99.9 of the load's requests; cores: the server's CPU):")
    print(runs_table(results))
    print(f"\nmedians of {rounds} rounds:")
    print(cases_table(results))
    print("\nfor the docs (What Headroom buys):")
    print(markdown_table(results))
    print("\ncriteria:")
    for criterion in criteria(results, busy="busy-90%", calm=("none", "idle-50%")):
        print(f"  [{'met' if criterion.met else 'NOT met'}] {criterion.text}")
    if reactions:
        print("\nreaction under load:")
        print(reaction_report(reactions, neighbour_millis=REACTION_NEIGHBOUR))
    print("\npictures:")
    for booking, _, _ in BOOKINGS:
        path = out / f"tenant-{booking.replace('%', '')}.png"
        print(
            "  "
            + str(
                draw(
                    results,
                    booking,
                    path,
                    request_millis=SERVER_REQUEST,
                    node_millis=allocatable,
                )
            )
        )


if __name__ == "__main__":
    raise SystemExit(main())
