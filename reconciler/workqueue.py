"""Work queues: keys due at times, each handed to one worker at a time, on an injected clock.

`DelayQueue` schedules each key at most once. Adding a key only ever moves it earlier. A
key being worked on is never handed to a second worker; if it is added meanwhile it is
scheduled again when the worker calls `done`, so a change that arrived mid-work is not
lost. The resize lane queues pods on it, at their node's pace; the explanation lane, in order.

`NodeQueue` is the reconciler's queue of nodes, level-based and keyed by node name:

- **Debounce.** It trails: each change to a node pushes its reconcile back by the
  (jittered) period, so a rollout landing many pods on a node yields one reconcile once
  they have all landed, and its pods are resized once, straight to their final targets.
  Steady churn cannot postpone a node forever: a node is reconciled at most
  `MAX_DEBOUNCE_PERIODS` periods after its first pending change.
- **Retries.** `retry` requeues with exponential back-off per key and kind of failure
  (full jitter above half the delay), as client-go's rate-limiting queue does; `reset`
  clears a kind's failures once it succeeds, `forget` all of a key's when its node goes
  away. Which of these follows what is chosen in one place, `reconciler.requeue`.

The clock and random source are injected so tests drive the queues without sleeping.
"""

import asyncio
import heapq
import itertools
import random
from collections import Counter
from collections.abc import Hashable
from typing import Final

from app.io.clock import Clock, LoopClock, wait

# Spread of a prompt reaction (config or namespace enrolment change): fast, but not every
# node in the same instant.
PROMPT_SPREAD_SECONDS: Final = 0.5
# The longest a node's first pending change waits, in debounce periods.
MAX_DEBOUNCE_PERIODS: Final = 3


class DelayQueue:
    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._order = itertools.count()
        self._active: set[str] = set()
        self._held: dict[str, float] = {}
        self._wakeup = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._due) + len(self._held)

    def __contains__(self, key: object) -> bool:
        return key in self._due or key in self._held

    def due_in(self, key: str) -> float | None:
        """Seconds until `key` is due (0 while it waits for its worker to finish); None
        when it is not queued."""
        if key in self._held:
            return 0.0
        due = self._due.get(key)
        return None if due is None else max(0.0, due - self._clock())

    def add(self, key: str, *, delay: float = 0.0) -> None:
        """Schedule `key` in `delay` seconds unless it is already due sooner."""
        due = self._clock() + max(0.0, delay)
        if key in self._active:
            self._held[key] = min(due, self._held.get(key, due))
            return
        current = self._due.get(key)
        if current is None or due < current:
            self._schedule(key, due)

    def discard(self, key: str) -> None:
        """Unschedule `key` (a worker holding it keeps it until `done`)."""
        self._due.pop(key, None)
        self._held.pop(key, None)

    def active(self, key: str) -> bool:
        return key in self._active

    def _schedule(self, key: str, due: float) -> None:
        self._due[key] = due
        heapq.heappush(self._heap, (due, next(self._order), key))
        self._wakeup.set()

    def next_due(self) -> float | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_ready(self) -> str | None:
        """Hand out a key whose time has come and mark it active, or None."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > self._clock():
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._due[key]
        self._popped(key)
        self._active.add(key)
        return key

    def _popped(self, key: str) -> None:
        """A key leaves the schedule for a worker."""

    def done(self, key: str) -> None:
        self._active.discard(key)
        held = self._held.pop(key, None)
        if held is not None:
            self.add(key, delay=held - self._clock())

    def shutdown(self) -> None:
        self._closed = True
        self._wakeup.set()

    async def get(self) -> str | None:
        """Wait for the next ready key; None once the queue is shut down."""
        while not self._closed:
            if (key := self.pop_ready()) is not None:
                return key
            due = self.next_due()
            self._wakeup.clear()
            await wait(
                self._clock, self._wakeup, None if due is None else max(0.0, due - self._clock())
            )
        return None

    def _drop_stale(self) -> None:
        # Moving a key earlier (or discarding it) leaves its old heap entry behind; skip
        # entries that no longer match the key's schedule.
        while self._heap:
            due, _, key = self._heap[0]
            if self._due.get(key) == due:
                return
            heapq.heappop(self._heap)


class NodeQueue(DelayQueue):
    def __init__(self, *, clock: Clock | None = None, rand: random.Random | None = None) -> None:
        super().__init__(clock=clock)
        self._rand = rand if rand is not None else random.Random()  # noqa: S311 - jitter, not crypto
        # Keys whose schedule is a trailing debounce, with the time of their first change.
        self._settling: dict[str, float] = {}
        # Consecutive failures per key and kind of failure, for `retry`.
        self._failures: dict[str, Counter[Hashable]] = {}

    def _schedule(self, key: str, due: float) -> None:
        # Scheduled by `add`, for another reason than a debounce: no longer settling.
        self._settling.pop(key, None)
        super()._schedule(key, due)

    def add_debounced(self, key: str, *, period: float) -> None:
        """Schedule once the node has been quiet for the debounce period (jittered ±50% so
        nodes do not move in step), at most `MAX_DEBOUNCE_PERIODS` after its first change."""
        now = self._clock()
        due = now + period * self._rand.uniform(0.5, 1.5)
        if key in self._active or (key in self._due and key not in self._settling):
            # Being reconciled, or due for another reason: that look sees this change too.
            self.add(key, delay=due - now)
            return
        first = self._settling.setdefault(key, now)
        super()._schedule(key, min(due, first + MAX_DEBOUNCE_PERIODS * period))

    def add_spread(self, key: str, *, window: float) -> None:
        """Schedule at a uniformly random point within `window` seconds."""
        self.add(key, delay=self._rand.uniform(0.0, max(0.0, window)))

    def add_prompt(self, key: str) -> None:
        self.add_spread(key, window=PROMPT_SPREAD_SECONDS)

    def retry(self, key: str, stream: Hashable, *, initial: float, cap: float) -> None:
        """Try `key` again after a failure of kind `stream`: `initial` doubled per
        consecutive such failure, up to `cap`, half of it fixed and half jittered (never at
        once, never all together)."""
        counts = self._failures.setdefault(key, Counter())
        failures = counts[stream]
        counts[stream] = failures + 1
        ceiling = min(cap, initial * 2.0**failures)
        self.add(key, delay=ceiling / 2 + self._rand.uniform(0.0, ceiling / 2))

    def debouncing(self, key: str) -> float | None:
        """Seconds until the node's trailing debounce ends, while changes to it are still
        settling; None when it has none pending."""
        if key not in self._settling:
            return None
        due = self._due.get(key)
        return None if due is None else max(0.0, due - self._clock())

    def reset(self, key: str, stream: Hashable) -> None:
        """`key` succeeded at what `stream` counts: its next such failure starts over."""
        counts = self._failures.get(key)
        if counts is not None and counts.pop(stream, None) is not None and not counts:
            del self._failures[key]

    def forget(self, key: str) -> None:
        """`key` is gone: free its failures."""
        self._failures.pop(key, None)

    def forget_all(self) -> None:
        self._failures.clear()

    def _popped(self, key: str) -> None:
        self._settling.pop(key, None)
