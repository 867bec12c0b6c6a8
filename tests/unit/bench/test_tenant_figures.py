"""make bench-tenant's figures: the load generator's output read, cgroup counters
subtracted, medians over rounds, Headroom's ratios, the issue's criteria and the
reaction report."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bench.tenant_figures import (
    Case,
    CpuStat,
    Reaction,
    Request,
    Results,
    Run,
    cases_table,
    criteria,
    markdown_table,
    parse_load,
    parse_phases,
    reaction_report,
    windows,
)
from devcluster.latency import Step, Trial

IDLE = CpuStat(usage_usec=0, nr_periods=0, nr_throttled=0, throttled_usec=0)
PHASES = parse_phases("30@1,3@1")


def usage(
    *, peak: float, rest: float, seconds: float = 10.0, every: float = 0.25, offset: float = 0.0
) -> list[tuple[float, int]]:
    """The server's usage_usec sampled every ``every`` seconds from ``offset``, using
    ``peak`` cores in the first second of every two (the busiest phase) and ``rest`` in
    the other."""
    samples, used, at = [], 0.0, offset
    while at <= seconds:
        samples.append((at, round(used)))
        step = min(every, 1 - at % 1)
        used += (peak if at % 2 < 1 else rest) * step * 1e6
        used += (peak if (at + step) % 2 < 1 else rest) * (every - step) * 1e6
        at += every
    return samples


def requests(latencies_ms: Sequence[float], *, ok: bool = True) -> list[Request]:
    """One request every 0.1 s with the given latencies."""
    return [
        Request(scheduled=i / 10, latency=ms / 1000, ok=ok) for i, ms in enumerate(latencies_ms)
    ]


def run(
    *,
    mode: str = "headroom",
    booking: str = "none",
    round: int = 1,
    latency_ms: float = 10.0,
    server: CpuStat = IDLE,
    neighbours: Sequence[tuple[int, CpuStat]] = (),
    seconds: float = 10.0,
    samples: Sequence[tuple[float, int]] = (),
) -> Run:
    return Run(
        booking=booking,
        mode=mode,
        round=round,
        seconds=seconds,
        requests=requests([latency_ms] * 100),
        server=server,
        measured=seconds,
        outside_pods=IDLE,
        server_request=250,
        neighbours=neighbours,
        limits=[(0.0, 1700), (5.0, 1150)],
        load=1.5,
        usage=samples,
        phases=PHASES,
    )


def plain_run(
    *,
    seconds: float,
    requests: list[Request],
    measured: float,
    mode: str = "static",
    outside_pods: CpuStat = IDLE,
) -> Run:
    """A run of its requests alone: no neighbours, limits, load or usage samples."""
    return Run(
        booking="none",
        mode=mode,
        round=1,
        seconds=seconds,
        requests=requests,
        server=IDLE,
        measured=measured,
        outside_pods=outside_pods,
        server_request=250,
    )


def booking(name: str, *, static: float, unlimited: float, headroom: float) -> list[Run]:
    return [
        run(mode="static", booking=name, latency_ms=static),
        run(mode="no-limit", booking=name, latency_ms=unlimited),
        run(mode="headroom", booking=name, latency_ms=headroom),
    ]


def busy(*, neighbours: Sequence[tuple[int, CpuStat]], server: CpuStat, peak: float) -> list[Run]:
    """The busy booking's three runs; under Headroom, the server at ``peak`` cores in the
    load's peak seconds and 0.1 in the others."""
    return [
        run(mode="static", booking="busy"),
        run(mode="no-limit", booking="busy"),
        run(
            mode="headroom",
            booking="busy",
            neighbours=neighbours,
            server=server,
            samples=usage(peak=peak, rest=0.1),
        ),
    ]


def test_the_load_generators_lines_are_read_in_seconds() -> None:
    parsed = parse_load("start\n0.000 12.500 true\n16.667 30.000 false\n")
    assert parsed == [
        Request(scheduled=0.0, latency=0.0125, ok=True),
        Request(scheduled=0.016667, latency=0.03, ok=False),
    ]


def test_output_that_is_not_the_load_generators_is_refused() -> None:
    with pytest.raises(ValueError, match="not the load generator"):
        parse_load("error: container not found\n")


