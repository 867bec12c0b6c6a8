"""The client-side write budget: one token bucket, two lanes served in priority order.

Every write Headroom makes spends a token of one budget (the config's clientQPS and
clientBurst), so the runbook's promise that the rate limits bound the write load holds
for all of them. Waiters of the primary lane (resizes: what tenants feel) are always
served before waiters of the secondary lane (annotations, events, status: the
explanations), so a queue of explanations never delays a pending resize; within a lane
waiters are served in arrival order.
"""

import asyncio
import time
from collections import deque
from collections.abc import Callable
from enum import IntEnum


class Lane(IntEnum):
    PRIMARY = 0
    SECONDARY = 1


class WriteBudget:
    def __init__(
        self, *, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._rate = rate
        self._burst = burst
        self._tokens = float(burst)
        self._stamp = clock()
        self._waiters: tuple[deque[asyncio.Future[None]], ...] = tuple(deque() for _ in Lane)
        self._timer: asyncio.TimerHandle | None = None

    @property
    def rate(self) -> float:
        return self._rate

    @property
    def burst(self) -> int:
        return self._burst

    def waiting(self, lane: Lane) -> int:
        return sum(1 for waiter in self._waiters[lane] if not waiter.done())

    def reconfigure(self, *, rate: float, burst: int) -> None:
        self._refill()
        self._rate = rate
        self._burst = burst
        self._tokens = min(self._tokens, float(burst))
        self._dispatch()

    async def acquire(self, lane: Lane) -> None:
        """Wait for a token; higher lanes and earlier arrivals are served first."""
        self._refill()
        if self._tokens >= 1 and not any(self._pending(up_to=lane)):
            self._tokens -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[lane].append(waiter)
        self._dispatch()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Granted just as the caller gave up: the token goes to the next waiter.
                self.refund()
            raise

    def refund(self) -> None:
        """Give back a token that was acquired but not spent (the write was called off)."""
        self._refill()
        self._tokens = min(float(self._burst), self._tokens + 1)
        self._dispatch()

    def _pending(self, *, up_to: Lane) -> list[int]:
        return [self.waiting(lane) for lane in Lane if lane <= up_to]

    def _dispatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._refill()
        for queue in self._waiters:
            while queue and self._tokens >= 1:
                waiter = queue.popleft()
                if waiter.done():
                    continue
                self._tokens -= 1
                waiter.set_result(None)
        if any(queue for queue in self._waiters):
            delay = max(0.0, (1 - self._tokens) / self._rate)
            self._timer = asyncio.get_running_loop().call_later(delay, self._dispatch)

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._stamp)
        self._stamp = now
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._rate)
