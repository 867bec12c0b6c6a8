"""What ``make bench-tenant``'s weighted case computes (no I/O, no clock): the ceiling
HeadroomConfig's ``spec.weights`` should give each managed pod, from the node's
allocatable CPU and its bookings as the API shows them, and the two servers' figures per
mode (medians over rounds), the docs' table and the criteria, as text.

The prediction is the policy's formula written out again here, from its contract, not
imported, so that the bench holds the reconciler to the contract rather than to its own
arithmetic (the bookings are counted by ``app.core.pods``, as Headroom counts them).
Slack ``S`` = allocatable - booked, each managed pod's request ``r_i`` and weight ``w_i``
(1 unless a rule matched it), ``W`` = sum of ``w_i * r_i`` over the node's ``N`` managed
pods:

    raw_i = r_i + round(max(S * w_i * r_i / W, min(floor, S / N)))    when S > 0

(the share is 0 when ``W`` is 0; ``round`` is half up), capped at ``maxMultiplier`` x the
request and at the node's allocatable, and rounded to the nearest ``quantum`` (one
quantum down if that passes the cap, never below the request).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from bench.tenant_figures import Criterion, Run

# The modes of the weighted case, in the order each round runs them.
WEIGHTED_MODES = ("headroom", "headroom-weighted", "static", "no-limit")
HEADROOM_MODES = ("headroom", "headroom-weighted")


@dataclass(frozen=True)
class WeightRule:
    """One of ``spec.weights``: its weight for the pods in ``priority_class`` (every pod
    when None). The bench uses no selectors; a rule is matched by its priority class."""

    weight: int
    priority_class: str | None = None

    def matches(self, pod: Mapping[str, Any]) -> bool:
        return (
            self.priority_class is None
            or pod.get("spec", {}).get("priorityClassName") == self.priority_class
        )

    def spec(self) -> dict[str, Any]:
        """The rule as HeadroomConfig carries it."""
        rule: dict[str, Any] = {"weight": self.weight}
        if self.priority_class is not None:
            rule["priorityClassName"] = self.priority_class
        return rule


def weight_of(pod: Mapping[str, Any], rules: Sequence[WeightRule]) -> tuple[int, str | None]:
    """The first matching rule's weight and its path in the config (``spec.weights[0]``);
    (1, None) when none matches."""
    for index, rule in enumerate(rules):
        if rule.matches(pod):
            return rule.weight, f"spec.weights[{index}]"
    return 1, None


@dataclass(frozen=True)
class Policy:
    """The settings the prediction depends on (the rest at defaults do not enter it)."""

    floor: int = 1000  # minBurstFloor, millicores
    max_multiplier: Fraction = Fraction(10)  # 0: no cap
    quantum: int = 10


@dataclass(frozen=True)
class ManagedPod:
    name: str
    request: int  # millicores
    weight: int = 1


def _half_up(value: Fraction) -> int:
    return (2 * value.numerator + value.denominator) // (2 * value.denominator)


def predict_ceilings(
    *, allocatable: int, booked: int, pods: Sequence[ManagedPod], policy: Policy
) -> dict[str, int]:
    """Each managed pod's ceiling (millicores) by the weighted formula above."""
    slack = allocatable - booked
    weighted = sum(p.weight * p.request for p in pods)
    ceilings = {}
    for pod in pods:
        raw = pod.request
        if slack > 0 and pods:
            share = (
                Fraction(slack * pod.weight * pod.request, weighted) if weighted else Fraction(0)
            )
            floor = min(Fraction(policy.floor), Fraction(slack, len(pods)))
            raw += _half_up(max(share, floor))
        hi = allocatable
        if policy.max_multiplier:
            hi = min(hi, _half_up(policy.max_multiplier * pod.request))
        hi = max(hi, pod.request)
        ceilings[pod.name] = _quantize(min(raw, hi), request=pod.request, hi=hi, q=policy.quantum)
    return ceilings


def _quantize(raw: int, *, request: int, hi: int, q: int) -> int:
    if raw == request:
        return request
    target = q * _half_up(Fraction(raw, q))
    if target > hi:
        target -= q
    return max(target, request)


@dataclass(frozen=True)
class ServerRun:
    """One server in one run of the weighted case: its measurements (``run``, whose
    ``mode`` is the case's), its settled ``cpu.max`` and the ceiling predicted for it
    (millicores; None: no limit), what its status annotation said of its weight (None:
    no annotation), and the node's slack when it settled."""

    server: str
    run: Run
    settled: int | None
    predicted: int | None
    weight: int | None = None
    weight_rule: str | None = None
    slack: int | None = None

    @property
    def mode(self) -> str:
        return self.run.mode

    @property
    def round(self) -> int:
        return self.run.round

    @property
    def request(self) -> int:
        return self.run.server_request

    @property
    def off_by(self) -> int | None:
        """Settled minus predicted (millicores); None when either is no limit."""
        if self.settled is None or self.predicted is None:
            return None
        return self.settled - self.predicted


