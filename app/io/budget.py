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


class TokenBucket:
    """Tokens refilled at `rate` per second up to `burst`.

    `reserve` hands out reservations: taking a token may drive the balance negative, and
    the caller waits until its token would have been refilled, so callers are served in
    arrival order and a burst never exceeds the configured size.
    """

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

    def take(self) -> bool:
        """Take a token if a whole one is there."""
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def give_back(self) -> None:
        self._refill()
        self._tokens = min(float(self._burst), self._tokens + 1)

    def seconds_to_next(self) -> float:
        """How long until a whole token is there."""
        self._refill()
        return max(0.0, (1 - self._tokens) / self._rate)

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._stamp)
        self._stamp = now
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._rate)


class WriteBudget:
    def __init__(
        self, *, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._bucket = TokenBucket(rate=rate, burst=burst, clock=clock)
        self._waiters: tuple[deque[asyncio.Future[None]], ...] = tuple(deque() for _ in Lane)
        self._timer: asyncio.TimerHandle | None = None

    @property
    def rate(self) -> float:
        return self._bucket.rate

    @property
    def burst(self) -> int:
        return self._bucket.burst

    def waiting(self, lane: Lane) -> int:
        return sum(1 for waiter in self._waiters[lane] if not waiter.done())

    def reconfigure(self, *, rate: float, burst: int) -> None:
        self._bucket.reconfigure(rate=rate, burst=burst)
        self._dispatch()

    async def acquire(self, lane: Lane) -> None:
        """Wait for a token; higher lanes and earlier arrivals are served first."""
        if not any(self._pending(up_to=lane)) and self._bucket.take():
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
        self._bucket.give_back()
        self._dispatch()

    def _pending(self, *, up_to: Lane) -> list[int]:
        return [self.waiting(lane) for lane in Lane if lane <= up_to]

    def _dispatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for queue in self._waiters:
            while queue:
                if queue[0].done():
                    queue.popleft()
                elif self._bucket.take():
                    queue.popleft().set_result(None)
                else:
                    break
        if any(queue for queue in self._waiters):
            delay = self._bucket.seconds_to_next()
            self._timer = asyncio.get_running_loop().call_later(delay, self._dispatch)
