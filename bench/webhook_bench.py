"""Benchmark ``/mutate/pods`` over TLS with keep-alive: admissions/s, p50/p99, server CPU.

Starts the real ``headroom-webhook`` as a subprocess on 127.0.0.1, pointed at a stand-in
API server in this process that lists one managed namespace, an enforcing HeadroomConfig,
1,000 nodes Headroom manages and the reconciler's Lease, renewed every 2 s as a live
reconciler does, so every request takes the full path (cache look-ups, eligibility, the
birth limit's reach over every node the pod may land on, seeding, JSONPatch) and is
answered with a patch. Load comes from ``wrk`` (closed loop,
one thread, a Lua script for the POST body) when it is installed, else from an asyncio
httpx client, which is much slower than the server and so bounds the numbers; the output
says which one ran.

    .venv/bin/python -m bench.webhook_bench [--duration 10] [--concurrency 1 32] [--replicas 2]

With ``--replicas N`` it runs N webhook processes, each on its own port with its own load
generator and c/N of the connections, as N pods behind the webhook Service would be.
"""

import argparse
import asyncio
import contextlib
import datetime
import os
import re
import shutil
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml
from aiohttp import web

from app.core import apipaths
from certs.generate import generate_ca, generate_serving
from devcluster.ports import free_port

REPO = Path(__file__).resolve().parents[1]
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def admission_body() -> bytes:
    """A pod CREATE review of about 5.5 KB, like a typical Deployment's pod."""
    env = [{"name": f"SETTING_{i}", "value": f"value-{i}-" + "x" * 24} for i in range(54)]
    mounts = [{"name": f"vol-{i}", "mountPath": f"/etc/app/conf-{i}"} for i in range(6)]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "web-5d8f7c9b4-",
            "namespace": "bench",
            "labels": {"app": "web", "pod-template-hash": "5d8f7c9b4", "tier": "frontend"},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-5d8f7c9b4",
                    "uid": str(uuid.uuid4()),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/web:1.2.3",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": env,
                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                    "volumeMounts": mounts,
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                },
                {
                    "name": "proxy",
                    "image": "registry.example/proxy:4.5",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                },
            ],
            "volumes": [{"name": f"vol-{i}", "configMap": {"name": f"conf-{i}"}} for i in range(6)],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "status": {},
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "bench",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
        },
    }
    return orjson.dumps(review)


# -- a stand-in API server: lists for the cache, then quiet watches --------------------------

_NODES = 1000
_LEASES = apipaths.LEASES.path(namespace="kube-headroom-system")
# How often the stand-in renews the Lease, as the reconciler does.
_RENEW_SECONDS = 2.0


def _node(index: int) -> dict[str, Any]:
    name = f"node-{index}"
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name},
        },
        "status": {
            "allocatable": {"cpu": "16"},
            "nodeInfo": {"kubeletVersion": "v1.37.2", "operatingSystem": "linux"},
        },
    }


def _lease() -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "metadata": {"name": "kube-headroom-reconciler", "namespace": "kube-headroom-system"},
        "spec": {"holderIdentity": "bench", "leaseDurationSeconds": 15, "renewTime": now},
    }


_LISTS = {
    apipaths.NODES.path(): [_node(i) for i in range(_NODES)],
    apipaths.NAMESPACES.path(): [
        {"metadata": {"name": "bench", "labels": {"kube-headroom.dev/mode": "managed"}}}
    ],
    apipaths.RESOURCE_QUOTAS.path(): [],
    apipaths.LIMIT_RANGES.path(): [],
    apipaths.VERTICAL_POD_AUTOSCALERS.path(): [],
    apipaths.HEADROOM_CONFIGS.path(): [
        {"metadata": {"name": "cluster", "generation": 1}, "spec": {"dryRun": False}}
    ],
}


async def _collection(request: web.Request) -> web.StreamResponse:
    if request.query.get("watch") != "true":
        items = [_lease()] if request.path == _LEASES else _LISTS[request.path]
        return web.json_response({"metadata": {"resourceVersion": "1"}, "items": items})
    response = web.StreamResponse()
    await response.prepare(request)
    if request.path == _LEASES:
        with contextlib.suppress(ConnectionResetError):
            while True:
                await asyncio.sleep(_RENEW_SECONDS)
                await response.write(orjson.dumps({"type": "MODIFIED", "object": _lease()}) + b"\n")
    # Bookmarks, as a real API server sends them, keep the idle watch from being presumed dead.
    bookmark = orjson.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "1"}}})
    # The webhook closes its watches when it stops.
    with contextlib.suppress(ConnectionResetError):
        while True:
            await asyncio.sleep(20)
            await response.write(bookmark + b"\n")
    return response


