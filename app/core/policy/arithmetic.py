"""Exact integer rounding used by the policy.

``round`` in the design means round-half-up on the exact rational value, not Python's
banker's rounding. Everything stays in integers so that 1,000 pods cost no Fraction
churn.
"""


def half_up_div(numerator: int, denominator: int) -> int:
    """``round(numerator / denominator)`` with halves rounded up; both non-negative."""
    return (2 * numerator + denominator) // (2 * denominator)


def quantize(raw: int, *, request: int, hi: int, quantum: int) -> int:
    """Round ``raw`` to the nearest multiple of ``quantum``, staying within [request, hi].

    Above ``hi`` it steps down one quantum; it never goes below ``request``. A pod with
    no burst (``raw == request``) keeps its request exactly: rounding it up would hand
    out CPU the node does not have.
    """
    if raw == request:
        return request
    target = quantum * half_up_div(raw, quantum)
    if target > hi:
        target -= quantum
    return max(target, request)
