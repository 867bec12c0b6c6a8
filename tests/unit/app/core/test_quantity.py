from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.quantity import (
    QuantityError,
    format_cores,
    format_cpu_millis,
    parse_cpu_millis,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1", Fraction(1), id="integer"),
        pytest.param("0", Fraction(0), id="zero"),
        pytest.param("0.5", Fraction(1, 2), id="decimal"),
        pytest.param("1.5", Fraction(3, 2), id="decimal-above-one"),
        pytest.param("500m", Fraction(1, 2), id="milli"),
        pytest.param("2k", Fraction(2000), id="kilo"),
        pytest.param("1e3", Fraction(1000), id="exponent"),
        pytest.param("1E3", Fraction(1000), id="upper-exponent"),
        pytest.param("1e-3", Fraction(1, 1000), id="negative-exponent"),
        pytest.param("1e+3", Fraction(1000), id="signed-exponent"),
        pytest.param("1E", Fraction(10**18), id="exa-not-exponent"),
        pytest.param("1Ki", Fraction(1024), id="binary"),
        pytest.param("1.5Gi", Fraction(3 * 2**29), id="binary-fraction"),
        pytest.param("100n", Fraction(1, 10**7), id="nano"),
        pytest.param("3u", Fraction(3, 10**6), id="micro"),
        pytest.param("1M", Fraction(10**6), id="mega"),
        pytest.param("2T", Fraction(2 * 10**12), id="tera"),
        pytest.param("1P", Fraction(10**15), id="peta"),
        pytest.param("1Ti", Fraction(2**40), id="tebi"),
        pytest.param("1Pi", Fraction(2**50), id="pebi"),
        pytest.param("1Ei", Fraction(2**60), id="exbi"),
        pytest.param("1Mi", Fraction(2**20), id="mebi"),
        pytest.param("+1", Fraction(1), id="plus-sign"),
        pytest.param("-1", Fraction(-1), id="minus-sign"),
        pytest.param(".5", Fraction(1, 2), id="leading-point"),
        pytest.param("5.", Fraction(5), id="trailing-point"),
        pytest.param("007", Fraction(7), id="leading-zeros"),
        pytest.param("0.0001", Fraction(1, 10000), id="sub-milli"),
    ],
)
def test_parse_quantity_accepts_the_api_server_grammar(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param(" 1", "whitespace", id="leading-space"),
        pytest.param("1 ", "whitespace", id="trailing-space"),
        pytest.param("1\n", "whitespace", id="newline"),
        pytest.param("1e3m", "suffix", id="exponent-then-milli"),
        pytest.param("1ki", "suffix", id="lowercase-binary"),
        pytest.param("1mi", "suffix", id="milli-binary"),
        pytest.param("1e", "suffix", id="bare-e"),
        pytest.param("1x", "suffix", id="unknown-suffix"),
        pytest.param("1_000", "suffix", id="digit-separator"),
        pytest.param("1.2.3", "suffix", id="two-points"),
        pytest.param("NaN", "number", id="nan"),
        pytest.param("Infinity", "number", id="infinity"),
        pytest.param("m", "number", id="suffix-only"),
        pytest.param("-", "number", id="sign-only"),
        pytest.param(".", "number", id="point-only"),
        pytest.param("1e1001", "range", id="huge-exponent"),
        pytest.param("\uff11", "number", id="non-ascii-digit"),
    ],
)
def test_parse_quantity_rejects(text: str, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        pytest.param("1", 1000, id="core"),
        pytest.param("250m", 250, id="millicores"),
        pytest.param("0.5", 500, id="decimal"),
        pytest.param("1.5", 1500, id="decimal-above-one"),
        pytest.param("2k", 2_000_000, id="kilo"),
        pytest.param("1e3", 1_000_000, id="exponent"),
        pytest.param("0.0001", 1, id="sub-milli-rounds-up"),
        pytest.param("1500001u", 1501, id="micro-rounds-up"),
        pytest.param("100n", 1, id="nano-rounds-up"),
        pytest.param("0", 0, id="zero"),
        pytest.param("0m", 0, id="zero-milli"),
    ],
)
def test_parse_cpu_millis(text: str, millis: int) -> None:
    assert parse_cpu_millis(text) == millis


@pytest.mark.parametrize("text", ["-1", "-500m", "1e3m", " 500m", "500m "])
def test_parse_cpu_millis_rejects(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_cpu_millis(text)


# Millicores as a Kubernetes quantity, and as cores for people to read.
@pytest.mark.parametrize(
    ("format_", "millis", "text"),
    [
        pytest.param(format_cpu_millis, 1500, "1500m", id="quantity-fraction-of-core"),
        pytest.param(format_cpu_millis, 2000, "2", id="quantity-whole-cores"),
        pytest.param(format_cpu_millis, 0, "0", id="quantity-zero"),
        pytest.param(format_cpu_millis, 1, "1m", id="quantity-one-milli"),
        pytest.param(format_cpu_millis, -500, "-500m", id="quantity-negative"),
        pytest.param(format_cores, 8000, "8", id="cores-whole"),
        pytest.param(format_cores, 8500, "8.5", id="cores-one-decimal"),
        pytest.param(format_cores, 250, "0.25", id="cores-two-decimals"),
        pytest.param(format_cores, 1234, "1.23", id="cores-rounds-down"),
        pytest.param(format_cores, 1235, "1.24", id="cores-half-rounds-up"),
        pytest.param(format_cores, 8004, "8", id="cores-rounds-to-whole"),
        pytest.param(format_cores, 0, "0", id="cores-zero"),
        pytest.param(format_cores, -500, "-0.5", id="cores-negative"),
        pytest.param(format_cores, -3, "0", id="cores-negative-rounds-to-zero"),
    ],
)
def test_format(format_: Callable[[int], str], millis: int, text: str) -> None:
    assert format_(millis) == text


@given(st.integers(min_value=0, max_value=10**9))
def test_canonical_cpu_text_parses_back(millis: int) -> None:
    assert parse_cpu_millis(format_cpu_millis(millis)) == millis
