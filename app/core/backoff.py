"""Exponential back-off with full jitter for retrying failed API calls."""

import random


class ExponentialBackoff:
    def __init__(self, *, initial: float, cap: float, rand: random.Random | None = None) -> None:
        self._initial = initial
        self._cap = cap
        self._rand = rand if rand is not None else random.Random()  # noqa: S311 - jitter, not crypto
        self._failures = 0

    def next_delay(self) -> float:
        """Record a failure and return how long to wait before the next attempt."""
        ceiling = min(self._cap, self._initial * 2.0**self._failures)
        self._failures += 1
        # Half fixed, half random: never retry immediately, never all together.
        return ceiling / 2 + self._rand.uniform(0.0, ceiling / 2)

    def reset(self) -> None:
        self._failures = 0
