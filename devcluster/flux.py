"""Flux's source-controller, kustomize-controller and helm-controller, run as host processes
beside the control plane: the GitOps tool the integration tier syncs the chart with.

source-controller pulls OCI artifacts (``devcluster.addons.Registry.push_files``) and Helm
charts (``helm push``) from the local registry and serves what it pulled from its storage
on loopback; the other two fetch from there and apply to the cluster. The binaries and
CRDs come from the cache ``hack/build-neighbours.sh`` fills (a no-op once built).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from devcluster.addons import HostProcess, http_ok, spawn, wait_until
from devcluster.binaries import neighbour_dir, pinned_versions
from devcluster.ports import free_port

NAMESPACE = "flux-system"
CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller")
# The media types of what `flux push artifact` publishes, which an OCIRepository extracts.
CONTENT_MEDIA_TYPE = "application/vnd.cncf.flux.content.v1.tar+gzip"
CONFIG_MEDIA_TYPE = "application/vnd.cncf.flux.config.v1+json"


def flux_dir() -> Path:
    """The cache holding ``bin/<controller>`` and ``crds/``, built on first use."""
    versions = pinned_versions()
    built = "-".join(
        versions[f"FLUX_{name.replace('-', '_').upper()}_VERSION"] for name in CONTROLLERS
    )
    return neighbour_dir("flux", f"flux-{built}")


@dataclass
class Flux:
    processes: list[HostProcess]

    @classmethod
    def start(cls, kubeconfig: Path, work_dir: Path, kubectl: Callable[..., str]) -> Flux:
        """Install the CRDs and the namespace, start the three controllers against
        ``kubeconfig``'s cluster, and wait until each reports ready."""
        root = flux_dir()
        kubectl("apply", "--server-side", "-f", str(root / "crds"))
        kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(root / "crds"))
        kubectl("create", "namespace", NAMESPACE, check=False)
        storage = free_port()
        extra = {
            "source-controller": [
                f"--storage-path={work_dir / 'storage'}",
                f"--storage-addr=127.0.0.1:{storage}",
                # The address its artifacts' URLs name, which the other two fetch from.
                f"--storage-adv-addr=127.0.0.1:{storage}",
            ],
        }
        (work_dir / "storage").mkdir(parents=True, exist_ok=True)
        processes: list[HostProcess] = []
        try:
            for name in CONTROLLERS:
                health = free_port()
                process = spawn(
                    name,
                    [
                        str(root / "bin" / name),
                        f"--health-addr=127.0.0.1:{health}",
                        "--metrics-addr=0",
                        "--enable-leader-election=false",
                        "--log-level=debug",
                        *extra.get(name, []),
                    ],
                    log_dir=work_dir,
                    env={"KUBECONFIG": str(kubeconfig), "RUNTIME_NAMESPACE": NAMESPACE},
                )
                processes.append(process)
                ready = partial(http_ok, f"http://127.0.0.1:{health}/readyz")
                wait_until(process, ready, "/readyz")
        except BaseException:
            for process in processes:
                process.stop()
            raise
        return cls(processes)

    def stop(self) -> None:
        for process in self.processes:
            process.stop()

    def tail(self, name: str) -> str:
        (process,) = [process for process in self.processes if process.name == name]
        return process.tail(60)
