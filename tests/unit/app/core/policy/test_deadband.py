import pytest

from app.core.policy import PATCH_REASONS, Reason, decide


@pytest.mark.parametrize(
    ("target", "current", "reason"),
    [
        pytest.param(3000, 3000, Reason.AT_TARGET, id="at-target"),
        pytest.param(3000, 0, Reason.NO_LIMIT, id="no-limit"),
        pytest.param(1100, 1000, Reason.GROW, id="grow-at-band-edge"),
        pytest.param(1099, 1000, Reason.IN_DEADBAND, id="grow-inside-band"),
        pytest.param(2000, 1000, Reason.GROW, id="grow-far"),
        pytest.param(950, 1000, Reason.SHRINK, id="shrink-at-band-edge"),
        pytest.param(951, 1000, Reason.IN_DEADBAND, id="shrink-inside-band"),
        pytest.param(500, 1000, Reason.SHRINK, id="shrink-far"),
    ],
)
def test_deadband(target: int, current: int, reason: Reason) -> None:
    assert decide(target_m=target, current_m=current, grow_percent=10, shrink_percent=5) is reason


@pytest.mark.parametrize(
    ("target", "current", "reason"),
    [
        pytest.param(1001, 1000, Reason.GROW, id="any-growth"),
        pytest.param(999, 1000, Reason.SHRINK, id="any-shrink"),
    ],
)
def test_zero_bands_patch_every_change(target: int, current: int, reason: Reason) -> None:
    assert decide(target_m=target, current_m=current, grow_percent=0, shrink_percent=0) is reason


def test_full_bands_never_shrink() -> None:
    assert decide(target_m=1, current_m=1000, grow_percent=100, shrink_percent=100) is (
        Reason.IN_DEADBAND
    )


def test_patch_reasons() -> None:
    assert {Reason.GROW, Reason.SHRINK, Reason.NO_LIMIT} == PATCH_REASONS
