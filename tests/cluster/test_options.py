"""Durations in kubectl's style, shared by every live command."""

from __future__ import annotations

import click
import pytest

from svcdoctor.cli._cluster import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("2.5", 2.5),
        ("90s", 90),
        ("2m", 120),
        ("1h", 3600),
        ("1h30m", 5400),
        ("1m30s", 90),
        (" 45s ", 45),
        ("500ms", 0.5),
        ("1m30s500ms", 90.5),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "--since") == seconds


@pytest.mark.parametrize(
    "text", ["", "abc", "10us", "5d", "-3", "0", "nan", "inf", "1e999", "m", "8d"]
)
def test_bad_durations_name_the_flag(text: str) -> None:
    with pytest.raises(click.BadParameter) as err:
        parse_duration(text, "--since")
    assert err.value.param_hint == "--since"
