"""Run the real helm binary against the operator chart and parse what it renders."""

import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
CHART = REPO_ROOT / "chart" / "kube-headroom"
CRD_CHART = REPO_ROOT / "chart" / "kube-headroom-crds"
RELEASE = "kube-headroom"
NAMESPACE = "kube-headroom-system"

Manifest = dict[str, Any]


def _pinned_versions() -> dict[str, str]:
    pairs = {}
    for line in (REPO_ROOT / "hack" / "versions.env").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            pairs[key.strip()] = value.strip()
    return pairs


def kube_version() -> str:
    """The Kubernetes version to render for: the one the test control plane runs."""
    return os.environ.get("K8S_VERSION") or _pinned_versions()["DEFAULT_K8S_VERSION"]


@functools.cache
def helm_binary() -> str:
    """helm from $HELM, else the cache hack/build-control-plane.sh fills, else PATH."""
    if explicit := os.environ.get("HELM"):
        return explicit
    cache = Path(os.environ.get("HEADROOM_CACHE", Path.home() / ".cache" / "headroom"))
    cached = cache / f"k8s-{kube_version()}" / "bin" / "helm"
    if cached.is_file():
        return str(cached)
    on_path = shutil.which("helm")
    if on_path is None:
        raise FileNotFoundError(
            f"helm not found: set HELM, run hack/build-control-plane.sh (fills {cached}), "
            "or put helm on PATH"
        )
    return on_path


def run_helm(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run helm with a private home, so no user repository or plugin config leaks in."""
    with tempfile.TemporaryDirectory(prefix="helm-home-") as home:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
        }
        return subprocess.run(
            [helm_binary(), *args], capture_output=True, text=True, env=env, check=False
        )


class HelmFailed(AssertionError):
    """helm exited non-zero; the message carries its stderr."""


def _template(values: Mapping[str, Any], *, chart: Path) -> subprocess.CompletedProcess[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="values-") as file:
        yaml.safe_dump(dict(values), file)
        file.flush()
        return run_helm(
            [
                "template",
                RELEASE,
                str(chart),
                "--namespace",
                NAMESPACE,
                "--kube-version",
                kube_version(),
                "--values",
                file.name,
            ]
        )


@functools.cache
def _render_cached(values_json: str, chart: str) -> tuple[Manifest, ...]:
    result = _template(json.loads(values_json), chart=Path(chart))
    if result.returncode != 0:
        raise HelmFailed(f"helm template failed:\n{result.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def render(values: Mapping[str, Any], *, chart: Path = CHART) -> tuple[Manifest, ...]:
    """Every object `helm template` renders with these values (cached per value set)."""
    return _render_cached(json.dumps(values, sort_keys=True), str(chart))


def render_error(values: Mapping[str, Any], *, chart: Path = CHART) -> str:
    """helm's stderr for values that must fail to render."""
    result = _template(values, chart=chart)
    if result.returncode == 0:
        raise AssertionError(f"helm template unexpectedly succeeded with {values!r}")
    return result.stderr


def render_notes(values: Mapping[str, Any]) -> str:
    """NOTES.txt as an install would print it.

    `helm template` never prints NOTES, so a scratch copy of the chart carries the same
    text as a ConfigMap template and that one object is rendered.
    """
    with tempfile.TemporaryDirectory(prefix="chart-notes-") as scratch:
        chart = Path(scratch) / CHART.name
        shutil.copytree(CHART, chart)
        notes = chart / "templates" / "NOTES.txt"
        body = "".join(f"    {line}\n" for line in notes.read_text().splitlines())
        notes.unlink()
        (chart / "templates" / "notes.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: |\n" + body
        )
        (configmap,) = [m for m in render(values, chart=chart) if m["kind"] == "ConfigMap"]
    notes_text: str = configmap["data"]["notes"]
    return notes_text