async def start_api() -> tuple[web.AppRunner, int]:
    app = web.Application()
    for path in (*_LISTS, _LEASES):
        app.router.add_get(path, _collection)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


# -- the webhook process --------------------------------------------------------------------


@dataclass
class Server:
    process: asyncio.subprocess.Process
    port: int
    ca_file: Path

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def write_certs(workdir: Path) -> Path:
    now = datetime.datetime.now(datetime.UTC)
    ca = generate_ca(common_name="bench-ca", valid_for=datetime.timedelta(days=1), now=now)
    serving = generate_serving(
        ca=ca,
        dns_names=["localhost"],
        ip_addresses=["127.0.0.1"],
        valid_for=datetime.timedelta(days=1),
        now=now,
    )
    certs = workdir / "certs"
    certs.mkdir()
    (certs / "ca.crt").write_bytes(ca.cert_pem)
    (certs / "tls.crt").write_bytes(serving.cert_pem)
    (certs / "tls.key").write_bytes(serving.key_pem)
    return certs


async def start_minimal(certs: Path) -> Server:
    """The perf-facts ceiling handler, same stack, for a same-machine ratio."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.minimal_webhook", str(port), str(certs), cwd=REPO
    )
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    async with httpx.AsyncClient(verify=context) as client:
        for _ in range(200):
            try:
                await client.get(f"https://127.0.0.1:{port}/")
                return Server(process=process, port=port, ca_file=certs / "ca.crt")
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    process.kill()
    raise SystemExit("the minimal server did not start within 20s")


async def start_webhook(workdir: Path, api_port: int) -> Server:
    certs = write_certs(workdir)
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "bench", "cluster": {"server": f"http://127.0.0.1:{api_port}"}}
                ],
                "users": [{"name": "bench", "user": {"token": "bench"}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                "current-context": "bench",
            }
        )
    )
    port, probe = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "webhook.main",
        f"--bind-address=127.0.0.1:{port}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        "--metrics-secure=false",
        f"--health-probe-bind-address=127.0.0.1:{probe}",
        f"--cert-dir={certs}",
        f"--kubeconfig={kubeconfig}",
        "--log-level=warning",
        cwd=REPO,
    )
    async with httpx.AsyncClient() as client:
        for _ in range(200):
            try:
                if (await client.get(f"http://127.0.0.1:{probe}/readyz")).status_code == 200:
                    return Server(process=process, port=port, ca_file=certs / "ca.crt")
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    process.kill()
    raise SystemExit("the webhook did not become ready within 20s")


# -- load generators ------------------------------------------------------------------------


@dataclass
class Result:
    requests_per_second: float
    p50_ms: float
    p99_ms: float


_WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open(os.getenv("BENCH_BODY"), "rb")
wrk.body = f:read("*a")
f:close()
"""
_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


async def run_wrk(
    wrk: str, *, url: str, body_file: Path, concurrency: int, duration: int
) -> Result:
    script = body_file.with_suffix(".lua")
    script.write_text(_WRK_SCRIPT)
    process = await asyncio.create_subprocess_exec(
        wrk,
        "-t1",
        f"-c{concurrency}",
        f"-d{duration}s",
        "--latency",
        "-s",
        str(script),
        url,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "BENCH_BODY": str(body_file)},
    )
    output = (await process.communicate())[0].decode()
    if process.returncode != 0 or "Non-2xx" in output or "Socket errors" in output:
        raise SystemExit(f"wrk reported errors:\n{output}")

    def percentile(label: str) -> float:
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", output, re.MULTILINE)
        if match is None:
            raise SystemExit(f"cannot read the {label}th percentile from wrk:\n{output}")
        return float(match.group(1)) * _UNITS_MS[match.group(2)]

    rate = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.MULTILINE)
    if rate is None:
        raise SystemExit(f"cannot read Requests/sec from wrk:\n{output}")
    return Result(float(rate.group(1)), percentile("50"), percentile("99"))


async def run_httpx(
    *, url: str, body: bytes, ca_file: Path, concurrency: int, duration: int
) -> Result:
    latencies: list[float] = []
    context = ssl.create_default_context(cafile=str(ca_file))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(verify=context, limits=limits, timeout=10) as client:
        deadline = time.perf_counter() + duration

        async def worker() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                reply = await client.post(url, content=body, headers=headers)
                reply.raise_for_status()
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100)
    return Result(len(latencies) / elapsed, cuts[49] * 1000, cuts[98] * 1000)