def test_cpu_stat_is_read_and_subtracted() -> None:
    before = CpuStat.parse(
        "usage_usec 1000\nuser_usec 800\nsystem_usec 200\nnr_periods 10\n"
        "nr_throttled 2\nthrottled_usec 5000\n"
    )
    after = CpuStat.parse(
        "usage_usec 3000\nuser_usec 2000\nsystem_usec 1000\nnr_periods 30\n"
        "nr_throttled 12\nthrottled_usec 9000\n"
    )
    assert after - before == CpuStat(
        usage_usec=2000, nr_periods=20, nr_throttled=10, throttled_usec=4000
    )


def test_a_cgroup_without_a_limit_has_no_periods() -> None:
    assert CpuStat.parse("usage_usec 5\nuser_usec 5\nsystem_usec 0\n").nr_periods == 0
    assert run(server=IDLE).throttled_ratio == 0.0


def test_a_runs_throughput_counts_answered_requests_until_the_last_answer() -> None:
    late = plain_run(
        seconds=1.0,
        requests=[Request(scheduled=0.0, latency=0.1, ok=True), Request(0.5, 1.5, True)],
        measured=2.5,
    )
    assert late.throughput == 1.0


def test_a_runs_throughput_counts_answered_requests_only() -> None:
    failed = plain_run(
        seconds=2.0, requests=[*requests([5.0] * 6), *requests([5.0] * 2, ok=False)], measured=2.0
    )
    assert failed.throughput == 3.0
    assert failed.errors == 2


def test_throttling_and_cpu_come_from_the_servers_cgroup() -> None:
    server = CpuStat(usage_usec=5_000_000, nr_periods=100, nr_throttled=25, throttled_usec=750_000)
    measured = run(server=server, seconds=10.0)
    assert measured.throttled_ratio == 0.25
    assert measured.throttled_seconds == 0.75
    assert measured.server_cores == 0.5


def test_what_ran_outside_the_pods_is_given_in_cores() -> None:
    outside = CpuStat(usage_usec=4_000_000, nr_periods=0, nr_throttled=0, throttled_usec=0)
    measured = plain_run(seconds=8.0, requests=requests([5.0]), measured=10.0, outside_pods=outside)
    assert measured.outside_cores == 0.4


def test_each_neighbour_is_measured_against_its_own_request() -> None:
    neighbours = [
        (725, CpuStat(usage_usec=7_250_000, nr_periods=0, nr_throttled=0, throttled_usec=0)),
        (500, CpuStat(usage_usec=2_500_000, nr_periods=0, nr_throttled=0, throttled_usec=0)),
    ]
    assert run(neighbours=neighbours, seconds=10.0).neighbour_received == [1.0, 0.5]


def test_the_load_schedules_phases_are_read() -> None:
    assert parse_phases("30@1,3@1.5") == [(30.0, 1.0), (3.0, 1.5)]


def test_the_servers_peak_cpu_counts_only_intervals_inside_the_busiest_phase() -> None:
    # Sampled every 0.25 s: every interval lies in one phase.
    assert run(samples=usage(peak=0.6, rest=0.1)).peak_cores == pytest.approx(0.6)
    # Sampled every 0.5 s from 0.3 s: the intervals across a phase's edge are left out.
    straddled = usage(peak=0.6, rest=0.1, every=0.5, offset=0.3)
    assert run(samples=straddled).peak_cores == pytest.approx(0.6)
    # Samples 2 s apart never lie inside a one-second phase: unmeasured, not zero.
    assert run(samples=usage(peak=0.6, rest=0.1, every=2.0)).peak_cores is None
    assert run().peak_cores is None


def test_a_case_takes_medians_over_its_rounds_and_shows_the_median_round() -> None:
    case = Case(
        [run(round=1, latency_ms=10), run(round=2, latency_ms=30), run(round=3, latency_ms=20)]
    )
    assert case.p99 == pytest.approx(0.020)
    assert case.representative.round == 3


def test_the_table_gives_headrooms_ratios_to_static_and_to_no_limit() -> None:
    results = Results(booking("none", static=40.0, unlimited=10.0, headroom=12.0))
    text = cases_table(results)
    assert "none       static        0.30   0.30   0.30   1.00" in text
    assert "none       no-limit      1.20   1.20   1.20   1.00" in text


