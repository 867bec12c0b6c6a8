from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.config import LabelSelector, parse_label_selector
from app.core.config.selectorlogic import can_match_together, implies


def selector(*expressions: tuple[str, str, list[str]], **labels: str) -> LabelSelector:
    obj: dict[str, Any] = {"matchLabels": labels}
    obj["matchExpressions"] = [
        {"key": key, "operator": operator, "values": values}
        for key, operator, values in expressions
    ]
    return parse_label_selector(obj)


WEB = selector(pool="web")
BATCH = selector(pool="batch")
ANY_POOL = selector(("pool", "Exists", []))
NO_POOL = selector(("pool", "DoesNotExist", []))
NOT_WEB = selector(("pool", "NotIn", ["web"]))
WEB_OR_BATCH = selector(("pool", "In", ["web", "batch"]))
EVERY = LabelSelector(())


@pytest.mark.parametrize(
    ("a", "b", "together"),
    [
        pytest.param(WEB, WEB, True, id="same"),
        pytest.param(WEB, BATCH, False, id="different-values"),
        pytest.param(WEB, ANY_POOL, True, id="value-and-exists"),
        pytest.param(WEB, NO_POOL, False, id="value-and-absent"),
        pytest.param(NOT_WEB, NO_POOL, True, id="not-in-allows-absent"),
        pytest.param(NOT_WEB, WEB, False, id="not-in-excludes"),
        pytest.param(WEB_OR_BATCH, NOT_WEB, True, id="in-minus-not-in"),
        pytest.param(selector(zone="a"), WEB, True, id="independent-keys"),
        pytest.param(EVERY, WEB, True, id="empty-selector"),
        pytest.param(
            selector(("pool", "NotIn", ["web", "batch"])), WEB_OR_BATCH, False, id="exhausted"
        ),
    ],
)
def test_can_match_together(a: LabelSelector, b: LabelSelector, together: bool) -> None:
    assert can_match_together(a, b) is together
    assert can_match_together(b, a) is together


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param(WEB, WEB, True, id="itself"),
        pytest.param(WEB, ANY_POOL, True, id="value-implies-exists"),
        pytest.param(ANY_POOL, WEB, False, id="exists-does-not-imply-value"),
        pytest.param(WEB, WEB_OR_BATCH, True, id="subset-of-values"),
        pytest.param(WEB_OR_BATCH, WEB, False, id="superset-of-values"),
        pytest.param(BATCH, NOT_WEB, True, id="other-value-implies-not-in"),
        pytest.param(NO_POOL, NOT_WEB, True, id="absent-implies-not-in"),
        pytest.param(NOT_WEB, NO_POOL, False, id="not-in-does-not-imply-absent"),
        pytest.param(
            selector(("pool", "NotIn", ["web", "batch"])), NOT_WEB, True, id="cofinite-subset"
        ),
        pytest.param(EVERY, WEB, False, id="empty-implies-nothing"),
        pytest.param(WEB, EVERY, True, id="everything-implies-empty"),
        pytest.param(selector(pool="web", zone="a"), WEB, True, id="more-requirements"),
    ],
)
def test_implies(a: LabelSelector, b: LabelSelector, expected: bool) -> None:
    assert implies(a, b) is expected


_KEYS = st.sampled_from(["pool", "zone"])
_VALUES = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2, unique=True)
_REQUIREMENT = st.one_of(
    st.tuples(_KEYS, st.sampled_from(["In", "NotIn"]), _VALUES),
    st.tuples(_KEYS, st.sampled_from(["Exists", "DoesNotExist"]), st.just([])),
)
_SELECTORS = st.lists(_REQUIREMENT, max_size=3).map(lambda rs: selector(*rs))
# Every node a selector over these keys and values could tell apart.
_NODES = [
    {k: v for k, v in (("pool", pool), ("zone", zone)) if v is not None}
    for pool in (None, "a", "b", "c", "d")
    for zone in (None, "a", "b", "c", "d")
]


@given(_SELECTORS, _SELECTORS)
def test_reasoning_agrees_with_matching_every_node(a: LabelSelector, b: LabelSelector) -> None:
    assert can_match_together(a, b) == any(a.matches(n) and b.matches(n) for n in _NODES)
    assert implies(a, b) == all(b.matches(n) for n in _NODES if a.matches(n))
