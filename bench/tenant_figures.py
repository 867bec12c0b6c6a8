"""What ``make bench-tenant`` computes from what it measured (no I/O, no clock): each
run's latency, throughput, throttling and neighbours' CPU, the medians over rounds, the
ratios between cases and the issue's criteria, as text.

Every figure is a ratio between cases of the same run or a fraction of a period, never an
absolute time to compare with another machine: the node is emulated.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from devcluster.latency import Trial, distribution, percentile

MODES = ("static", "no-limit", "headroom")


@dataclass(frozen=True)
class Request:
    scheduled: float  # seconds from the load's start
    latency: float  # seconds, from the scheduled instant
    ok: bool


def parse_load(text: str) -> list[Request]:
    """``probe load``'s lines after ``start``: "<scheduled ms> <latency ms> <answered>"."""
    lines = text.strip().splitlines()
    if not lines or lines[0] != "start":
        raise ValueError(f"not the load generator's output: {text[:200]!r}")
    requests = []
    for line in lines[1:]:
        scheduled, latency, answered = line.split()
        requests.append(Request(float(scheduled) / 1000, float(latency) / 1000, answered == "true"))
    return requests


def parse_phases(spec: str) -> list[tuple[float, float]]:
    """``probe load``'s schedule, ``<rate>@<seconds>`` phases repeated in turn: (requests
    per second, seconds) each."""
    phases = []
    for phase in spec.split(","):
        rate, seconds = phase.split("@")
        phases.append((float(rate), float(seconds)))
    return phases


@dataclass(frozen=True)
class CpuStat:
    """The counters of a cgroup's ``cpu.stat`` that the benchmark reads."""

    usage_usec: int
    nr_periods: int
    nr_throttled: int
    throttled_usec: int

    @classmethod
    def parse(cls, text: str) -> CpuStat:
        values = dict(line.split() for line in text.strip().splitlines())
        return cls(
            usage_usec=int(values["usage_usec"]),
            nr_periods=int(values.get("nr_periods", 0)),
            nr_throttled=int(values.get("nr_throttled", 0)),
            throttled_usec=int(values.get("throttled_usec", 0)),
        )

    def __sub__(self, other: CpuStat) -> CpuStat:
        return CpuStat(
            usage_usec=self.usage_usec - other.usage_usec,
            nr_periods=self.nr_periods - other.nr_periods,
            nr_throttled=self.nr_throttled - other.nr_throttled,
            throttled_usec=self.throttled_usec - other.throttled_usec,
        )


