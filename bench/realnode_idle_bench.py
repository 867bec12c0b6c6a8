"""Benchmark: what an idle real-node fleet costs the host, under each qemu threading.

Boots the standard fleet (``devcluster.realnodes.FLEET``) with every guest's emulation
threads set to ``--threads``, lets it settle, then samples for ``--window`` seconds: the
host CPU each guest's qemu takes, and the guest's own busiest processes (read from its
``/proc`` through the node agent). With nothing scheduled, that is the kubelet, containerd
and the kernel keeping a node alive: what every test on these nodes competes with.

    make bench-realnode-idle                                   # root
    make bench-realnode-idle REALNODE_ARGS="--threads multi"

It must run in a network namespace of its own (``hack/realnode.sh --bench-idle``, which
the make target runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections.abc import Mapping, Sequence

from devcluster.guests import Guest
from devcluster.realnodes import FLEET, throwaway_cluster

TOP = 5


def proc_ticks(stat: str) -> tuple[str, int]:
    """A ``/proc/<pid>/stat`` line's command name and its user + system clock ticks. The
    name is in parentheses and may itself hold spaces or parentheses."""
    name = stat.split("(", 1)[1].rsplit(")", 1)[0]
    fields = stat.rsplit(")", 1)[1].split()
    return name, int(fields[11]) + int(fields[12])


def busiest(
    before: Mapping[str, tuple[str, int]], after: Mapping[str, tuple[str, int]], top: int = TOP
) -> list[tuple[str, int]]:
    """The ``top`` processes by ticks spent between two samples keyed by pid; a process
    that started in between counts from zero."""
    spent = [(name, ticks - before.get(pid, (name, 0))[1]) for pid, (name, ticks) in after.items()]
    return sorted(spent, key=lambda item: item[1], reverse=True)[:top]


def _guest_processes(guest: Guest) -> dict[str, tuple[str, int]]:
    return {
        path.split("/")[2]: proc_ticks(text)
        for path, text in guest.read("/proc/[0-9]*/stat").items()
        if text
    }


def _qemu_ticks(guest: Guest) -> int:
    assert guest.popen is not None
    with open(f"/proc/{guest.popen.pid}/stat") as stat:
        return proc_ticks(stat.read())[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", choices=("single", "multi"), default="single")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds before sampling")
    parser.add_argument("--window", type=float, default=60.0, help="seconds sampled")
    args = parser.parse_args(argv)
    specs = [dataclasses.replace(spec, threads=args.threads) for spec in FLEET]
    with throwaway_cluster(specs, prefix="headroom-bench-idle-") as cluster:
        print(f"threads={args.threads}: {cluster.startup()}", flush=True)
        time.sleep(args.settle)
        guests = list(cluster)
        host = [_qemu_ticks(guest) for guest in guests]
        inside = [_guest_processes(guest) for guest in guests]
        started = time.monotonic()
        time.sleep(args.window)
        elapsed = time.monotonic() - started
        hertz = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for guest, host_before, inside_before in zip(guests, host, inside, strict=True):
            share = (_qemu_ticks(guest) - host_before) / hertz / elapsed
            total += share
            top = ", ".join(
                f"{name} {ticks / hertz:.1f}s"
                for name, ticks in busiest(inside_before, _guest_processes(guest))
            )
            print(f"{guest.name}: qemu {share:.0%} of a host core; in the guest: {top}")
        print(f"fleet idle: {total:.0%} of a host core over {elapsed:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
