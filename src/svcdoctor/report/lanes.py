"""Per-pod lanes pictures (matplotlib, Agg): one lane per pod with its lifecycle moments and
the failed requests that hit it, requests per second on top, the diagnosed race window
shaded after each deletion; and before/after side by side on the same scales.

Each ``draw_*`` returns a ``Figure`` (no pyplot state) whose artists carry ``gid``s, so tests
read the data back; each ``plot_*`` writes PNG or SVG. ``lanes_alt`` states the finding.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from svcdoctor.errors import SvcdoctorError
from svcdoctor.model import Outcome, iso_utc
from svcdoctor.model.lanes import OTHER_PODS, UNKNOWN_BACKEND, Lane, Lanes, Moment, Stamp

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure

FORMATS = ("png", "svg")


class PlotFormatError(SvcdoctorError, ValueError):
    """A picture asked for in a format other than PNG or SVG."""


# Okabe-Ito colours (readable with colour-blindness); what the client saw
OUTCOMES: dict[Outcome, tuple[str, str]] = {
    Outcome.RESET: ("reset", "#D55E00"),
    Outcome.REFUSED: ("refused", "#E69F00"),
    Outcome.TIMEOUT: ("timeout", "#0072B2"),
    Outcome.HTTP_ERROR: ("5xx", "#CC79A7"),
    Outcome.EOF: ("closed before response", "#009E73"),
    Outcome.ERROR: ("other error", "#555555"),
}
# marker, colour, filled
MOMENTS: dict[Moment, tuple[str, str, bool]] = {
    Moment.CREATED: ("^", "#1b7837", False),
    Moment.READY: ("o", "#1b7837", True),
    Moment.DELETION: ("X", "#000000", True),
    Moment.PRESTOP: (">", "#56B4E9", True),
    Moment.SIGTERM: ("v", "#3f007d", True),
    Moment.ENDPOINT_NOT_READY: ("s", "#8c510a", False),
    Moment.INGRESS_STOPPED: ("|", "#d95f02", True),
    Moment.LB_STOPPED: ("|", "#7570b3", True),
    Moment.EXITED: ("D", "#7f7f7f", True),
}
KILLED = "#C00000"  # exit 137: SIGKILL
SHADE = "#F0E442"
LANE = "#9a9a9a"
JITTER = 0.56  # failure marks spread over this share of a lane's height
# the kubelet's moments just above the lane, the EndpointSlice's just below
OFFSETS = {
    Moment.PRESTOP: -0.2,
    Moment.SIGTERM: -0.2,
    Moment.EXITED: -0.2,
    Moment.ENDPOINT_NOT_READY: 0.2,
    Moment.INGRESS_STOPPED: 0.2,
    Moment.LB_STOPPED: 0.2,
}


@dataclass(frozen=True, slots=True)
class _Scale:
    """What panels drawn side by side share: the x span length, lanes, requests/s."""

    span: float
    rows: int
    rps: float

    @classmethod
    def of(cls, *panels: Lanes) -> _Scale:
        return cls(
            span=max(*(p.duration for p in panels), 1.0),
            rows=max(*(len(p.lanes) for p in panels), 1),
            rps=max(max(p.requests, default=0) for p in panels) or 1.0,
        )


def _figure(columns: int, rows: int) -> Figure:
    from matplotlib.figure import Figure

    width = 11.5 if columns == 1 else 18.0
    return Figure(figsize=(width, 2.2 + 0.34 * rows), dpi=110, layout="constrained")


def draw_lanes(lanes: Lanes) -> Figure:
    """One lane per pod, the requests per second above, the legend outside the data."""
    scale = _Scale.of(lanes)
    fig = _figure(1, scale.rows)
    _panel(fig, lanes, scale, _headline(lanes))
    _legend(fig, (lanes,))
    return fig


def draw_before_after(before: Lanes, after: Lanes) -> Figure:
    """The two runs side by side: same x span length, lanes and requests/s scale, the
    failed counts in the titles."""
    scale = _Scale.of(before, after)
    fig = _figure(2, scale.rows)
    left, right = fig.subfigures(1, 2, wspace=0.02, squeeze=False)[0]
    _panel(left, before, scale, f"before: {_headline(before)}")
    _panel(right, after, scale, f"after: {_headline(after)}")
    _legend(fig, (before, after))
    return fig


def _leaves(lanes: Lanes) -> list[Lane]:
    """Every pod's own lane, collapsed ones included."""
    return [leaf for lane in lanes.lanes for leaf in lane.leaves]


