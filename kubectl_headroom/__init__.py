"""``kubectl headroom``: preflight checks, explanations and status for operators."""
