"""Podman for the images: the build store.

One podman configuration of its own (``containers.conf``, ``storage.conf`` and
``registries.conf`` written here and selected through ``CONTAINERS_*`` variables, so the
machine's own configuration is never read or changed), cached beside the control plane's
binaries, where the images are built once and reused and from which they are pushed to
the registry the real nodes pull from.

It uses runc (crun refuses a hybrid cgroup v1 host), the vfs storage driver, the cgroupfs
manager and an open-files limit below the host's hard limit. Every container and build
step runs under ``/headroom-build``, a cgroup parent of the harness's own (runc creates
it; ``release`` removes it), where podman places build steps directly.

``python -m devcluster.containers env`` prints the build store's variables for shell use.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Below this machine's hard limit of 20000 open files; the default raises past it.
NOFILE = 16384
NPROC = 4096
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The images hack/e2e.sh builds into the build store (the last three tagged with the
# pinned Prometheus and prometheus-operator versions).
HEADROOM_IMAGE = "localhost/kube-headroom:e2e"
PROMETHEUS_IMAGE = "localhost/e2e/prometheus"
OPERATOR_IMAGE = "localhost/e2e/prometheus-operator"
RELOADER_IMAGE = "localhost/e2e/prometheus-config-reloader"


class ContainerError(RuntimeError):
    """A podman command failed; the message carries its command and output."""


def cache_root() -> Path:
    return Path(os.environ.get("HEADROOM_CACHE", Path.home() / ".cache" / "headroom"))


@dataclass(frozen=True)
class Engine:
    """One podman configuration rooted at ``root``."""

    root: Path
    cgroup_parent: str

    @property
    def runroot(self) -> Path:
        return self.root / "run"

    @property
    def storage(self) -> Path:
        return self.root / "storage"

    def write_config(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "containers.conf").write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={NOFILE}:{NOFILE}", "nproc={NPROC}:{NPROC}"]\n'
            'log_driver = "k8s-file"\n'
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
        )
        (self.root / "storage.conf").write_text(
            f'[storage]\ndriver = "vfs"\ngraphroot = "{self.storage}"\nrunroot = "{self.runroot}"\n'
        )
        (self.root / "registries.conf").write_text("unqualified-search-registries = []\n")

    def environ(self) -> dict[str, str]:
        return {
            "CONTAINERS_CONF": str(self.root / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(self.root / "registries.conf"),
        }

    def podman(
        self, *args: str, check: bool = True, timeout: float = 600, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["podman", *args],
            env={**os.environ, **self.environ()},
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            input=input,
        )
        if check and result.returncode != 0:
            raise ContainerError(
                f"podman {shlex.join(args)} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )
        return result

    def inspect(self, what: str, name: str) -> dict[str, Any] | None:
        """``podman {container,image} inspect``; None when there is no such thing."""
        result = self.podman(what, "inspect", name, check=False)
        if result.returncode != 0:
            return None
        found: list[dict[str, Any]] = json.loads(result.stdout)
        return found[0] if found else None

    def remove_cgroup_parent(self) -> list[str]:
        """Remove the cgroup parent runc created on the harness's behalf, with whatever it
        left below; returns what stayed (still in use)."""
        left = []
        for hierarchy in _hierarchies():
            top = hierarchy / self.cgroup_parent.strip("/")
            if not top.exists():
                continue
            for directory in sorted(
                (p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
            ):
                _rmdir(directory)
            if not _rmdir(top):
                left.append(str(top))
        return left


def _hierarchies() -> list[Path]:
    return sorted(p for p in CGROUP_ROOT.iterdir() if p.is_dir() and (p / "cgroup.procs").exists())


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def build_engine() -> Engine:
    """The persistent build store beside the control plane's cache."""
    return Engine(root=cache_root() / "containers" / "build", cgroup_parent="/headroom-build")


def _environment_lines(variables: Mapping[str, str]) -> str:
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in variables.items())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster.containers")
    parser.add_argument(
        "command",
        choices=["env", "release"],
        help="env: write the build store's configuration and print its variables; release: "
        "remove the builds' cgroup once they are done (runc creates it for each step)",
    )
    args = parser.parse_args(argv)
    engine = build_engine()
    if args.command == "release":
        left = engine.remove_cgroup_parent()
        if left:
            # Another build still runs in it; it goes with the last one.
            sys.stderr.write(f"cgroup parent still in use: {', '.join(left)}\n")
        return 0
    engine.write_config()
    sys.stdout.write(_environment_lines(engine.environ()))
    sys.stdout.write(f"export HEADROOM_BUILD_CGROUP_PARENT={shlex.quote(engine.cgroup_parent)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
