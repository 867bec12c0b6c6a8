"""Splitting a pod's target limit over its request-bearing containers."""

from collections.abc import Sequence


def split_target(*, requests: Sequence[int], caps: Sequence[int] | None, total: int) -> list[int]:
    """Per-container limits summing exactly to ``total``, each at least its request.

    The amount above the requests is shared pro-rata by request; leftover millicores go
    by largest remainder, ties to the earlier container. With ``caps``, no container
    exceeds its own cap and the excess is shared among the others. Requires
    ``sum(requests) <= total`` and, with caps, ``total <= sum(caps)``.
    """
    if len(requests) == 1:
        return [total]
    extra = total - sum(requests)
    if caps is None or extra == 0:
        return _pro_rata(requests, extra=extra)
    limits = list(requests)
    open_ = [i for i in range(len(requests)) if caps[i] > requests[i]]
    # Each round fills the containers that would overflow and shares the rest among the
    # others; some container always has room, as the caps add up to at least the total.
    while True:
        proposed = _pro_rata([requests[i] for i in open_], extra=extra)
        over = [i for i, limit in zip(open_, proposed, strict=True) if limit > caps[i]]
        if not over:
            for i, limit in zip(open_, proposed, strict=True):
                limits[i] = limit
            return limits
        for i in over:
            extra -= caps[i] - limits[i]
            limits[i] = caps[i]
        open_ = [i for i in open_ if i not in over]


def _pro_rata(requests: Sequence[int], *, extra: int) -> list[int]:
    """Each request plus its share of ``extra``, shared by largest remainder."""
    weight = sum(requests)
    limits = []
    remainders = []
    for request in requests:
        share, remainder = divmod(extra * request, weight)
        limits.append(request + share)
        remainders.append(remainder)
    leftover = extra + weight - sum(limits)
    if leftover:
        # A stable sort keeps ties in container order.
        for i in sorted(range(len(requests)), key=remainders.__getitem__, reverse=True)[:leftover]:
            limits[i] += 1
    return limits
