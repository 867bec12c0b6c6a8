"""Token buckets for writes: one per node (`perNodePatchesPerSecond`) and one for the client.

A bucket hands out reservations: taking a token may drive the balance negative, and the
caller waits until its token would have been refilled. Callers are therefore served in
arrival order and a burst never exceeds the configured size.
"""

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self, *, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._rate = rate
        self._burst = burst
        self._tokens = float(burst)
        self._stamp = clock()

    @property
    def rate(self) -> float:
        return self._rate

    @property
    def burst(self) -> int:
        return self._burst

    def reconfigure(self, *, rate: float, burst: int) -> None:
        self._refill()
        self._rate = rate
        self._burst = burst
        self._tokens = min(self._tokens, float(burst))

    def reserve(self) -> float:
        """Take one token; return how many seconds to wait before acting on it."""
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._rate

    async def wait(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._stamp)
        self._stamp = now
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._rate)


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