def test_the_criteria_hold_when_headroom_matches_no_limit_and_neighbours_get_their_requests() -> (
    None
):
    busy_neighbour = [
        (725, CpuStat(usage_usec=7_200_000, nr_periods=0, nr_throttled=0, throttled_usec=0))
    ]
    server = CpuStat(usage_usec=3_000_000, nr_periods=100, nr_throttled=0, throttled_usec=0)
    runs = [
        *booking("none", static=40.0, unlimited=10.0, headroom=10.5),
        *busy(neighbours=busy_neighbour, server=server, peak=0.3),
    ]
    found = criteria(Results(runs), busy="busy", calm=("none",))
    assert [c.met for c in found] == [True, True, True, True]
    assert "worst round: 1.20x its request" in found[3].text


def test_the_criteria_fail_on_a_slow_tail_a_throttled_server_or_a_starved_neighbour() -> None:
    starved = [(725, CpuStat(usage_usec=7_000_000, nr_periods=0, nr_throttled=0, throttled_usec=0))]
    throttled = CpuStat(usage_usec=2_000_000, nr_periods=100, nr_throttled=2, throttled_usec=1)
    runs = [
        run(mode="static", booking="none"),
        run(mode="no-limit", booking="none", latency_ms=10.0),
        run(mode="headroom", booking="none", latency_ms=11.5, server=throttled),
        *busy(neighbours=starved, server=throttled, peak=0.2),
    ]
    found = criteria(Results(runs), busy="busy", calm=("none",))
    assert [c.met for c in found] == [False, False, False, False]
    assert "96.6% of its request" in found[2].text
    assert "worst round: 0.80x its request" in found[3].text


def test_a_busy_run_with_no_peak_sampled_does_not_meet_the_servers_criterion() -> None:
    neighbour = [
        (725, CpuStat(usage_usec=7_250_000, nr_periods=0, nr_throttled=0, throttled_usec=0))
    ]
    runs = [
        *booking("busy", static=40.0, unlimited=10.0, headroom=10.0),
        run(
            mode="headroom", booking="busy", neighbours=neighbour, samples=usage(peak=0.5, rest=0.1)
        ),
    ]
    found = criteria(Results(runs), busy="busy", calm=())
    assert [c.met for c in found] == [True, False]
    assert "worst round: - its request" in found[1].text


def test_windows_give_each_seconds_percentiles() -> None:
    measured = plain_run(
        seconds=2.0,
        requests=[*requests([10.0] * 10), *[Request(1.0 + i / 10, 0.050, True) for i in range(10)]],
        measured=2.0,
        mode="headroom",
    )
    assert windows(measured) == [(0.0, 0.010, 0.010), (1.0, 0.050, 0.050)]


def test_the_reaction_report_gives_the_shrink_its_shares_and_the_latency_around_it() -> None:
    trial = Trial(
        shrink=Step(headroom=2.0, write=0.05, kubelet=1.0),
        rise=Step(headroom=2.0, write=0.05, kubelet=1.0),
        bound=100.0,
        deleted=120.0,
        running=104.0,
        finished=122.0,
        gone=123.0,
    )
    reaction = Reaction(trial=trial, before=requests([10.0] * 50), after=requests([40.0] * 50))
    text = reaction_report([reaction, reaction], neighbour_millis=1200)
    assert "a busy neighbour (1200m)" in text
    assert (
        "cpu.max shrunk (as long as the neighbour may get less than its request): p50 3.00s" in text
    )
    assert "kubelet (resize accepted -> cpu.max): p50 1.00s" in text
    assert "before the binding: p50 10.0 ms" in text
    assert "after the shrink:   p50 40.0 ms" in text


def test_the_docs_table_gives_each_case_against_the_same_bookings_no_limit() -> None:
    runs = booking("none", static=40.0, unlimited=10.0, headroom=12.0)
    rows = markdown_table(Results(runs)).splitlines()
    assert rows[0].startswith("| booking | limit | p50 | p99 |")
    assert "| server's CPU | at its peaks | least a neighbour got |" in rows[0]
    assert rows[2].startswith("| `none` | `static` | 4.00x | 4.00x | 4.00x | 0.0% |")
    assert rows[4].startswith("| `none` | `headroom` | 1.20x |")
    assert rows[4].endswith("| - |")
