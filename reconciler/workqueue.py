"""The node work queue: level-based, keyed by node name, with per-node debounce.

A key is scheduled at most once. The debounce trails: each change to a node pushes its
reconcile back by the (jittered) period, so a rollout landing many pods on a node yields
one reconcile once they have all landed, and its pods are resized once, straight to
their final targets. Steady churn cannot postpone a node forever: a node is reconciled
at most `MAX_DEBOUNCE_PERIODS` periods after its first pending change. Any other add
only ever moves a key earlier. A key being reconciled is never handed to a second
worker; if it is added meanwhile it is scheduled again when the worker calls `done`, so
the change that arrived mid-reconcile is not lost.

The clock and random source are injected so tests drive the queue without sleeping.
"""

import asyncio
import contextlib
import heapq
import random
import time
from collections.abc import Callable

# Spread of a prompt reaction (config or namespace enrolment change): fast, but not every
# node in the same instant.
PROMPT_SPREAD_SECONDS = 0.5
# The longest a node's first pending change waits, in debounce periods.
MAX_DEBOUNCE_PERIODS = 3


class NodeQueue:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        rand: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self._rand = rand if rand is not None else random.Random()  # noqa: S311 - jitter, not crypto
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._active: set[str] = set()
        self._held: dict[str, float] = {}
        # Keys whose schedule is a trailing debounce, with the time of their first change.
        self._settling: dict[str, float] = {}
        self._wakeup = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._due) + len(self._held)

    def __contains__(self, key: object) -> bool:
        return key in self._due or key in self._held

    def add(self, key: str, *, delay: float = 0.0) -> None:
        """Schedule `key` in `delay` seconds unless it is already due sooner."""
        due = self._clock() + max(0.0, delay)
        if key in self._active:
            self._held[key] = min(due, self._held.get(key, due))
            return
        current = self._due.get(key)
        if current is not None and current <= due:
            return
        self._settling.pop(key, None)
        self._schedule(key, due)

    def add_debounced(self, key: str, *, period: float) -> None:
        """Schedule once the node has been quiet for the debounce period (jittered ±50% so
        nodes do not move in step), at most `MAX_DEBOUNCE_PERIODS` after its first change."""
        now = self._clock()
        due = now + period * self._rand.uniform(0.5, 1.5)
        if key in self._active or (key in self._due and key not in self._settling):
            # Reconciling, or due for another reason: that look sees this change too.
            self.add(key, delay=due - now)
            return
        first = self._settling.setdefault(key, now)
        self._schedule(key, min(due, first + MAX_DEBOUNCE_PERIODS * period))

    def _schedule(self, key: str, due: float) -> None:
        self._due[key] = due
        heapq.heappush(self._heap, (due, key))
        self._wakeup.set()

    def add_spread(self, key: str, *, window: float) -> None:
        """Schedule at a uniformly random point within `window` seconds."""
        self.add(key, delay=self._rand.uniform(0.0, max(0.0, window)))

    def add_prompt(self, key: str) -> None:
        self.add_spread(key, window=PROMPT_SPREAD_SECONDS)

    def next_due(self) -> float | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_ready(self) -> str | None:
        """Hand out a key whose time has come and mark it active, or None."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > self._clock():
            return None
        _, key = heapq.heappop(self._heap)
        del self._due[key]
        self._settling.pop(key, None)
        self._active.add(key)
        return key

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
            key = self.pop_ready()
            if key is not None:
                return key
            due = self.next_due()
            timeout = None if due is None else max(0.0, due - self._clock())
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)
        return None

    def _drop_stale(self) -> None:
        # Moving a key earlier leaves its old heap entry behind; skip entries that no longer
        # match the key's schedule.
        while self._heap:
            due, key = self._heap[0]
            if self._due.get(key) == due:
                return
            heapq.heappop(self._heap)
