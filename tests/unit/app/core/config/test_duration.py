import pytest

from app.core.config import DurationError, parse_duration_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("2s", 2.0, id="seconds"),
        pytest.param("1m30s", 90.0, id="minutes-and-seconds"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1.5h", 5400.0, id="fractional-hours"),
        pytest.param("5m", 300.0, id="minutes"),
        pytest.param("250us", 0.00025, id="microseconds"),
        pytest.param("250\u00b5s", 0.00025, id="micro-sign"),
        pytest.param("250\u03bcs", 0.00025, id="greek-mu"),
        pytest.param("100ns", 1e-7, id="nanoseconds"),
        pytest.param("10s30m1h", 5410.0, id="any-order"),
        pytest.param("0", 0.0, id="bare-zero"),
        pytest.param("+3s", 3.0, id="plus-sign"),
        pytest.param("-3s", -3.0, id="negative"),
        pytest.param(".5s", 0.5, id="leading-point"),
        pytest.param("5.s", 5.0, id="trailing-point"),
        pytest.param("1.0000000001s", 1.0, id="sub-nanosecond-truncated"),
    ],
)
def test_parses_go_durations(text: str, seconds: float) -> None:
    assert parse_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "invalid", id="empty"),
        pytest.param("-", "invalid", id="sign-only"),
        pytest.param("5", "missing unit", id="no-unit"),
        pytest.param("5d", "unknown unit", id="days"),
        pytest.param(".s", "invalid", id="no-digits"),
        pytest.param("1s 2s", "unknown unit", id="space"),
        pytest.param("3000000h", "out of range", id="overflow"),
    ],
)
def test_rejects(text: str, message: str) -> None:
    with pytest.raises(DurationError, match=message):
        parse_duration_seconds(text)
