"""The one duration grammar: every form reads back to the same seconds; garbage is refused."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from svcdoctor.model.duration import (
    ALL,
    CLI,
    GO,
    PROMQL,
    SPAN,
    DurationError,
    format_duration,
    go_duration,
    parse_duration,
    promql_duration,
)

# milliseconds up to ten years: every value a duration flag or a query step can hold
_MS = st.integers(min_value=0, max_value=10 * 365 * 86_400_000)


@given(_MS)
def test_format_then_parse_is_the_same_duration(ms: int) -> None:
    seconds = ms / 1000
    text = format_duration(seconds)
    for units in (CLI, GO, ALL):
        assert math.isclose(parse_duration(text, units), seconds, rel_tol=1e-12, abs_tol=1e-9)


@given(_MS)
def test_promql_text_reads_back(ms: int) -> None:
    assert math.isclose(parse_duration(promql_duration(ms / 1000), PROMQL), ms / 1000)


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=59))
def test_the_forms_of_one_duration_agree(minutes: int, seconds: int) -> None:
    total = minutes * 60 + seconds
    forms = [str(total), f"{total}s", f"{minutes}m{seconds}s", f"{total / 60!r}m"]
    if minutes:
        forms.append(f"{minutes}m" + (f"{seconds}s" if seconds else ""))
    for text in forms:
        assert math.isclose(parse_duration(text), total, rel_tol=1e-12), text


@pytest.mark.parametrize(
    ("text", "units", "seconds"),
    [
        ("90", CLI, 90),
        ("90s", CLI, 90),
        ("1m30s", CLI, 90),
        ("1.5m", CLI, 90),
        (" 2.5 ", CLI, 2.5),
        ("1h2m3.5s", GO, 3723.5),
        ("500ms", GO, 0.5),
        ("1.5µs", GO, 1.5e-6),
        ("5m", PROMQL, 300),
        ("1y2w3d", PROMQL, 365 * 86_400 + 17 * 86_400),
        ("1d12h", SPAN, 129_600),
        ("2w", SPAN, 1_209_600),
    ],
)
def test_known_durations(text: str, units: tuple[str, ...], seconds: float) -> None:
    assert parse_duration(text, units) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("", ALL),
        ("abc", ALL),
        ("m", ALL),
        ("5x", ALL),
        ("1h 30m", ALL),
        ("30s1m", ALL),  # largest unit first
        ("1s1s", ALL),  # each unit once
        ("-5s", ALL),
        ("5d", CLI),  # a unit the caller does not take
        ("10us", CLI),
        ("500ms", SPAN),
    ],
)
def test_garbage_is_refused_with_a_clear_message(text: str, units: tuple[str, ...]) -> None:
    with pytest.raises(DurationError, match=f"{text.strip()!r} is not a duration: give"):
        parse_duration(text, units)


@given(st.text(alphabet="0123456789.hmsdwyµun x-", max_size=12))
def test_any_text_is_a_duration_or_refused(text: str) -> None:
    message = ""
    try:
        parse_duration(text)
    except DurationError as exc:
        message = str(exc)
    assert not message or message.startswith(f"{text.strip()!r} is not a duration: give")


@pytest.mark.parametrize("seconds", [-1.0, math.nan, math.inf])
def test_only_finite_non_negative_seconds_are_written(seconds: float) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        format_duration(seconds)


def test_written_forms() -> None:
    assert [format_duration(s) for s in (0, 0.5, 45, 90, 3723.5, 3600)] == [
        "0s",
        "500ms",
        "45s",
        "1m30s",
        "1h2m3.5s",
        "1h",
    ]
    assert [promql_duration(s) for s in (300, 1_209_600, 0.25)] == ["300s", "1209600s", "250ms"]


def test_go_reads_parts_in_any_order_and_numbers_as_nanoseconds() -> None:
    assert go_duration("30s1m") == 90
    assert go_duration("1s1s") == 2
    assert go_duration(1_500_000_000) == 1.5
    assert go_duration("0") == 0
    with pytest.raises(ValueError, match="'5' is not a duration"):
        go_duration("5")  # Go's text needs a unit
    with pytest.raises(ValueError, match="'soon' is not a duration"):
        go_duration("soon")