@dataclass(frozen=True)
class Run:
    """One case run: a limit mode on one booking, in one round."""

    booking: str
    mode: str
    round: int
    seconds: float  # the load's schedule
    requests: Sequence[Request]
    # The server container's cgroup from just before the load to just after its last
    # answer, ``measured`` seconds apart (the neighbours' over the same interval).
    server: CpuStat
    measured: float
    # The guest's CPU outside its pods (the kubelet, containerd, the shims, the kernel's
    # own threads) over the same interval.
    outside_pods: CpuStat
    server_request: int  # millicores
    # Each neighbour's request (millicores) and its container's cgroup over the run.
    neighbours: Sequence[tuple[int, CpuStat]] = ()
    # The server's cpu.max sampled during the run: (seconds from the load's start,
    # millicores, None for no limit).
    limits: Sequence[tuple[float, int | None]] = ()
    load: float = 0.0  # the machine's 1-minute load average at the run's end
    # The server's usage_usec sampled with its limit: (seconds from the load's start,
    # microseconds); and the load's schedule (``parse_phases``).
    usage: Sequence[tuple[float, int]] = ()
    phases: Sequence[tuple[float, float]] = ()

    def latency(self, fraction: float) -> float:
        return percentile([r.latency for r in self.requests], fraction)

    @property
    def throughput(self) -> float:
        """Answers per second, until the last one: a server that falls behind takes longer
        than the schedule to answer it."""
        end = max((r.scheduled + r.latency for r in self.requests), default=self.seconds)
        return sum(r.ok for r in self.requests) / max(end, self.seconds)

    @property
    def errors(self) -> int:
        return sum(not r.ok for r in self.requests)

    @property
    def throttled_ratio(self) -> float:
        return self.server.nr_throttled / self.server.nr_periods if self.server.nr_periods else 0.0

    @property
    def throttled_seconds(self) -> float:
        return self.server.throttled_usec / 1e6

    @property
    def server_cores(self) -> float:
        return self.server.usage_usec / 1e6 / self.measured

    @property
    def outside_cores(self) -> float:
        return self.outside_pods.usage_usec / 1e6 / self.measured

    @property
    def peak_cores(self) -> float | None:
        """The server's CPU over the sampled intervals that lie wholly inside the
        schedule's busiest phase, where it asks for the most: over the whole run it uses
        only what its requests cost, whatever it was allowed (None: no interval there)."""
        if not self.phases:
            return None
        cycle = sum(seconds for _, seconds in self.phases)
        busiest = max(range(len(self.phases)), key=lambda i: self.phases[i][0])
        start = sum(seconds for _, seconds in self.phases[:busiest])
        end = start + self.phases[busiest][1]
        used = spent = 0.0
        for (t0, u0), (t1, u1) in itertools.pairwise(self.usage):
            if (
                t0 >= 0
                and t1 <= self.seconds
                and t0 // cycle == t1 // cycle
                and start <= t0 % cycle
                and t1 % cycle <= end
            ):
                used += (u1 - u0) / 1e6
                spent += t1 - t0
        return used / spent if spent else None

    @property
    def neighbour_received(self) -> list[float]:
        """Each neighbour's CPU over the run as a fraction of its request."""
        return [
            stat.usage_usec / 1e6 / self.measured / (request / 1000)
            for request, stat in self.neighbours
        ]


@dataclass(frozen=True)
class Case:
    """The medians over a case's rounds."""

    runs: Sequence[Run]

    def _median(self, values: Iterable[float]) -> float:
        return statistics.median(values)

    @property
    def p50(self) -> float:
        return self._median(r.latency(0.5) for r in self.runs)

    @property
    def p99(self) -> float:
        return self._median(r.latency(0.99) for r in self.runs)

    @property
    def p999(self) -> float:
        return self._median(r.latency(0.999) for r in self.runs)

    @property
    def throughput(self) -> float:
        return self._median(r.throughput for r in self.runs)

    @property
    def throttled_ratio(self) -> float:
        return self._median(r.throttled_ratio for r in self.runs)

    @property
    def throttled_seconds(self) -> float:
        return self._median(r.throttled_seconds for r in self.runs)

    @property
    def server_cores(self) -> float:
        return self._median(r.server_cores for r in self.runs)

    @property
    def peak_cores(self) -> float | None:
        peaks = [p for p in (r.peak_cores for r in self.runs) if p is not None]
        return self._median(peaks) if peaks else None

    @property
    def neighbour_received_min(self) -> float | None:
        """The least any neighbour received, as a fraction of its request, in any round."""
        received = [f for r in self.runs for f in r.neighbour_received]
        return min(received) if received else None

    @property
    def representative(self) -> Run:
        """The round whose p99 is the median: the one a picture shows."""
        ordered = sorted(self.runs, key=lambda r: r.latency(0.99))
        return ordered[(len(ordered) - 1) // 2]


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)

    def bookings(self) -> list[str]:
        return list(dict.fromkeys(r.booking for r in self.runs))

    def case(self, booking: str, mode: str) -> Case:
        runs = [r for r in self.runs if r.booking == booking and r.mode == mode]
        if not runs:
            raise KeyError(f"no run of {mode} on {booking}")
        return Case(runs)

    def cases(self, booking: str) -> Mapping[str, Case]:
        return {mode: self.case(booking, mode) for mode in MODES}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _cores(cores: float | None) -> str:
    return "-" if cores is None else f"{cores:.2f}"


