"""Hands the C heap's free pages back to the kernel once a wave of writes is over.

A wave leaves freed memory in the C allocator: the decoded watch events of every pod it
changed, the answers to its writes, and the TLS buffers (about 150 KiB a connection) of
the connections it opened, freed once they idle out. glibc keeps those pages, so the
resident set would stay at the wave's high-water mark; `malloc_trim` returns the free ones.
"""

import ctypes
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from app.io.http import KEEPALIVE_SECONDS

log = logging.getLogger(__name__)

# Past the time a wave's idle API connections take to close, so their buffers are free.
AFTER_WAVE_SECONDS: Final = 2 * KEEPALIVE_SECONDS + 5.0


def malloc_trim() -> Callable[[], object] | None:
    """The C library's `malloc_trim(0)`, or None where there is none (not glibc)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


async def release_after_waves(
    wave_settled: Callable[[float], Awaitable[None]],
    trim: Callable[[], object],
    *,
    quiet: float = AFTER_WAVE_SECONDS,
) -> None:
    """Trim after each wave, once no write has been planned for `quiet` seconds."""
    while True:
        await wave_settled(quiet)
        started = time.perf_counter()
        trim()
        log.debug("returned free heap pages", extra={"ms": (time.perf_counter() - started) * 1e3})