async def check_patch(server: Server, body: bytes) -> None:
    context = ssl.create_default_context(cafile=str(server.ca_file))
    async with httpx.AsyncClient(verify=context) as client:
        reply = await client.post(
            f"https://127.0.0.1:{server.port}/mutate/pods",
            content=body,
            headers={"content-type": "application/json"},
        )
    response: dict[str, Any] = reply.json()["response"]
    if response.get("patchType") != "JSONPatch":
        raise SystemExit(f"expected a patched admission, got {response}")


async def measure(
    servers: Sequence[Server],
    *,
    wrk: str | None,
    body: bytes,
    body_file: Path,
    concurrency: int,
    duration: int,
) -> tuple[Result, float]:
    """One closed-loop run over every replica at once, the connections split between them.

    The rate is the sum; the latencies are the worst replica's. Also returns the servers'
    CPU seconds per request.
    """
    share = max(1, concurrency // len(servers))

    async def one(server: Server) -> Result:
        url = f"https://127.0.0.1:{server.port}/mutate/pods"
        if wrk:
            return await run_wrk(
                wrk, url=url, body_file=body_file, concurrency=share, duration=duration
            )
        return await run_httpx(
            url=url, body=body, ca_file=server.ca_file, concurrency=share, duration=duration
        )

    cpu_before = sum(server.cpu_seconds() for server in servers)
    results = await asyncio.gather(*(one(server) for server in servers))
    cpu = sum(server.cpu_seconds() for server in servers) - cpu_before
    rate = sum(r.requests_per_second for r in results)
    result = Result(rate, max(r.p50_ms for r in results), max(r.p99_ms for r in results))
    return result, cpu / (rate * duration)


async def bench(
    *, duration: int, concurrencies: Sequence[int], force_httpx: bool, runs: int, replicas: int
) -> None:
    body = admission_body()
    wrk = None if force_httpx else shutil.which("wrk")
    runner, api_port = await start_api()
    with tempfile.TemporaryDirectory(prefix="webhook-bench-") as tmp:
        workdir = Path(tmp)
        body_file = workdir / "review.json"
        body_file.write_bytes(body)
        fleets: dict[str, list[Server]] = {"headroom": [], "ceiling": []}
        try:
            for index in range(replicas):
                replica = workdir / f"replica-{index}"
                replica.mkdir()
                server = await start_webhook(replica, api_port)
                fleets["headroom"].append(server)
                fleets["ceiling"].append(await start_minimal(replica / "certs"))
                await check_patch(server, body)
            generator = "wrk (1 thread, closed loop)" if wrk else "asyncio httpx client"
            print(f"/mutate/pods over TLS, keep-alive, {len(body)} B review, load: {generator}")
            print(
                f"{replicas} server process(es), each its own port and load generator; "
                f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}"
            )
            print(f"medians of {runs} runs of {duration}s; ceiling = the minimal handler")
            columns = ("concurrency", "admissions/s", "p50 ms", "p99 ms", "CPU us/req")
            print(f"{'server':>10} " + " ".join(f"{column:>12}" for column in columns))
            for concurrency in concurrencies:
                cpu: dict[str, float] = {}
                for name, servers in fleets.items():
                    samples = [
                        await measure(
                            servers,
                            wrk=wrk,
                            body=body,
                            body_file=body_file,
                            concurrency=concurrency,
                            duration=duration,
                        )
                        for _ in range(runs)
                    ]
                    rate = statistics.median(r.requests_per_second for r, _ in samples)
                    p50 = statistics.median(r.p50_ms for r, _ in samples)
                    p99 = statistics.median(r.p99_ms for r, _ in samples)
                    cpu[name] = statistics.median(c for _, c in samples)
                    print(
                        f"{name:>10} {concurrency:>12} {rate:>12.0f} {p50:>12.2f} "
                        f"{p99:>12.2f} {cpu[name] * 1e6:>12.0f}"
                    )
                print(
                    f"{'':>10} CPU per admission, headroom / ceiling: "
                    f"{cpu['headroom'] / cpu['ceiling']:.2f}x"
                )
        finally:
            for server in [*fleets["headroom"], *fleets["ceiling"]]:
                server.process.terminate()
                await server.process.wait()
            await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhook_bench", description=__doc__)
    parser.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--httpx", action="store_true", help="use the httpx client even with wrk")
    parser.add_argument("--runs", type=int, default=3, help="runs per setting (median)")
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="server processes, as webhook.replicas pods would be (default 1)",
    )
    args = parser.parse_args(argv)
    if args.duration < 1 or min(args.concurrency) < 1 or args.replicas < 1:
        parser.error("--duration, --concurrency and --replicas must be at least 1")
    asyncio.run(
        bench(
            duration=args.duration,
            concurrencies=args.concurrency,
            force_httpx=args.httpx,
            runs=args.runs,
            replicas=args.replicas,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
