"""Exit codes of ``kubectl headroom``: a script tells a blocker from a check that never ran.

The runbook's exit-code table lists each (tests/unit/docs keeps it in step).
"""

import sys
from typing import Final

EXIT_OK: Final = 0
# preflight found a blocker.
EXIT_BLOCKED: Final = 1
# The command line is wrong (an unknown flag, a missing argument): argparse's own code.
EXIT_USAGE: Final = 2
# The command could not run: bad input, an unreadable file, an object that does not exist,
# any other answer of the API server than the ones below.
EXIT_ERROR: Final = 3
# No usable kubeconfig: missing, empty, invalid, or without the context asked for.
EXIT_KUBECONFIG: Final = 4
# The API server could not be reached (refused, timed out, TLS failed).
EXIT_UNREACHABLE: Final = 5
# The API server refused the credentials (401) or the read (403).
EXIT_DENIED: Final = 6


def error(message: str) -> int:
    """Print ``error: message`` on stderr; the exit code of a command that could not run."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR
