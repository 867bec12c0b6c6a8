"""make bench-tenant's picture: one PNG per booking, the three modes on one time axis."""

from __future__ import annotations

import struct
from pathlib import Path

from bench.tenant_figures import CpuStat, Request, Results, Run
from bench.tenant_plot import draw

IDLE = CpuStat(usage_usec=0, nr_periods=0, nr_throttled=0, throttled_usec=0)


def run(mode: str, limits: list[tuple[float, int | None]]) -> Run:
    return Run(
        booking="idle-50%",
        mode=mode,
        round=1,
        seconds=3.0,
        requests=[Request(scheduled=i / 10, latency=0.01 + i / 1000, ok=True) for i in range(30)],
        server=IDLE,
        measured=3.0,
        outside_pods=IDLE,
        server_request=250,
        limits=limits,
    )


def test_a_booking_is_drawn_as_a_png_of_the_documented_size(tmp_path: Path) -> None:
    results = Results(
        [
            run("static", [(0.0, 500), (2.0, 500)]),
            run("no-limit", [(0.0, None), (2.0, None)]),
            run("headroom", [(0.0, 1150), (1.0, 450), (2.0, 1150)]),
        ]
    )
    path = draw(
        results, "idle-50%", tmp_path / "out" / "tenant.png", request_millis=250, node_millis=1800
    )
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1000, 700)
