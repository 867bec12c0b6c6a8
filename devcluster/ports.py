"""Loopback ports for the processes the harness and the tests start.

A port the kernel picked for ``bind(0)`` comes from the ephemeral range, which it also
draws from for every outgoing connection; with several test workers each holding dozens
of client connections, such a port was now and then taken by a client between the check
and the server's own bind (``Address already in use``). So ports come from below that
range, where the kernel never picks one on its own, and each test worker draws from a
block of its own.
"""

from __future__ import annotations

import os
import re
import secrets
import socket

_BAND_START = 20000
_BLOCK = 1500
_BLOCKS = 8
_handed_out: set[int] = set()


def port_block(worker: str | None) -> range:
    """The ports a process draws from: a test worker (``gw<n>``) its own block, any
    other process the whole band."""
    match = re.fullmatch(r"gw(\d+)", worker or "")
    if match is None:
        return range(_BAND_START, _BAND_START + _BLOCK * _BLOCKS)
    start = _BAND_START + _BLOCK * (int(match.group(1)) % _BLOCKS)
    return range(start, start + _BLOCK)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback port nothing listens on and this process has not handed out before."""
    block = port_block(os.environ.get("PYTEST_XDIST_WORKER"))
    # A random start keeps two processes of one worker (a test and a command it runs)
    # from walking the block in step.
    offset = secrets.randbelow(len(block))
    for step in range(len(block)):
        port = block[(offset + step) % len(block)]
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free loopback port left in {block.start}-{block.stop - 1}")
