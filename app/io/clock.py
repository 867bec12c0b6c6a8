"""Time for the parts that wait: one injected clock, so tests drive time instead of sleeping.

A `Clock` tells the time (`clock()`) and runs a callback later (`call_later`); `wait` is
built on those two. `LoopClock` is the event loop's own monotonic time.
Tests use a manual clock that fires its callbacks when advanced.
"""

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def __call__(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    def call_later(self, delay: float, callback: Callable[[], object]) -> Timer: ...


class LoopClock:
    """Monotonic time, and the running event loop's timers (which take relative delays)."""

    def __call__(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)


async def wait(clock: Clock, event: asyncio.Event, within: float | None) -> bool:
    """Wait until ``event`` is set or ``within`` seconds of ``clock``'s time have passed
    (None: no limit); whether the event is set."""
    if event.is_set() or within is None:
        await event.wait()
        return True
    waiter = asyncio.ensure_future(event.wait())
    # Cancelling a waiter that is already done does nothing.
    timer = clock.call_later(within, waiter.cancel)
    try:
        await waiter
    except asyncio.CancelledError:
        if event.is_set():
            return True
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        return False
    finally:
        timer.cancel()
        waiter.cancel()
    return True
