"""When the writers are busy, and when a wave of writes is over, on the injected clock.

The resize and explanation lanes report each change of their backlog here. `settle`
waits for both to be idle; `wave_settled` waits until writes were planned and then none
has been for a quiet period (the reconciler hands freed heap pages back after each wave).
"""

import asyncio
from collections.abc import Callable

from app.io.clock import Clock, wait


class Activity:
    def __init__(self, *, clock: Clock) -> None:
        self._clock = clock
        self._busy: list[Callable[[], bool]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._worked = asyncio.Event()

    def watch(self, busy: Callable[[], bool]) -> None:
        """Count ``busy`` (a lane's "anything planned or in flight?") in."""
        self._busy.append(busy)

    def worked(self) -> None:
        """Something was planned."""
        self._idle.clear()
        self._worked.set()

    def check(self) -> None:
        """A lane's backlog may have emptied."""
        if any(busy() for busy in self._busy):
            self.worked()
        else:
            self._idle.set()

    async def settle(self) -> None:
        """Wait until every planned write has been sent or called off."""
        self.check()
        await self._idle.wait()

    async def wave_settled(self, *, quiet: float) -> None:
        """Return once writes have been planned, then none has been for ``quiet`` seconds."""
        await self._worked.wait()
        while True:
            self._worked.clear()
            await self.settle()
            if not await wait(self._clock, self._worked, quiet):
                return
