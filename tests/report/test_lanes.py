"""The lanes pictures, checked on the data the figure holds (not its pixels): the marks on
each lane, the shaded windows, the axis ranges, the legend's place and entries, exit 137 in
red, before/after on the same scales; PNG/SVG output and the alt text."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from importlib.resources import files
from pathlib import Path

import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation

from svcdoctor.diagnose.lanes import build_lanes
from svcdoctor.model import Diagnosis, Evidence
from svcdoctor.model.lanes import OTHER_PODS, UNKNOWN_BACKEND, Lanes, Moment
from svcdoctor.report.lanes import (
    KILLED,
    OUTCOMES,
    PlotFormatError,
    draw_before_after,
    draw_lanes,
    lanes_alt,
    plot_before_after,
    plot_lanes,
)
from tests.diagnose.test_lanes import (
    bundle,
    deletions,
    diagnosed,
    failed_per_pod,
    simulated,
    window_of,
)
from tests.factory import Scenario

EXAMPLE = Path(str(files("svcdoctor.examples") / "rollout-race"))


@pytest.fixture(scope="module")
def example() -> tuple[Evidence, Diagnosis, Lanes]:
    """The bundle ``svcdoctor`` ships: requests, events, pods, slices and the Deployment."""
    evidence, d = diagnosed(EXAMPLE)
    return evidence, d, build_lanes(evidence, d)


@pytest.fixture(scope="module")
def before_after(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lanes, Lanes]:
    """``simulate --emit-evidence`` without and with the fix (preStop 10 s, graceful)."""
    root = tmp_path_factory.mktemp("sim")
    before = diagnosed(simulated(root / "before"))
    after = diagnosed(simulated(root / "after", "--prestop", "10", "--shutdown", "graceful"))
    return build_lanes(*before), build_lanes(*after)


def axes(fig: Figure, gid: str) -> list[Axes]:
    return [ax for ax in fig.get_axes() if ax.get_gid() == gid]


def marks_per_row(ax: Axes) -> dict[int, list[float]]:
    """The failure marks' x positions per lane row (each mark stays inside its row)."""
    rows: dict[int, list[float]] = {}
    for c in ax.collections:
        if isinstance(c, PathCollection) and str(c.get_gid()).startswith("failures:"):
            for x, y in c.get_offsets():
                row = round(float(y))
                assert abs(float(y) - row) < 0.3
                rows.setdefault(row, []).append(float(x))
    return rows


def check_marks(ax: Axes, lanes: Lanes) -> None:
    rows = marks_per_row(ax)
    for i, lane in enumerate(lanes.lanes):
        expected = sorted(f.ts - lanes.start for f in lane.failures)
        assert sorted(rows.get(i, [])) == pytest.approx(expected)
    assert sum(len(x) for x in rows.values()) == lanes.failed


def test_marks_on_each_lane_are_the_failed_requests_of_its_pod(
    example: tuple[Evidence, Diagnosis, Lanes],
) -> None:
    evidence, _, lanes = example
    (ax,) = axes(draw_lanes(lanes), "lanes")
    check_marks(ax, lanes)
    expected = failed_per_pod(evidence)
    rows = marks_per_row(ax)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    for i, lane in enumerate(lanes.lanes):
        assert len(rows.get(i, [])) == expected.get(lane.pod, 0)
        count = f" ({expected[lane.pod]})" if expected.get(lane.pod) else ""
        name = f"{len(lane.members)} other pods" if lane.pod == OTHER_PODS else lane.pod
        assert labels[i] == name + count  # every lane named, with its failures


def test_shades_are_the_diagnosed_windows_on_the_deleted_pods_lanes(
    example: tuple[Evidence, Diagnosis, Lanes],
) -> None:
    evidence, d, lanes = example
    (ax,) = axes(draw_lanes(lanes), "lanes")
    rows = {lane.pod: i for i, lane in enumerate(lanes.lanes)}
    drawn = {
        (p.get_gid(), round(p.get_x() + lanes.start, 6), p.get_width(), round(p.get_y() + 0.42))
        for p in ax.patches
        if isinstance(p, Rectangle) and str(p.get_gid()).startswith("shade:")
    }
    window = window_of(d)
    expected = {
        (f"shade:{pod}", round(ts, 6), window, rows.get(pod, rows.get(OTHER_PODS)))
        for pod, ts in deletions(evidence).items()
    }
    assert len(expected) == 8
    assert drawn == expected


