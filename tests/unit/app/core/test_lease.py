from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.core.lease import lease_live, lease_record

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _lease(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "kube-headroom-reconciler"}, "spec": spec}


def _renewed(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


HELD = {"holderIdentity": "r-0", "leaseDurationSeconds": 15}

CASES = {
    "renewed-a-moment-ago": (_lease(**HELD, renewTime=_renewed(2)), 2.0, True),
    "renew-time-past-its-duration": (_lease(**HELD, renewTime=_renewed(16)), 0.0, False),
    # The wall clock runs behind the reconciler's: the change seen long ago still expires it.
    "seen-too-long-ago": (_lease(**HELD, renewTime=_renewed(-60)), 15.0, False),
    "released": (_lease(leaseDurationSeconds=1, renewTime=_renewed(0)), 0.0, False),
    "no-renew-time": (_lease(**HELD), 0.0, False),
    "renew-time-without-a-zone": (_lease(**HELD, renewTime="2030-01-01T00:00:00"), 0.0, False),
    "renew-time-unreadable": (_lease(**HELD, renewTime="yesterday"), 0.0, False),
    "duration-missing": (_lease(holderIdentity="r-0", renewTime=_renewed(0)), 0.0, False),
}


@pytest.mark.parametrize(("lease", "seen_for", "live"), list(CASES.values()), ids=list(CASES))
def test_a_lease_is_live_while_held_and_unexpired_on_both_clocks(
    lease: dict[str, Any], seen_for: float, live: bool
) -> None:
    assert lease_live(lease_record(lease), seen_for=seen_for, wall_now=NOW) is live


def test_no_lease_is_no_live_reconciler() -> None:
    assert not lease_live(None, seen_for=0.0, wall_now=NOW)