def runs_table(results: Results) -> str:
    """Every run, in the order run, with the machine's load at its end."""
    header = (
        f"{'round':>5}  {'booking':<10} {'mode':<9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'p99.9 ms':>9} {'req/s':>6} {'thr.ratio':>9} {'thr. s':>7} {'cores':>5} "
        f"{'peak':>5} {'neighbours':>10} {'system':>6} {'load':>5}"
    )
    lines = [header]
    for run in results.runs:
        received = run.neighbour_received
        neighbours = f"{min(received):.1%}" if received else "-"
        lines.append(
            f"{run.round:>5}  {run.booking:<10} {run.mode:<9} {_ms(run.latency(0.5)):>8} "
            f"{_ms(run.latency(0.99)):>8} {_ms(run.latency(0.999)):>9} "
            f"{run.throughput:>6.1f} {run.throttled_ratio:>9.1%} "
            f"{run.throttled_seconds:>7.2f} {run.server_cores:>5.2f} "
            f"{_cores(run.peak_cores):>5} {neighbours:>10} "
            f"{run.outside_cores:>6.2f} {run.load:>5.2f}"
        )
    return "\n".join(lines)


def cases_table(results: Results) -> str:
    """Medians per case, then Headroom's ratios to static limits and to no limit."""
    lines = [
        f"{'booking':<10} {'mode':<9} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} "
        f"{'req/s':>6} {'thr.ratio':>9} {'thr. s':>7} {'cores':>5} {'peak':>5} "
        f"{'neighbours':>10}"
    ]
    for booking in results.bookings():
        for mode, case in results.cases(booking).items():
            least = case.neighbour_received_min
            lines.append(
                f"{booking:<10} {mode:<9} {_ms(case.p50):>8} {_ms(case.p99):>8} "
                f"{_ms(case.p999):>9} {case.throughput:>6.1f} {case.throttled_ratio:>9.1%} "
                f"{case.throttled_seconds:>7.2f} {case.server_cores:>5.2f} "
                f"{_cores(case.peak_cores):>5} {'-' if least is None else f'{least:.1%}':>10}"
            )
    lines.append("")
    lines.append(
        f"{'booking':<10} {'Headroom vs':<11} {'p50':>6} {'p99':>6} {'p99.9':>6} {'req/s':>6}"
    )
    for booking in results.bookings():
        cases = results.cases(booking)
        headroom = cases["headroom"]
        for other in ("static", "no-limit"):
            base = cases[other]
            lines.append(
                f"{booking:<10} {other:<11} {headroom.p50 / base.p50:>6.2f} "
                f"{headroom.p99 / base.p99:>6.2f} {headroom.p999 / base.p999:>6.2f} "
                f"{headroom.throughput / base.throughput:>6.2f}"
            )
    return "\n".join(lines)


@dataclass(frozen=True)
class Criterion:
    text: str
    met: bool


def criteria(results: Results, *, busy: str, calm: Sequence[str]) -> list[Criterion]:
    """The issue's bar: on the ``calm`` bookings Headroom's p99 within 10 % of no limit and
    at most 1 % of periods throttled; on ``busy``, every neighbour at least 99 % of its
    request and the server at least its own."""
    found = []
    for booking in calm:
        cases = results.cases(booking)
        ratio = cases["headroom"].p99 / cases["no-limit"].p99
        found.append(
            Criterion(
                f"{booking}: Headroom's p99 / no limit's = {ratio:.2f} (at most 1.10)",
                ratio <= 1.10,
            )
        )
        throttled = max(r.throttled_ratio for r in cases["headroom"].runs)
        found.append(
            Criterion(
                f"{booking}: Headroom's throttled ratio, worst round {throttled:.2%} (at most 1%)",
                throttled <= 0.01,
            )
        )
    headroom = results.case(busy, "headroom")
    least = headroom.neighbour_received_min
    found.append(
        Criterion(
            f"{busy}: the least a neighbour received under Headroom, any round: "
            f"{'-' if least is None else f'{least:.1%}'} of its request (at least 99%)",
            least is not None and least >= 0.99,
        )
    )
    # A run with no interval sampled inside a peak counts as unmeasured, not as met.
    ratios = [
        None if r.peak_cores is None else r.peak_cores * 1000 / r.server_request
        for r in headroom.runs
    ]
    server = None if None in ratios else min(x for x in ratios if x is not None)
    found.append(
        Criterion(
            f"{busy}: the server's CPU at its peaks under Headroom, worst round: "
            f"{'-' if server is None else f'{server:.2f}x'} its request (at least 1.00)",
            server is not None and server >= 1.0,
        )
    )
    return found


