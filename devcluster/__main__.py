"""``python -m devcluster``: start the local control plane, print how long it took and
its kubeconfig; ``--check`` stops it again at once (a start-up timing), otherwise it runs
until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from devcluster import ControlPlane, locate_binaries
from devcluster.binaries import kubernetes_version


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__)
    parser.add_argument("--check", action="store_true", help="start, time, stop")
    args = parser.parse_args()
    started = time.monotonic()
    bin_dir = locate_binaries(build=True)
    built = time.monotonic() - started
    plane = ControlPlane(
        work_dir=Path(tempfile.mkdtemp(prefix="headroom-cluster-")), bin_dir=bin_dir
    )
    started = time.monotonic()
    plane.start()
    up = time.monotonic() - started
    try:
        print(f"Kubernetes {kubernetes_version()}: binaries ready in {built:.1f}s")
        print(
            f"control plane (etcd, apiserver, controller-manager, scheduler, KWOK) up in {up:.1f}s"
        )
        print(f"export KUBECONFIG={plane.kubeconfig}")
        if not args.check:
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            stop.wait()
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
