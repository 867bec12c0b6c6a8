"""Per-node write pacing (`perNodePatchesPerSecond`): a token bucket per node; and every
rate the config sets, retuned together (`Limiters`).

The client-wide budget every write spends is `app.io.budget.WriteBudget`.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from app.core.config import Settings
from app.io.budget import TokenBucket, WriteBudget


class NodeBuckets:
    """One bucket per node, created on first use, all sharing one rate."""

    def __init__(self, *, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._rate = rate
        self._buckets: dict[str, TokenBucket] = {}

    def for_node(self, node: str) -> TokenBucket:
        bucket = self._buckets.get(node)
        if bucket is None:
            bucket = TokenBucket(rate=self._rate, burst=_burst_for(self._rate), clock=self._clock)
            self._buckets[node] = bucket
        return bucket

    def forget(self, node: str) -> None:
        self._buckets.pop(node, None)

    def reconfigure(self, *, rate: float) -> None:
        if rate == self._rate:
            return
        self._rate = rate
        for bucket in self._buckets.values():
            bucket.reconfigure(rate=rate, burst=_burst_for(rate))


def _burst_for(rate: float) -> int:
    # A node may spend one second's worth of patches at once: a rollout that lands several
    # pods on a node is resized in one reconcile without waiting between pods.
    return max(1, int(rate))


@dataclass(frozen=True, kw_only=True, slots=True)
class Limiters:
    """The node pace and the client-side budgets, retuned when the config changes."""

    pace: NodeBuckets
    resizes: WriteBudget
    explanations: WriteBudget

    def retune(self, settings: Settings) -> None:
        self.pace.reconfigure(rate=float(settings.per_node_patches_per_second))
        self.resizes.reconfigure(rate=float(settings.client_qps), burst=settings.client_burst)
        self.explanations.reconfigure(
            rate=float(settings.explanation_qps), burst=settings.explanation_burst
        )