def windows(run: Run, *, width: float = 1.0) -> list[tuple[float, float, float]]:
    """(window start, p50, p99) of the requests scheduled in each ``width``-second window."""
    buckets: dict[int, list[float]] = {}
    for request in run.requests:
        buckets.setdefault(int(request.scheduled // width), []).append(request.latency)
    return [
        (index * width, percentile(values, 0.5), percentile(values, 0.99))
        for index, values in sorted(buckets.items())
    ]


@dataclass(frozen=True)
class Reaction:
    """A busy neighbour bound next to the loaded server at its high limit."""

    trial: Trial
    before: Sequence[Request]  # scheduled before the binding
    after: Sequence[Request]  # scheduled after the shrink, before the neighbour's deletion


def reaction_report(reactions: Sequence[Reaction], *, neighbour_millis: int) -> str:
    steps = [r.trial.shrink for r in reactions]

    def latency(requests: Callable[[Reaction], Sequence[Request]], fraction: float) -> str:
        values = [
            percentile([q.latency for q in requests(r)], fraction) for r in reactions if requests(r)
        ]
        return _ms(statistics.median(values)) if values else "-"

    def before(r: Reaction) -> Sequence[Request]:
        return r.before

    def after(r: Reaction) -> Sequence[Request]:
        return r.after

    return "\n".join(
        [
            f"{len(reactions)} trials: a busy neighbour ({neighbour_millis}m) bound next to the "
            "loaded server at its high limit",
            "binding -> the server's cpu.max shrunk (as long as the neighbour may get less "
            f"than its request): {distribution([s.total for s in steps])}",
            f"  Headroom (debounce, reconcile, write): {distribution([s.headroom for s in steps])}",
            f"    of which the resize request: {distribution([s.write for s in steps])}",
            f"  kubelet (resize accepted -> cpu.max): {distribution([s.kubelet for s in steps])}",
            f"server latency before the binding: p50 {latency(before, 0.5)} ms, "
            f"p99 {latency(before, 0.99)} ms (medians over the trials)",
            f"server latency after the shrink:   p50 {latency(after, 0.5)} ms, "
            f"p99 {latency(after, 0.99)} ms",
        ]
    )


def markdown_table(results: Results) -> str:
    """The docs' table ("What Headroom buys"): each case's latency as a multiple of the same
    booking's no-limit case, its throttled periods, the server's CPU over the run and at its
    peaks against its request, and the least any neighbour got of its request."""
    lines = [
        "| booking | limit | p50 | p99 | p99.9 | throttled periods | server's CPU "
        "| at its peaks | least a neighbour got |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for booking in results.bookings():
        cases = results.cases(booking)
        base = cases["no-limit"]
        for mode, case in cases.items():
            request = case.runs[0].server_request / 1000
            least, peak = case.neighbour_received_min, case.peak_cores
            lines.append(
                f"| `{booking}` | `{mode}` | {case.p50 / base.p50:.2f}x | "
                f"{case.p99 / base.p99:.2f}x | {case.p999 / base.p999:.2f}x | "
                f"{case.throttled_ratio:.1%} | {case.server_cores / request:.2f}x its request | "
                f"{'-' if peak is None else f'{peak / request:.2f}x'} | "
                f"{'-' if least is None else f'{least:.1%}'} |"
            )
    return "\n".join(lines)
