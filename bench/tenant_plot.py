"""``make bench-tenant``'s pictures: for one booking, the server's latency (p50 and p99 of
each second) above its CPU limit, for the three limit modes on one time axis. Each mode
is drawn from its representative round (the one with the median p99)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.tenant_figures import MODES, Results, windows

COLOURS = {"static": "tab:red", "no-limit": "tab:grey", "headroom": "tab:blue"}


def draw(
    results: Results, booking: str, path: Path, *, request_millis: int, node_millis: int
) -> Path:
    figure = Figure(figsize=(10, 7), layout="constrained")
    latency, limit = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    for mode in MODES:
        run = results.case(booking, mode).representative
        colour = COLOURS[mode]
        seconds = windows(run)
        starts = [start for start, _, _ in seconds]
        latency.plot(
            starts, [p99 * 1000 for _, _, p99 in seconds], color=colour, label=f"{mode} p99"
        )
        latency.plot(
            starts,
            [p50 * 1000 for _, p50, _ in seconds],
            color=colour,
            linestyle="--",
            linewidth=1,
            label=f"{mode} p50",
        )
        # No limit at all is drawn at the node's allocatable CPU, the most it could use.
        samples = [(at, node_millis if m is None else m) for at, m in run.limits]
        limit.step(
            [at for at, _ in samples],
            [millis / 1000 for _, millis in samples],
            where="post",
            color=colour,
            label=mode if mode != "no-limit" else f"no limit (node: {node_millis / 1000:g})",
        )
    limit.axhline(request_millis / 1000, color="black", linestyle=":", label="request")
    latency.set_yscale("log")
    latency.set_ylabel("latency (ms, per second)")
    latency.set_title(f"Server latency and CPU limit, node booked: {booking}")
    latency.legend(ncols=3, fontsize="small")
    limit.set_ylabel("CPU limit (cores)")
    limit.set_xlabel("seconds into the load")
    limit.set_ylim(bottom=0)
    limit.legend(fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path
