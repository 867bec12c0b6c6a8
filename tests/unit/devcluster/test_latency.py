"""The latency report: nearest-rank percentiles and each share printed."""

import pytest

from devcluster.latency import Step, Trial, distribution, percentile, report


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 0.5) == 10.0
    assert percentile(values, 0.9) == 18.0
    assert percentile(values, 1.0) == 20.0
    assert percentile([3.0], 0.9) == 3.0


def test_the_distribution_gives_median_p90_and_max() -> None:
    assert distribution([1.0, 2.0, 3.0, 10.0]) == "p50 2.50s  p90 10.00s  max 10.00s"


def test_the_report_splits_each_latency_into_headroom_and_kubelet_shares() -> None:
    trial = Trial(
        shrink=Step(headroom=2.0, write=0.02, kubelet=0.5),
        rise=Step(headroom=1.5, write=0.03, kubelet=1.0),
        bound=100.0,
        deleted=110.0,
        running=104.0,
        finished=112.0,
        gone=113.0,
    )
    text = report([trial, trial])
    assert text.splitlines()[0] == "2 trials"
    assert "neighbour bound -> cpu.max shrunk: p50 2.50s" in text
    assert "neighbour finished -> cpu.max risen: p50 2.50s" in text
    assert "kubelet (resize accepted -> cpu.max): p50 0.50s" in text
    assert "of which the resize request: p50 0.03s" in text
    assert "neighbour bound -> Running: p50 4.00s" in text
    assert "neighbour deleted -> finished: p50 2.00s" in text
    assert "neighbour deleted -> gone from the API: p50 3.00s" in text


def test_a_step_totals_its_shares() -> None:
    assert Step(headroom=2.0, write=0.1, kubelet=0.5).total == pytest.approx(2.5)
