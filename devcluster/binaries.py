"""Finding (or building) the control-plane binaries."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO / "hack" / "build-control-plane.sh"
REQUIRED = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "helm",
)


NEIGHBOURS_SCRIPT = REPO / "hack" / "build-neighbours.sh"


def neighbour_dir(component: str, directory: str) -> Path:
    """``directory`` of the cache, where ``hack/build-neighbours.sh`` builds ``component``
    (a component run beside Headroom) on first use; waits while another build of it runs."""
    subprocess.run(
        ["bash", str(NEIGHBOURS_SCRIPT), component], check=True, capture_output=True, cwd=REPO
    )
    cache = Path(os.environ.get("HEADROOM_CACHE", Path.home() / ".cache" / "headroom"))
    return cache / directory


class BinaryNotFoundError(RuntimeError):
    """A control-plane binary is missing and could not be built."""


def pinned_versions() -> dict[str, str]:
    """hack/versions.env as a mapping."""
    values: dict[str, str] = {}
    for line in (REPO / "hack" / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key] = value
    return values


def kubernetes_version() -> str:
    return os.environ.get("K8S_VERSION") or pinned_versions()["DEFAULT_K8S_VERSION"]


def default_bin_dir() -> Path:
    cache = Path(os.environ.get("HEADROOM_CACHE", Path.home() / ".cache" / "headroom"))
    return cache / f"k8s-{kubernetes_version()}" / "bin"


def _missing(directory: Path) -> list[str]:
    return [name for name in REQUIRED if not os.access(directory / name, os.X_OK)]


def crds_dir(bin_dir: Path) -> Path:
    """Third-party CRDs (cert-manager, prometheus-operator, VPA) fetched beside the binaries."""
    return Path(os.environ.get("HEADROOM_THIRD_PARTY_CRDS", bin_dir.parent / "crds"))


def kwok_metrics_file(bin_dir: Path) -> Path:
    """KWOK's Metric for a kubelet's ``/metrics/resource`` endpoint, fetched beside the
    binaries."""
    return bin_dir.parent / "kwok" / "metrics-resource.yaml"


def locate_binaries(*, build: bool = True) -> Path:
    """Return the directory holding every control-plane binary.

    ``KUBEBUILDER_ASSETS`` (the convention of Go operator projects) points at an
    existing directory and is never built into. Otherwise the version-keyed cache
    is used, and built on first use when ``build`` is true.
    """
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        directory = Path(assets)
        missing = _missing(directory)
        if missing:
            raise BinaryNotFoundError(
                f"KUBEBUILDER_ASSETS={directory} lacks {', '.join(missing)}; "
                "unset it to build them with hack/build-control-plane.sh"
            )
        return directory
    directory = default_bin_dir()
    missing = _missing(directory)
    if not (crds_dir(directory) / ".complete").exists():
        missing.append("third-party CRDs")
    if missing and build:
        logger.info("building control-plane binaries: %s", ", ".join(missing))
        env = {**os.environ, "K8S_VERSION": kubernetes_version()}
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], env=env, check=False, capture_output=True, text=True
        )
        if result.returncode != 0:
            raise BinaryNotFoundError(
                "hack/build-control-plane.sh failed "
                f"({result.returncode}):\n{result.stderr[-4000:]}"
            )
        missing = _missing(directory)
    if missing:
        raise BinaryNotFoundError(
            f"{directory} lacks {', '.join(missing)}; run hack/build-control-plane.sh"
        )
    return directory
