"""Exit codes of ``kubectl headroom``: a script tells a blocker from a check that never ran.

The runbook's exit-code table lists each (tests/unit/docs keeps it in step).
"""

import sys
from enum import IntEnum, unique


@unique
class Exit(IntEnum):
    OK = 0
    # preflight found a blocker.
    BLOCKED = 1
    # The command line is wrong (an unknown flag, a missing argument): argparse's own code.
    USAGE = 2
    # The command could not run: bad input, an unreadable file, an object that does not
    # exist, any other answer of the API server than the ones below.
    ERROR = 3
    # No usable kubeconfig: missing, empty, invalid, or without the context asked for.
    KUBECONFIG = 4
    # The API server could not be reached (refused, timed out, TLS failed).
    UNREACHABLE = 5
    # The API server refused the credentials (401) or the read (403).
    DENIED = 6


def error(message: str) -> int:
    """Print ``error: message`` on stderr; the exit code of a command that could not run."""
    print(f"error: {message}", file=sys.stderr)
    return Exit.ERROR
