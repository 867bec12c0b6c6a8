"""Client-side write budgets: token buckets whose waiters are served in arrival order.

Headroom's writes come in two lanes, each with a budget of its own: resizes (and the
config's status) under `clientQPS`/`clientBurst`, and the annotations and events that
explain them under `explanationQPS`/`explanationBurst`, as client-go gives its event
recorder a client of its own. A wave of explanations therefore never delays a resize, and
the write load stays bounded by the two rates together.
"""

import asyncio
from collections import deque
from collections.abc import Callable
from enum import IntEnum

from app.io.clock import Clock, LoopClock, Timer

# Refills are floating-point sums: a balance this close to a whole token is one.
_ROUNDING = 1e-9


class Lane(IntEnum):
    # Resizes and the config status.
    PRIMARY = 0
    # Annotations and events.
    SECONDARY = 1


class TokenBucket:
    """Tokens refilled at `rate` per second up to `burst`.

    `reserve` hands out reservations: taking a token may drive the balance negative, and
    the caller waits until its token would have been refilled, so callers are served in
    arrival order and a burst never exceeds the configured size.
    """

    def __init__(self, *, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = clock()

    def reconfigure(self, *, rate: float, burst: int) -> None:
        self._refill()
        self.rate = rate
        self.burst = burst
        self._tokens = min(self._tokens, float(burst))

    def reserve(self) -> float:
        """Take one token; return how many seconds to wait before acting on it."""
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def take(self) -> bool:
        """Take a token if a whole one is there (to within rounding: a timer set for the
        moment the token is whole must find it whole)."""
        self._refill()
        if self._tokens < 1 - _ROUNDING:
            return False
        self._tokens -= 1
        return True

    def give_back(self) -> None:
        self._refill()
        self._tokens = min(float(self.burst), self._tokens + 1)

    def seconds_to_next(self) -> float:
        """How long until a whole token is there."""
        self._refill()
        return max(0.0, (1 - self._tokens) / self.rate)

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._stamp)
        self._stamp = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)


class WriteBudget:
    def __init__(self, *, rate: float, burst: int, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._bucket = TokenBucket(rate=rate, burst=burst, clock=self._clock)
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._timer: Timer | None = None

    @property
    def rate(self) -> float:
        return self._bucket.rate

    @property
    def burst(self) -> int:
        return self._bucket.burst

    def waiting(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.done())

    def reconfigure(self, *, rate: float, burst: int) -> None:
        self._bucket.reconfigure(rate=rate, burst=burst)
        self._dispatch()

    async def acquire(self) -> None:
        """Wait for a token; earlier arrivals are served first."""
        if not self.waiting() and self._bucket.take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
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

    def _dispatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiters:
            if self._waiters[0].done():
                self._waiters.popleft()
            elif self._bucket.take():
                self._waiters.popleft().set_result(None)
            else:
                break
        if self._waiters:
            self._timer = self._clock.call_later(self._bucket.seconds_to_next(), self._dispatch)