def test_axis_covers_the_requests_not_the_object_history(
    example: tuple[Evidence, Diagnosis, Lanes],
) -> None:
    evidence, _, lanes = example
    fig = draw_lanes(lanes)
    (ax,) = axes(fig, "lanes")
    (strip,) = axes(fig, "strip")
    ts = evidence.requests.get_column("ts")
    low, high = ax.get_xlim()
    span = ts.max() - ts.min()
    assert low <= 0  # every request inside
    assert high >= span
    assert high - low <= 1.05 * span  # the pods' creation 100 s earlier is not
    assert strip.get_xlim() == (low, high)
    (stairs,) = [p for p in strip.patches if p.get_gid() == "requests"]
    values, edges = stairs.get_data().values, stairs.get_data().edges
    assert list(values) == list(lanes.requests)
    assert sum(values) == evidence.requests.height
    assert edges[0] <= 0 < edges[1]


def test_legend_is_outside_the_data_and_names_every_kind_drawn(
    example: tuple[Evidence, Diagnosis, Lanes],
) -> None:
    _, d, lanes = example
    fig = draw_lanes(lanes)
    FigureCanvasAgg(fig).draw()
    (legend,) = fig.legends
    box = legend.get_window_extent()
    for ax in fig.get_axes():
        assert not box.overlaps(ax.get_window_extent())
    texts = [t.get_text() for t in legend.get_texts()]
    outcomes = {f.outcome for lane in lanes.lanes for f in lane.failures}
    assert outcomes
    for outcome in outcomes:
        assert OUTCOMES[outcome][0] in texts
    moments = {s.kind for lane in lanes.lanes for s in lane.stamps}
    assert {Moment.CREATED, Moment.READY, Moment.DELETION, Moment.SIGTERM} <= moments
    for kind in moments:
        assert kind.value in texts
    assert f"race window after deletion\n(diagnosed: {window_of(d):g} s)" in texts
    for label in ("pod serving", "pod terminating", "requests per second", "other pods"):
        assert label in texts
    assert Moment.PRESTOP.value not in texts  # the Deployment has no preStop hook


def test_exit_137_in_red(tmp_path: Path) -> None:
    evidence, d = diagnosed(bundle(tmp_path, Scenario("sigkill")))
    lanes = build_lanes(evidence, d, limit=100)
    fig = draw_lanes(lanes)
    (ax,) = axes(fig, "lanes")
    (exits,) = [c for c in ax.collections if c.get_gid() == "moment:exited"]
    killed = [s for lane in lanes.lanes for s in lane.stamps if s.kind is Moment.EXITED]
    assert len(killed) == 8
    assert all(s.exit_code == 137 for s in killed)
    assert [tuple(c) for c in exits.get_facecolors()] == [to_rgba(KILLED)] * 8
    notes = [a for a in ax.texts if isinstance(a, Annotation)]
    assert [a.get_text() for a in notes] == ["exit 137"] * 8
    assert {to_rgba(a.get_color()) for a in notes} == {to_rgba(KILLED)}
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "exited 137 (SIGKILL)" in texts


