"""Exit codes of ``kubectl headroom``."""

from typing import Final

# preflight found a blocker.
EXIT_BLOCKED: Final = 1
# The command could not run: bad input, an unreadable file, the API server refused.
EXIT_ERROR: Final = 3
