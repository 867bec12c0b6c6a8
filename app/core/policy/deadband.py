"""Hysteresis: whether a new target differs enough from the current limit to patch."""

from typing import Final

from app.core.policy.model import Reason


def decide(*, target_m: int, current_m: int, grow_percent: int, shrink_percent: int) -> Reason:
    """The reason for patching or not; ``current_m`` 0 means some limit is unset.

    The shrink band is normally the tighter one: a stale generous limit is unfair to
    neighbours, a stale tight one only leaves idle CPU unused.
    """
    if target_m == current_m:
        return Reason.AT_TARGET
    if current_m == 0:
        return Reason.NO_LIMIT
    if target_m > current_m:
        grown = (target_m - current_m) * 100 >= grow_percent * current_m
        return Reason.GROW if grown else Reason.IN_DEADBAND
    shrunk = (current_m - target_m) * 100 >= shrink_percent * current_m
    return Reason.SHRINK if shrunk else Reason.IN_DEADBAND


PATCH_REASONS: Final = frozenset({Reason.GROW, Reason.SHRINK, Reason.NO_LIMIT})