def _median_of(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


@dataclass(frozen=True)
class ServerCase:
    """One server in one mode: the medians over its rounds."""

    runs: Sequence[ServerRun]

    def _median(self, value: Callable[[ServerRun], float | None]) -> float | None:
        return _median_of(value(r) for r in self.runs)

    @property
    def settled(self) -> float | None:
        return self._median(lambda r: r.settled)

    @property
    def predicted(self) -> float | None:
        return self._median(lambda r: r.predicted)

    @property
    def p50(self) -> float:
        return statistics.median(r.run.latency(0.5) for r in self.runs)

    @property
    def p99(self) -> float:
        return statistics.median(r.run.latency(0.99) for r in self.runs)

    @property
    def throttled_ratio(self) -> float:
        return statistics.median(r.run.throttled_ratio for r in self.runs)

    @property
    def peak_cores(self) -> float | None:
        return self._median(lambda r: r.run.peak_cores)

    @property
    def server_cores(self) -> float:
        return statistics.median(r.run.server_cores for r in self.runs)

    @property
    def weight(self) -> int | None:
        weights = [r.weight for r in self.runs if r.weight is not None]
        return weights[-1] if weights else None

    @property
    def request(self) -> int:
        return self.runs[0].request


@dataclass
class WeightedResults:
    runs: list[ServerRun] = field(default_factory=list)

    def servers(self) -> list[str]:
        return list(dict.fromkeys(r.server for r in self.runs))

    def modes(self) -> list[str]:
        present = {r.mode for r in self.runs}
        return [m for m in WEIGHTED_MODES if m in present]

    def case(self, mode: str, server: str) -> ServerCase:
        runs = [r for r in self.runs if r.mode == mode and r.server == server]
        if not runs:
            raise KeyError(f"no run of server {server} under {mode}")
        return ServerCase(runs)


def _millis(value: float | None) -> str:
    return "none" if value is None else f"{value:.0f}m"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _cores(cores: float | None) -> str:
    return "-" if cores is None else f"{cores:.2f}"


def _weight(run: ServerRun) -> str:
    if run.weight is None:
        return "-"
    return str(run.weight) if run.weight_rule is None else f"{run.weight} ({run.weight_rule})"


def weighted_runs_table(results: WeightedResults) -> str:
    """Every server in every run, in the order run, with the guest's CPU outside its pods
    and the machine's load average at the run's end (both the same for the run's two
    servers)."""
    lines = [
        f"{'round':>5}  {'mode':<17} {'server':<6} {'weight':<22} {'predicted':>9} "
        f"{'cpu.max':>8} {'slack':>6} {'p50 ms':>8} {'p99 ms':>8} {'thr.ratio':>9} "
        f"{'cores':>5} {'peak':>5} {'system':>6} {'load':>5}"
    ]
    for run in results.runs:
        slack = "-" if run.slack is None else f"{run.slack}m"
        lines.append(
            f"{run.round:>5}  {run.mode:<17} {run.server:<6} {_weight(run):<22} "
            f"{_millis(run.predicted) if run.mode in HEADROOM_MODES else '-':>9} "
            f"{_millis(run.settled):>8} {slack:>6} {_ms(run.run.latency(0.5)):>8} "
            f"{_ms(run.run.latency(0.99)):>8} {run.run.throttled_ratio:>9.1%} "
            f"{run.run.server_cores:>5.2f} {_cores(run.run.peak_cores):>5} "
            f"{run.run.outside_cores:>6.2f} {run.run.load:>5.2f}"
        )
    return "\n".join(lines)


def weighted_cases_table(results: WeightedResults) -> str:
    """The medians per mode and server."""
    lines = [
        f"{'mode':<17} {'server':<6} {'predicted':>9} {'cpu.max':>8} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'thr.ratio':>9} {'cores':>5} {'peak':>5}"
    ]
    for mode in results.modes():
        for server in results.servers():
            case = results.case(mode, server)
            predicted = _millis(case.predicted) if mode in HEADROOM_MODES else "-"
            lines.append(
                f"{mode:<17} {server:<6} {predicted:>9} {_millis(case.settled):>8} "
                f"{_ms(case.p50):>8} {_ms(case.p99):>8} {case.throttled_ratio:>9.1%} "
                f"{case.server_cores:>5.2f} {_cores(case.peak_cores):>5}"
            )
    return "\n".join(lines)


def weighted_markdown_table(results: WeightedResults, *, labels: Mapping[str, str]) -> str:
    """The docs' table: per mode and server (``labels``: how each server is described),
    the ceiling the formula predicts and the one ``cpu.max`` settled at, the throttled
    periods, the CPU at its peaks against its request, and its latency as a multiple of
    the same server's with no limit; medians over rounds."""
    lines = [
        "| limit | server | ceiling predicted | `cpu.max` settled | throttled periods "
        "| CPU at its peaks | p50 | p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode in results.modes():
        for server in results.servers():
            case = results.case(mode, server)
            base = results.case("no-limit", server)
            request = case.request / 1000
            predicted = _millis(case.predicted) if mode in HEADROOM_MODES else "-"
            peak = case.peak_cores
            lines.append(
                f"| `{mode}` | {labels.get(server, server)} | {predicted} | "
                f"{_millis(case.settled)} | {case.throttled_ratio:.1%} | "
                f"{'-' if peak is None else f'{peak / request:.2f}x its request'} | "
                f"{case.p50 / base.p50:.2f}x | {case.p99 / base.p99:.2f}x |"
            )
    return "\n".join(lines)


def weighted_criteria(
    results: WeightedResults, *, favoured: str, other: str, weight: int, rule: str, quantum: int
) -> list[Criterion]:
    """The weighted case's bar: the ``favoured`` server's ceiling under its ``weight`` is
    the predicted one within a quantum in every round, its status annotation names the
    weight and its ``rule``, and its p99 is lower with the weight than without; every
    other Headroom ceiling is the predicted one within a quantum; the ``other`` server
    still gets at least its request at its peaks under the weight (whenever it asks for
    more: with no limit it does); and with no limit each server wants more than a CPU
    at its peaks, which is what makes the comparison mean anything."""
    found = []
    favoured_runs = results.case("headroom-weighted", favoured).runs
    worst = _worst_off(favoured_runs)
    found.append(
        Criterion(
            f"{favoured} (weight {weight}) under headroom-weighted: cpu.max "
            f"{_millis(results.case('headroom-weighted', favoured).settled)} against "
            f"{_millis(results.case('headroom-weighted', favoured).predicted)} predicted, "
            f"worst round off by {_off(worst)} (at most {quantum}m)",
            worst is not None and abs(worst) <= quantum,
        )
    )
    annotated = [(r.weight, r.weight_rule) for r in favoured_runs]
    found.append(
        Criterion(
            f"{favoured} under headroom-weighted: its status annotation's weight, each round: "
            + ", ".join(f"{w if w is not None else '-'} ({r or 'no rule'})" for w, r in annotated)
            + f" (all {weight} ({rule}))",
            all(w == weight and r == rule for w, r in annotated),
        )
    )
    rest = [
        r
        for mode in HEADROOM_MODES
        for r in results.runs
        if r.mode == mode and not (mode == "headroom-weighted" and r.server == favoured)
    ]
    worst_rest = _worst_off(rest)
    found.append(
        Criterion(
            "every other server's cpu.max under Headroom (both modes), worst round off the "
            f"prediction by {_off(worst_rest)} (at most {quantum}m)",
            worst_rest is not None and abs(worst_rest) <= quantum,
        )
    )
    weighted = results.case("headroom-weighted", favoured).p99
    unweighted = results.case("headroom", favoured).p99
    paired = _paired(
        results.case("headroom-weighted", favoured).runs, results.case("headroom", favoured).runs
    )
    lower = sum(w < u for w, u in paired)
    found.append(
        Criterion(
            f"{favoured}'s p99 with the weight {_ms(weighted)} ms, without {_ms(unweighted)} ms: "
            f"ratio {weighted / unweighted:.2f} (below 1.00; lower in {lower} of "
            f"{len(paired)} rounds)",
            weighted < unweighted,
        )
    )
    other_case = results.case("headroom-weighted", other)
    peaks = [r.run.peak_cores for r in other_case.runs]
    least = None if None in peaks else min(p for p in peaks if p is not None)
    request = other_case.request / 1000
    asked = results.case("no-limit", other).peak_cores
    asked_more = asked is None or asked > request
    found.append(
        Criterion(
            f"{other} under headroom-weighted, worst round's CPU at its peaks: "
            f"{'-' if least is None else f'{least / request:.2f}x'} its request (at least "
            f"1.00 when it asks for more; with no limit it used "
            f"{'-' if asked is None else f'{asked / request:.2f}x'})",
            least is not None and (least >= request or not asked_more),
        )
    )
    for server in results.servers():
        demand = results.case("no-limit", server).peak_cores
        found.append(
            Criterion(
                f"with no limit, {server} used {_cores(demand)} cores at its peaks (more than "
                "1: each server wants more than a CPU)",
                demand is not None and demand > 1.0,
            )
        )
    return found


def _paired(these: Sequence[ServerRun], those: Sequence[ServerRun]) -> list[tuple[float, float]]:
    """The p99s of the rounds both sequences ran: (these, those) each."""
    theirs = {r.round: r.run.latency(0.99) for r in those}
    return [(r.run.latency(0.99), theirs[r.round]) for r in these if r.round in theirs]


def _worst_off(runs: Iterable[ServerRun]) -> int | None:
    """The largest deviation from the prediction; None when some run has none."""
    offs = [r.off_by for r in runs]
    if not offs or None in offs:
        return None
    return max((o for o in offs if o is not None), key=abs)


def _off(value: int | None) -> str:
    return "- (unmeasured)" if value is None else f"{value:+d}m"
