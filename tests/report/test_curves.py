"""The preStop curve picture, checked on its data: the drawn line is the recommendation's
curve, the target line sits at the allowed failures, the recommended point is on the line,
the observed window is a band of its width, the axes cover it all, and the files are real
PNG and SVG."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import numpy as np
import pytest

from svcdoctor.model.diagnosis import RaceWindow
from svcdoctor.report.curves import (
    GID_CHECKED,
    GID_CURVE,
    GID_NOW,
    GID_RECOMMENDED,
    GID_TARGET,
    GID_WINDOW,
    GID_WINDOW_CI,
    curve_alt,
    draw_prestop_curve,
    plot_prestop_curve,
)
from svcdoctor.simulate import Recommendation, SimParams, recommend
from svcdoctor.simulate.recommend import fixable_per_rollout

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D


@pytest.fixture(scope="module")
def met() -> Recommendation:
    return recommend(SimParams(nodes=50, rate=300), 1e-4)


@pytest.fixture(scope="module")
def unmet() -> Recommendation:
    return recommend(SimParams(connection="http2", nodes=50), 1e-4)


def _by_gid(fig: Figure, gid: str) -> list[Artist]:
    return [a for a in fig.axes[0].get_children() if a.get_gid() == gid]


def _line(fig: Figure, gid: str) -> Line2D:
    from matplotlib.lines import Line2D

    (line,) = _by_gid(fig, gid)
    assert isinstance(line, Line2D)
    return line


def _span(artist: Artist) -> tuple[float, float]:
    """The x range of a vertical band."""
    from matplotlib.patches import Rectangle

    assert isinstance(artist, Rectangle)
    return (artist.get_x(), artist.get_x() + artist.get_width())


def test_the_line_is_the_curve(met: Recommendation) -> None:
    fig = draw_prestop_curve(met)
    line = _line(fig, GID_CURVE)
    assert list(line.get_xdata()) == [c.prestop_seconds for c in met.curve]
    assert list(line.get_ydata()) == [c.failed_per_rollout for c in met.curve]
    target = _line(fig, GID_TARGET)
    assert list(target.get_ydata()) == pytest.approx([met.allowed_per_rollout] * 2)
    star = _line(fig, GID_RECOMMENDED)
    point = met.recommended_point
    assert point is not None
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (
        point.prestop_seconds,
        point.failed_per_rollout,
    )
    now = _line(fig, GID_NOW)
    assert now.get_xdata()[0] == met.current.params.prestop
    assert now.get_ydata()[0] == pytest.approx(fixable_per_rollout(met.current))
    checked = _line(fig, GID_CHECKED)
    assert checked.get_xdata()[0] == met.prestop_seconds
    assert checked.get_ydata()[0] == pytest.approx(fixable_per_rollout(met.checked))


def test_axes_cover_every_point(met: Recommendation) -> None:
    fig = draw_prestop_curve(met, observed_window=14.5)
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    assert low < 0
    assert high > max(14.5, met.curve[-1].prestop_seconds)
    bottom, top = ax.get_ylim()
    assert bottom == 0
    assert top > max(c.failed_per_rollout for c in met.curve)
    assert top > met.allowed_per_rollout
    assert ax.get_yscale() == "symlog"
    # the grace axis on top reads preStop + the recommendation's slack
    grace = next(a for a in fig.axes[0].child_axes)
    slack = met.grace_seconds - met.prestop_seconds
    assert grace.xaxis.get_label().get_text().startswith("terminationGracePeriodSeconds")
    forward = grace._functions[0]  # matplotlib keeps the pair it was given
    assert forward(np.array([3.0]))[0] == 3.0 + slack


def test_observed_window_is_a_band_of_its_width(met: Recommendation) -> None:
    assert _by_gid(draw_prestop_curve(met), GID_WINDOW) == []
    fig = draw_prestop_curve(met, observed_window=3.2)
    (band,) = _by_gid(fig, GID_WINDOW)
    assert _span(band) == pytest.approx((0.0, 3.2))
    assert _by_gid(fig, GID_WINDOW_CI) == []
    window = RaceWindow(3.2, (2.7, 4.1), "99 % of excess failures", 1.1, 40.0, 0.2)
    fig = draw_prestop_curve(met, observed_window=window)
    (ci,) = _by_gid(fig, GID_WINDOW_CI)
    assert _span(ci) == pytest.approx((2.7, 4.1))


def test_legend_is_off_the_data_and_labels_every_line(met: Recommendation) -> None:
    fig = draw_prestop_curve(met, observed_window=3.2)
    assert fig.axes[0].get_legend() is None
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert len(labels) == 6
    assert any(label.startswith("target:") for label in labels)
    assert any(f"preStop {met.prestop_seconds} s" in label for label in labels)
    fig.draw_without_rendering()  # runs the layout
    box = legend.get_window_extent()
    assert box.y1 <= fig.axes[0].get_window_extent().y0  # below the axes


def test_alt_text_states_the_finding(met: Recommendation, unmet: Recommendation) -> None:
    text = curve_alt(met, observed_window=2.0)
    # the grace to set is the YAML's (never below the current one), with the least needed
    assert f"recommended preStop of {met.prestop_seconds} s (grace {met.grace_to_set} s" in text
    if met.grace_to_set != met.grace_seconds:
        assert f"({met.grace_seconds} s needed)" in text
    assert "within the target" in text
    assert "covers the observed race window of 2 s" in text
    assert "does not cover" in curve_alt(met, observed_window=met.prestop_seconds + 5.0)
    text = curve_alt(unmet)
    assert "no preStop meets" in text
    assert "level off" in text


def test_unmet_recommendation_says_so(unmet: Recommendation) -> None:
    fig = draw_prestop_curve(unmet)
    assert fig.axes[0].get_title(loc="left").startswith("no preStop meets the target")
    star = _line(fig, GID_RECOMMENDED)
    assert "target not met" in str(star.get_label())
    assert "kept-alive connections" in str(_line(fig, GID_CURVE).get_label())


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_files_are_real_pictures(met: Recommendation, fmt: str) -> None:
    out = io.BytesIO()
    plot_prestop_curve(met, out, fmt, observed_window=3.0)
    data = out.getvalue()
    if fmt == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width > 600
        assert height > 300
    else:
        root = ET.fromstring(data)
        assert root.tag.endswith("svg")
        assert b"observed race window" in data


def test_a_target_missed_for_another_cause_is_not_blamed_on_the_prestop() -> None:
    """A bad backend keeps the rollout above the target whatever the shutdown: the curve
    (what preStop and grace act on) reaches the target, and the words say what remains."""
    rec = recommend(SimParams(nodes=5, replicas=3, rate=50, duration=60, bad_backends=1), 1e-4)
    assert not rec.met
    point = rec.recommended_point
    assert point is not None
    assert point.failed_per_rollout <= rec.allowed_per_rollout
    text = curve_alt(rec)
    assert "no preStop meets" not in text
    assert "the rollout still misses it: bad_backend" in text
    title = draw_prestop_curve(rec).axes[0].get_title(loc="left")
    assert "brings the race within the target" in title