def _drawn(lane: Lane) -> tuple[Stamp, ...]:
    """The moments drawn on a lane: its own, or the deletions of the pods it collapses."""
    own = tuple(s for m in lane.members for s in m.stamps if s.kind is Moment.DELETION)
    return lane.stamps + own


def _headline(lanes: Lanes) -> str:
    hit = sum(1 for leaf in _leaves(lanes) if leaf.failures and leaf.pod != UNKNOWN_BACKEND)
    noun = "request" if lanes.failed == 1 else "requests"
    where = f" on {hit} {'pod' if hit == 1 else 'pods'}" if hit else ""
    return f"{lanes.title}: {lanes.failed} failed {noun}{where}"


def _panel(fig: Figure | SubFigure, lanes: Lanes, scale: _Scale, title: str) -> Axes:
    grid = fig.add_gridspec(2, 1, height_ratios=(1.0, max(scale.rows * 0.34, 1.2)), hspace=0.02)
    strip = fig.add_subplot(grid[0], gid="strip")
    ax = fig.add_subplot(grid[1], sharex=strip, gid="lanes")
    _strip(strip, lanes, scale)
    strip.set_title(title, loc="left", fontsize=11, fontweight="bold")
    _lanes(ax, lanes, scale)
    return ax


def _strip(ax: Axes, lanes: Lanes, scale: _Scale) -> None:
    if lanes.second:
        edges = [s - lanes.start for s in lanes.second]
        edges.append(edges[-1] + 1.0)
        ax.stairs(lanes.requests, edges, fill=True, color="#bdbdbd", gid="requests")
    ax.set_ylim(0, scale.rps * 1.15)
    ax.set_ylabel("requests/s", fontsize=8)
    ax.tick_params(labelbottom=False, labelsize=7)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _lanes(ax: Axes, lanes: Lanes, scale: _Scale) -> None:
    t0 = lanes.start
    pad = 0.02 * scale.span
    left, right = -pad, scale.span + pad
    rows = {lane.pod: i for i, lane in enumerate(lanes.lanes)}
    for i, lane in enumerate(lanes.lanes):
        _life(ax, lane, i, t0, left, right)
    from matplotlib.patches import Rectangle

    for shade in lanes.shades:
        row = rows.get(shade.pod, rows.get(OTHER_PODS))
        if row is None:
            continue
        ax.add_patch(
            Rectangle(
                (shade.start - t0, row - 0.42),
                shade.seconds,
                0.84,
                facecolor=SHADE,
                edgecolor="#b8a800",
                linewidth=0.6,
                alpha=0.55,
                zorder=1,
                gid=f"shade:{shade.pod}",
            )
        )
    _moments(ax, lanes, t0)
    _marks(ax, lanes, t0)
    ax.set_yticks(
        range(len(lanes.lanes)),
        [_label(lane) for lane in lanes.lanes],
        fontsize=7,
    )
    ax.set_ylim(scale.rows - 0.5, -0.5)
    ax.set_xlim(left, right)
    ax.set_xlabel(f"seconds since {iso_utc(t0)} (first request)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", color="#e6e6e6", linewidth=0.6, zorder=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _label(lane: Lane) -> str:
    """The lane's name (``N other pods`` for a collapsed one) and its failed requests."""
    name = f"{len(lane.members)} {lane.pod}" if lane.members else lane.pod
    return f"{name} ({len(lane.failures)})" if lane.failures else name


def _life(ax: Axes, lane: Lane, row: int, t0: float, left: float, right: float) -> None:
    """The pod's life as a line: thin while starting, thick while serving, dotted while
    terminating; clipped to the axis."""

    def at(kind: Moment, default: float) -> float:
        stamp = lane.stamp(kind)
        return stamp.ts - t0 if stamp else default

    if lane.pod == OTHER_PODS:
        ax.hlines(row, left, right, color=LANE, linewidth=0.8, linestyle="--", gid="life:other")
        return
    if not lane.stamps:  # a backend the inputs say nothing else of
        ax.hlines(row, left, right, color=LANE, linewidth=0.8, linestyle="-.", gid="life:unknown")
        return
    exited = max((s.ts - t0 for s in lane.stamps if s.kind is Moment.EXITED), default=right)
    born = at(Moment.CREATED, left)
    ready = at(Moment.READY, born)
    deleted = at(Moment.DELETION, exited)
    ax.hlines(row, born, ready, color=LANE, linewidth=1.0, gid="life:starting")
    ax.hlines(row, ready, deleted, color=LANE, linewidth=3.0, gid="life:serving")
    ax.hlines(row, deleted, exited, color=LANE, linewidth=1.6, linestyle=":", gid="life:ending")


def _moments(ax: Axes, lanes: Lanes, t0: float) -> None:
    for kind, (marker, colour, filled) in MOMENTS.items():
        points = [
            (s.ts - t0, i + OFFSETS.get(kind, 0.0), s.exit_code)
            for i, lane in enumerate(lanes.lanes)
            for s in _drawn(lane)
            if s.kind is kind
        ]
        if not points:
            continue
        colours = [KILLED if code == 137 else colour for _, _, code in points]
        ax.scatter(
            [x for x, _, _ in points],
            [y for _, y, _ in points],
            s=44 if kind is Moment.DELETION else 26,
            marker=marker,
            c=colours if filled else "none",
            edgecolors=colours,
            linewidths=1.2,
            zorder=4,
            gid=f"moment:{kind.value}",
        )
        if kind is Moment.EXITED:
            for x, y, code in points:
                if code is not None:
                    ax.annotate(
                        f"exit {code}",
                        (x, y),
                        xytext=(5, 2),
                        textcoords="offset points",
                        fontsize=6.5,
                        color=KILLED if code == 137 else "#444444",
                        fontweight="bold" if code == 137 else "normal",
                        annotation_clip=True,
                    )


def _marks(ax: Axes, lanes: Lanes, t0: float) -> None:
    """Each failed request as a dot on its lane (spread over the lane's height, in a fixed
    pattern so the picture is reproducible), coloured by outcome; a ring when the pod is
    inferred from the race window (the request names no backend)."""
    points: dict[tuple[Outcome, bool], tuple[list[float], list[float]]] = {}
    for row, lane in enumerate(lanes.lanes):
        for k, f in enumerate(lane.failures):
            xs, ys = points.setdefault((f.outcome, f.inferred), ([], []))
            xs.append(f.ts - t0)
            ys.append(row + ((k * 0.6180339887) % 1.0 - 0.5) * JITTER)
    # the commonest outcome first: the rarer ones stay visible on top
    for (outcome, inferred), (xs, ys) in sorted(points.items(), key=lambda x: -len(x[1][0])):
        colour = OUTCOMES.get(outcome, OUTCOMES[Outcome.ERROR])[1]
        ax.scatter(
            xs,
            ys,
            s=10,
            color="none" if inferred else colour,
            edgecolors=colour if inferred else "none",
            linewidths=0.9,
            alpha=0.85,
            zorder=5,
            gid=f"failures:{outcome.value}" + (":inferred" if inferred else ""),
        )


def _legend(fig: Figure, panels: tuple[Lanes, ...]) -> None:
    """One legend outside the axes, with an entry for every kind of line, mark and shade
    drawn."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Artist] = []
    outcomes = {f.outcome for p in panels for lane in p.lanes for f in lane.failures}
    for outcome, (label, colour) in OUTCOMES.items():
        if outcome in outcomes:
            handles.append(
                Line2D([], [], linestyle="", marker="o", markersize=5, color=colour, label=label)
            )
    if any(f.inferred for p in panels for lane in p.lanes for f in lane.failures):
        label = "pod inferred: the only race\nwindow then (no backend logged)"
        handles.append(
            Line2D([], [], linestyle="", marker="o", markersize=5, markerfacecolor="none",
                   color="#555555", label=label)
        )  # fmt: skip
    stamps = [s for p in panels for lane in p.lanes for s in _drawn(lane)]
    kinds = {s.kind for s in stamps}
    for kind, (marker, colour, filled) in MOMENTS.items():
        if kind in kinds:
            handles.append(_moment_handle(kind.value, marker, colour, filled))
    if any(s.kind is Moment.EXITED and s.exit_code == 137 for s in stamps):
        handles.append(_moment_handle("exited 137 (SIGKILL)", "D", KILLED, True))
    handles += [
        Line2D([], [], color=LANE, linewidth=1.0, label="pod starting"),
        Line2D([], [], color=LANE, linewidth=3.0, label="pod serving"),
        Line2D([], [], color=LANE, linewidth=1.6, linestyle=":", label="pod terminating"),
    ]
    if any(lane.pod == OTHER_PODS for p in panels for lane in p.lanes):
        handles.append(
            Line2D([], [], color=LANE, linewidth=0.8, linestyle="--", label="other pods")
        )
    if any(lane.pod != OTHER_PODS and not lane.stamps for p in panels for lane in p.lanes):
        handles.append(
            Line2D([], [], color=LANE, linewidth=0.8, linestyle="-.", label="lifecycle unknown")
        )
    windows = sorted({s.seconds for p in panels for s in p.shades})
    if windows:
        text = ", ".join(f"{w:g}" for w in windows)
        handles.append(
            Patch(
                facecolor=SHADE,
                edgecolor="#b8a800",
                alpha=0.55,
                label=f"race window after deletion\n(diagnosed: {text} s)",
            )
        )
    handles.append(Patch(facecolor="#bdbdbd", label="requests per second"))
    fig.legend(
        handles=handles,
        loc="outside right upper",
        fontsize=8,
        frameon=False,
        title="failed requests by outcome,\npod moments",
        title_fontsize=8,
    )


def _moment_handle(label: str, marker: str, colour: str, filled: bool) -> Artist:
    from matplotlib.lines import Line2D

    return Line2D(
        [],
        [],
        linestyle="",
        marker=marker,
        markersize=6,
        markerfacecolor=colour if filled else "none",
        markeredgecolor=colour,
        label=label,
    )


def _save(fig: Figure, out: Path | io.BytesIO, fmt: str) -> None:
    if fmt not in FORMATS:
        raise PlotFormatError(f"pictures are PNG or SVG, not {fmt!r}")
    import matplotlib

    # a fixed salt and no date: the same lanes give the same SVG
    with matplotlib.rc_context({"svg.hashsalt": "svcdoctor"}):
        fig.savefig(out, format=fmt, metadata={"Date": None} if fmt == "svg" else None)


def plot_lanes(lanes: Lanes, out: Path | io.BytesIO, fmt: str = "png") -> None:
    """The lanes as PNG or SVG."""
    _save(draw_lanes(lanes), out, fmt)


def plot_before_after(
    before: Lanes, after: Lanes, out: Path | io.BytesIO, fmt: str = "png"
) -> None:
    """Before and after as PNG or SVG."""
    _save(draw_before_after(before, after), out, fmt)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def lanes_alt(lanes: Lanes) -> str:
    """The finding in words, for ``alt`` text: how many requests failed, whether on pods
    after their deletion (and inside the diagnosed window), on which pods, and how."""
    leaves = _leaves(lanes)
    pods = sum(1 for leaf in leaves if leaf.pod != UNKNOWN_BACKEND)
    known = "pods" if any(leaf.stamps for leaf in leaves) else "backends"
    deletions = sum(1 for leaf in leaves if leaf.stamp(Moment.DELETION))
    seen = f"{lanes.duration:.0f} s of requests" if sum(lanes.requests) else "no request log"
    span = f"{seen}, {_plural(pods, known[:-1])}, {_plural(deletions, 'deletion')}"
    total = lanes.failed
    if total == 0:
        return f"No failed requests: {span}."
    after = inside = 0
    windows = {s.pod: s for s in lanes.shades}
    for lane in leaves:
        deleted = lane.stamp(Moment.DELETION)
        shade = windows.get(lane.pod)
        for f in lane.failures:
            after += deleted is not None and f.ts >= deleted.ts
            inside += shade is not None and shade.start <= f.ts <= shade.end
    noun = "request" if total == 1 else "requests"
    unknown = sum(len(leaf.failures) for leaf in leaves if leaf.pod == UNKNOWN_BACKEND)
    if not deletions:
        where = "no deletion in the evidence"
    elif unknown == total:
        inside = sum(
            any(s.start <= f.ts <= s.end for s in lanes.shades)
            for leaf in leaves
            for f in leaf.failures
        )
        where = "the requests do not name their backend, so which pod each hit is unknown"
        if lanes.shades:
            where += f"; {inside} fell within a diagnosed race window after a deletion"
    elif after == total:
        where = "all on pods after their deletion"
    elif after:
        where = f"{after} on pods after their deletion"
    else:
        where = "none on a pod after its deletion"
    if lanes.shades and after and unknown < total:
        where += f", {inside} within the diagnosed {lanes.shades[0].seconds:g} s race window"
    if inferred := sum(f.inferred for leaf in leaves for f in leaf.failures):
        where += (
            f" ({inferred} of them put on the pod by time, the only race window then: "
            "the requests do not name their backend)"
        )
    ranked = sorted((leaf for leaf in leaves if leaf.failures), key=lambda x: -len(x.failures))
    if len(ranked) == 1 and ranked[0].pod != UNKNOWN_BACKEND and total > 1:
        where += f", all on one {known[:-1]}"
    top = ", ".join(f"{len(lane.failures)} on {lane.pod}" for lane in ranked[:3])
    more = f" and {len(ranked) - 3} more" if len(ranked) > 3 else ""
    how = Counter(
        OUTCOMES.get(f.outcome, OUTCOMES[Outcome.ERROR])[0] for x in ranked for f in x.failures
    )
    kinds = ", ".join(f"{n} {name}" for name, n in how.most_common())
    return f"{lanes.title}: {total} failed {noun}, {where}: {top}{more} ({kinds}); {span}."