def test_before_after_on_the_same_scales_with_the_counts_in_the_titles(
    before_after: tuple[Lanes, Lanes],
) -> None:
    before, after = before_after
    assert before.failed > 20
    assert after.failed == 0
    assert before.shades
    assert not after.shades  # no race, no window
    fig = draw_before_after(before, after)
    lanes_axes, strips = axes(fig, "lanes"), axes(fig, "strip")
    assert len(lanes_axes) == len(strips) == 2
    titles = [s.get_title(loc="left") for s in strips]
    assert titles[0].startswith(f"before: api: {before.failed} failed requests")
    assert titles[1] == "after: api: 0 failed requests"
    spans = [ax.get_xlim()[1] - ax.get_xlim()[0] for ax in lanes_axes]
    assert spans[0] == pytest.approx(spans[1])
    assert lanes_axes[0].get_ylim() == lanes_axes[1].get_ylim()
    assert strips[0].get_ylim() == strips[1].get_ylim()
    assert strips[0].get_ylim()[1] >= max(*before.requests, *after.requests)
    for ax, lanes in zip(lanes_axes, (before, after), strict=True):
        check_marks(ax, lanes)
        low, high = ax.get_xlim()
        assert low <= 0
        assert high >= lanes.duration
    FigureCanvasAgg(fig).draw()
    (legend,) = fig.legends
    for ax in fig.get_axes():
        assert not legend.get_window_extent().overlaps(ax.get_window_extent())


def test_png_and_svg_by_format_and_nothing_else(
    example: tuple[Evidence, Diagnosis, Lanes], tmp_path: Path
) -> None:
    _, _, lanes = example
    png = tmp_path / "lanes.png"
    plot_lanes(lanes, png)
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    svgs = []
    for _ in range(2):
        out = io.BytesIO()
        plot_lanes(lanes, out, "svg")
        svgs.append(out.getvalue())
    assert svgs[0] == svgs[1]  # the same lanes, the same SVG
    assert ET.fromstring(svgs[0]).tag.endswith("svg")
    both = io.BytesIO()
    plot_before_after(lanes, lanes, both, "png")
    assert both.getvalue().startswith(b"\x89PNG")
    with pytest.raises(PlotFormatError, match="PNG or SVG") as caught:
        plot_lanes(lanes, tmp_path / "lanes.pdf", "pdf")
    assert caught.value.exit_code == 2
    assert not (tmp_path / "lanes.pdf").exists()


def test_alt_text_states_the_finding(
    example: tuple[Evidence, Diagnosis, Lanes],
    before_after: tuple[Lanes, Lanes],
    tmp_path: Path,
) -> None:
    _, d, lanes = example
    text = lanes_alt(lanes)
    busiest = max(lanes.lanes, key=lambda lane: len(lane.failures))
    assert text.startswith(
        f"api: {lanes.failed} failed requests, all on pods after their deletion, "
        f"{lanes.failed} within the diagnosed {window_of(d):g} s race window: "
        f"{len(busiest.failures)} on {busiest.pod}"
    )
    assert lanes_alt(before_after[1]).startswith("No failed requests")
    evidence, d = diagnosed(bundle(tmp_path, Scenario("backend")))
    bad = build_lanes(evidence, d)
    (pod, count), *_ = failed_per_pod(evidence).most_common()
    assert pod.startswith("api-7d9f8b6c5-d03")
    assert lanes_alt(bad).startswith(
        f"api: {bad.failed} failed requests, no deletion in the evidence, all on one pod: "
        f"{count} on {pod} ({count} 5xx)"
    )


def test_without_a_backend_column_the_words_do_not_deny_the_race(tmp_path: Path) -> None:
    """Requests that do not name their backend: each failure inside exactly one pod's
    diagnosed race window is put on that pod, drawn as a ring and said to be placed by
    time; the rest on the unknown lane (never 'none on a pod after its deletion')."""
    import shutil

    import polars as pl

    folder = tmp_path / "nob"
    shutil.copytree(EXAMPLE, folder)
    requests = folder / "requests.csv"
    pl.read_csv(requests).drop("backend").write_csv(requests)
    lanes = build_lanes(*diagnosed(folder))
    text = lanes_alt(lanes)
    assert "none on a pod after its deletion" not in text
    placed = sum(f.inferred for lane in lanes.lanes for f in lane.failures)
    assert placed > 0
    assert f"({placed} of them put on the pod by time, the only race window then" in text
    unknown = lanes.lane(UNKNOWN_BACKEND)
    assert placed + (len(unknown.failures) if unknown else 0) == lanes.failed
    svg = io.BytesIO()
    plot_lanes(lanes, svg, "svg")
    assert b"failures:refused:inferred" in svg.getvalue()
    assert b"pod inferred" in svg.getvalue()
