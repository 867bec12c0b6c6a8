import pytest

from app.core.policy import half_up_div, quantize


@pytest.mark.parametrize(
    ("numerator", "denominator", "expected"),
    [
        pytest.param(5, 2, 3, id="half-rounds-up"),
        pytest.param(7, 2, 4, id="odd-half-rounds-up-not-to-even"),
        pytest.param(4, 3, 1, id="below-half"),
        pytest.param(5, 3, 2, id="above-half"),
        pytest.param(6, 3, 2, id="exact"),
        pytest.param(0, 7, 0, id="zero"),
    ],
)
def test_half_up_div(numerator: int, denominator: int, expected: int) -> None:
    assert half_up_div(numerator, denominator) == expected


@pytest.mark.parametrize(
    ("raw", "request_m", "hi", "quantum", "expected"),
    [
        pytest.param(1234, 500, 5000, 10, 1230, id="nearest-down"),
        pytest.param(1235, 500, 5000, 10, 1240, id="half-up"),
        pytest.param(1236, 500, 5000, 10, 1240, id="nearest-up"),
        pytest.param(1996, 500, 1999, 10, 1990, id="above-hi-steps-down"),
        pytest.param(18, 15, 18, 10, 15, id="step-down-below-request-gives-request"),
        pytest.param(16, 15, 100, 10, 20, id="rounds-up-above-request"),
        pytest.param(14, 11, 100, 10, 11, id="rounds-down-below-request"),
        pytest.param(15, 15, 100, 10, 15, id="no-burst-keeps-request"),
        pytest.param(777, 100, 1000, 1, 777, id="unit-quantum"),
        pytest.param(1500, 1000, 1500, 1000, 1000, id="coarse-quantum-steps-down"),
    ],
)
def test_quantize(raw: int, request_m: int, hi: int, quantum: int, expected: int) -> None:
    assert quantize(raw, request=request_m, hi=hi, quantum=quantum) == expected
