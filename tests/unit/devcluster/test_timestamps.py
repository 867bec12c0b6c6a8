import pytest

from devcluster.timestamps import epoch_seconds


def test_a_utc_stamp_with_microseconds() -> None:
    assert epoch_seconds("1970-01-01T00:01:40.250000Z") == pytest.approx(100.25)


def test_an_offset_is_honoured() -> None:
    assert epoch_seconds("1970-01-01T01:00:00+01:00") == 0.0


def test_a_stamp_that_is_no_timestamp_is_refused() -> None:
    with pytest.raises(ValueError):
        epoch_seconds("yesterday")
