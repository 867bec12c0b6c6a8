"""Test-wide settings. Tiers: unit tests need nothing; tests under
tests/integration are marked ``integration`` and use the real control plane."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# The real-node fleet, shared by the end-to-end and real-node tiers.
pytest_plugins = ("tests.fleet",)

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
