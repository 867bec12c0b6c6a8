import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.policy import split_target


@pytest.mark.parametrize(
    ("requests", "caps", "total", "limits"),
    [
        pytest.param([500], None, 1500, [1500], id="single"),
        pytest.param([500], [800], 800, [800], id="single-capped"),
        pytest.param([1000, 3000], None, 8000, [2000, 6000], id="pro-rata"),
        pytest.param([1000, 1000, 1000], None, 3001, [1001, 1000, 1000], id="tie-to-first"),
        pytest.param([1000, 1000, 1000], None, 3002, [1001, 1001, 1000], id="two-ties"),
        pytest.param([100, 200], None, 301, [100, 201], id="largest-remainder"),
        pytest.param([100, 200], None, 300, [100, 200], id="no-extra"),
        pytest.param([100, 200], [150, 400], 300, [100, 200], id="no-extra-with-caps"),
        pytest.param([1000, 1000], [1200, 5000], 4000, [1200, 2800], id="cap-redistributes"),
        pytest.param([1000, 1000], [1000, 5000], 3000, [1000, 2000], id="capped-at-request"),
        pytest.param([1000, 1000], [1500, 2500], 4000, [1500, 2500], id="all-capped-exactly"),
        pytest.param([1000, 1000], [5000, 5000], 4000, [2000, 2000], id="caps-not-reached"),
        pytest.param(
            [100, 100, 200], [150, 120, 2000], 1000, [150, 120, 730], id="caps-fill-in-rounds"
        ),
    ],
)
def test_split(requests: list[int], caps: list[int] | None, total: int, limits: list[int]) -> None:
    assert split_target(requests=requests, caps=caps, total=total) == limits


# Requests, caps (or none) and the total to split.
SplitCase = tuple[list[int], list[int] | None, int]


@st.composite
def split_cases(draw: st.DrawFn) -> SplitCase:
    requests = draw(st.lists(st.integers(1, 5000), min_size=1, max_size=6))
    if draw(st.booleans()):
        caps = [request + draw(st.integers(0, 5000)) for request in requests]
        total = draw(st.integers(sum(requests), sum(caps)))
        return requests, caps, total
    return requests, None, draw(st.integers(sum(requests), sum(requests) * 20))


@given(split_cases())
def test_split_sums_exactly_and_respects_requests_and_caps(case: SplitCase) -> None:
    requests, caps, total = case
    limits = split_target(requests=requests, caps=caps, total=total)
    assert sum(limits) == total
    assert all(limit >= request for limit, request in zip(limits, requests, strict=True))
    if caps is not None:
        assert all(limit <= cap for limit, cap in zip(limits, caps, strict=True))


@given(split_cases())
def test_uncapped_split_is_within_a_millicore_of_pro_rata(case: SplitCase) -> None:
    requests, _, total = case
    limits = split_target(requests=requests, caps=None, total=total)
    for limit, request in zip(limits, requests, strict=True):
        exact = total * request / sum(requests)
        assert abs(limit - exact) < 1
