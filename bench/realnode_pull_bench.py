"""Benchmark: what running ``make e2e``'s pods on real nodes costs, measured on one: the
images pulled by a real kubelet from the local registry, and Headroom's two processes
starting in the emulated guest.

Boots the real-node fleet's workload guest (``devcluster.realnodes.WORKLOAD``) with a
local registry on the guest network; the guest's containerd pulls from it, for the
registry's own host and for the chart image's registry (``ghcr.io``), as an air-gapped
node pulls through a mirror. Pushes the images ``make e2e`` builds (Headroom's,
Prometheus's, the Prometheus Operator's and its config reloader's) from the build store,
then runs each in a pod on the node, one after another, and prints, per image: the pull's
time and size as the kubelet's ``Pulled`` event reports them, and the pod's
create-to-completion time. The Headroom pod imports the webhook's and the reconciler's
modules and prints how long that took, which the benchmark sets beside the same import on
the host.

    make bench-realnode-pull              # root; builds the images as make e2e does
    make bench-realnode-pull REALNODE_ARGS="--compression zstd"

It must run in a network namespace of its own (``hack/realnode.sh --bench-pull``, which
the make target runs): the guest's and the registry's addresses exist only there.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devcluster.addons import Registry, addon_paths
from devcluster.binaries import REPO, pinned_versions
from devcluster.containers import (
    HEADROOM_IMAGE,
    OPERATOR_IMAGE,
    PROMETHEUS_IMAGE,
    RELOADER_IMAGE,
    Engine,
    build_engine,
)
from devcluster.realnet import HOST_ADDRESS
from devcluster.realnodes import WORKLOAD, RealCluster, throwaway_cluster

NAMESPACE = "bench-pull"
CHART_VALUES = yaml.safe_load((REPO / "chart/kube-headroom/values.yaml").read_text())
CHART = yaml.safe_load((REPO / "chart/kube-headroom/Chart.yaml").read_text())
# The chart's image as its pods name it: the node's mirror serves it from the registry.
CHART_IMAGE = f"{CHART_VALUES['image']['repository']}:{CHART['appVersion']}"
CHART_REGISTRY = CHART_IMAGE.split("/", 1)[0]
IMPORT = (
    "import time; started = time.monotonic(); import webhook.main, reconciler.main; "
    "print(f'imported in {time.monotonic() - started:.2f}s')"
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|µs|us|ns|m|s)")
_SCALE = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}
_PULLED = re.compile(r"Successfully pulled image \"[^\"]+\" in (\S+) .*Image size: (\d+) bytes")


def go_duration(text: str) -> float:
    """Seconds in a Go ``time.Duration`` string, as the kubelet prints one (``1m2.5s``)."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(value + unit for value, unit in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(value) * _SCALE[unit] for value, unit in parts)


@dataclass(frozen=True)
class Pull:
    seconds: float
    size_bytes: int


def pulled(message: str) -> Pull | None:
    """The pull's time and the image's size from a kubelet ``Pulled`` event's message;
    None for the message of an image already present."""
    match = _PULLED.search(message)
    if match is None:
        return None
    return Pull(seconds=go_duration(match.group(1)), size_bytes=int(match.group(2)))


@dataclass(frozen=True)
class Image:
    """A build-store image, where it goes in the registry, and how a pod names it."""

    local: str
    repository: str
    pod_image: str
    command: tuple[str, ...]


def _images(registry: Registry) -> list[Image]:
    versions = pinned_versions()
    prometheus, operator = versions["PROMETHEUS_VERSION"], versions["PROMETHEUS_OPERATOR_VERSION"]
    chart_path = CHART_IMAGE.split("/", 1)[1]
    return [
        Image(HEADROOM_IMAGE, chart_path, CHART_IMAGE, ("python3", "-c", IMPORT)),
        Image(
            f"{PROMETHEUS_IMAGE}:{prometheus}",
            f"prometheus/prometheus:{prometheus}",
            f"{registry.host}/prometheus/prometheus:{prometheus}",
            ("/bin/prometheus", "--version"),
        ),
        Image(
            f"{OPERATOR_IMAGE}:{operator}",
            f"prometheus-operator/prometheus-operator:{operator}",
            f"{registry.host}/prometheus-operator/prometheus-operator:{operator}",
            ("/bin/operator", "--version"),
        ),
        Image(
            f"{RELOADER_IMAGE}:{operator}",
            f"prometheus-operator/prometheus-config-reloader:{operator}",
            f"{registry.host}/prometheus-operator/prometheus-config-reloader:{operator}",
            ("/bin/prometheus-config-reloader", "--version"),
        ),
    ]


