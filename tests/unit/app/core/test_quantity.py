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


@pytest.mark.parametrize(
    ("millis", "text"),
    [
        pytest.param(1500, "1500m", id="fraction-of-core"),
        pytest.param(2000, "2", id="whole-cores"),
        pytest.param(0, "0", id="zero"),
        pytest.param(1, "1m", id="one-milli"),
        pytest.param(-500, "-500m", id="negative"),
    ],
)
def test_format_cpu_millis(millis: int, text: str) -> None:
    assert format_cpu_millis(millis) == text


@pytest.mark.parametrize(
    ("millis", "text"),
    [
        pytest.param(8000, "8", id="whole"),
        pytest.param(8500, "8.5", id="one-decimal"),
        pytest.param(250, "0.25", id="two-decimals"),
        pytest.param(1234, "1.23", id="rounds-down"),
        pytest.param(1235, "1.24", id="half-rounds-up"),
        pytest.param(8004, "8", id="rounds-to-whole"),
        pytest.param(0, "0", id="zero"),
        pytest.param(-500, "-0.5", id="negative"),
        pytest.param(-3, "0", id="negative-rounds-to-zero"),
    ],
)
def test_format_cores(millis: int, text: str) -> None:
    assert format_cores(millis) == text


@given(st.integers(min_value=0, max_value=10**9))
def test_canonical_cpu_text_parses_back(millis: int) -> None:
    assert parse_cpu_millis(format_cpu_millis(millis)) == millis