def _pod(name: str, image: Image) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeName": WORKLOAD.name,
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": image.pod_image,
                    "imagePullPolicy": "Always",
                    "command": list(image.command),
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def _run(cluster: RealCluster, name: str, image: Image, *, timeout: float) -> tuple[Pull, float]:
    plane = cluster.plane
    created = time.monotonic()
    plane.kubectl("create", "-f", "-", input=json.dumps(_pod(name, image)))
    deadline = created + timeout
    while True:
        pod = json.loads(plane.kubectl("get", "pod", name, "-n", NAMESPACE, "-o", "json"))
        phase = pod.get("status", {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"pod {name} ({image.pod_image}) still {phase} after {timeout}s")
        time.sleep(1)
    finished = time.monotonic() - created
    if phase == "Failed":
        logs = plane.kubectl("logs", name, "-n", NAMESPACE, check=False)
        raise SystemExit(f"pod {name} ({image.pod_image}) failed:\n{logs}")
    selector = f"--field-selector=involvedObject.name={name},reason=Pulled"
    events = json.loads(plane.kubectl("get", "events", "-n", NAMESPACE, "-o", "json", selector))
    for event in events["items"]:
        pull = pulled(event.get("message", ""))
        if pull is not None:
            return pull, finished
    raise SystemExit(f"pod {name}: no Pulled event with a pull time: {events['items']}")


def _host_import_seconds() -> float:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT], cwd=REPO, capture_output=True, text=True, check=True
    )
    return float(result.stdout.split()[-1].rstrip("s"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per pod")
    parser.add_argument(
        "--compression",
        choices=("gzip", "zstd"),
        default="gzip",
        help="how the pushed layers are compressed (gzip: what podman and docker push by "
        "default; zstd: faster to unpack)",
    )
    args = parser.parse_args(argv)
    build = build_engine()
    registry_dir = Path(tempfile.mkdtemp(prefix="headroom-bench-registry-"))
    registry = Registry(
        binary=addon_paths().docker_registry, work_dir=registry_dir, address=HOST_ADDRESS
    )
    try:
        with throwaway_cluster(
            (WORKLOAD,),
            prefix="headroom-bench-pull-",
            registry=registry,
            mirrored=(CHART_REGISTRY,),
        ) as cluster:
            print(cluster.startup(), flush=True)
            _measure(cluster, registry, build, args.compression, timeout=args.timeout)
        return 0
    finally:
        shutil.rmtree(registry_dir, ignore_errors=True)


def _measure(
    cluster: RealCluster, registry: Registry, build: Engine, compression: str, *, timeout: float
) -> None:
    images = _images(registry)
    for image in images:
        if build.inspect("image", image.local) is None:
            raise SystemExit(f"{image.local} is not in the build store: run make e2e first")
        step = time.monotonic()
        build.podman(
            "push", "--quiet", f"--cert-dir={registry.cert_dir}",
            f"--compression-format={compression}",
            image.local, f"docker://{registry.host}/{image.repository}",
        )  # fmt: skip
        print(
            f"pushed {image.local} ({compression}) in {time.monotonic() - step:.1f}s",
            flush=True,
        )
    cluster.plane.kubectl("create", "namespace", NAMESPACE)
    total = 0.0
    for index, image in enumerate(images):
        name = f"pull-{index}"
        pull, finished = _run(cluster, name, image, timeout=timeout)
        total += pull.seconds
        print(
            f"{image.pod_image}: pulled in {pull.seconds:.1f}s "
            f"({pull.size_bytes / 1e6:.0f} MB), created to completed in {finished:.1f}s",
            flush=True,
        )
        if image.local == HEADROOM_IMAGE:
            logs = cluster.plane.kubectl("logs", name, "-n", NAMESPACE).strip()
            print(
                f"  webhook and reconciler modules in the guest: {logs}; "
                f"on the host: imported in {_host_import_seconds():.2f}s"
            )
    print(f"every pull, one after another: {total:.1f}s")


if __name__ == "__main__":
    raise SystemExit(main())
