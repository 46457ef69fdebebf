"""The preStop curve of ``simulate recommend``: expected failed requests per rollout against
the preStop seconds (grace on the top axis), the target, the recommended point, the
simulated checks, and the race window a diagnosis observed.

``draw_prestop_curve`` returns a matplotlib Figure (Agg, no pyplot state) so tests read its
artists; ``plot_prestop_curve`` writes it as PNG or SVG.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from svcdoctor.model.diagnosis import RaceWindow
from svcdoctor.simulate.recommend import Recommendation, fixable_per_rollout

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

CURVE = "#1f77b4"
TARGET = "#2ca02c"
RECOMMENDED = "#d62728"
NOW = "#7f7f7f"
WINDOW = "#ff7f0e"
HELD_NOTE = "\n(approximate with kept-alive connections: see the simulated points)"
# gids of the artists, for tests and for anyone restyling the picture
GID_CURVE = "curve"
GID_TARGET = "target"
GID_RECOMMENDED = "recommended"
GID_NOW = "now-simulated"
GID_CHECKED = "recommended-simulated"
GID_WINDOW = "observed-window"
GID_WINDOW_CI = "observed-window-ci95"


def _count(x: float) -> str:
    """A count of failures, readable from thousands down to fractions."""
    if x == 0:
        return "0"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.2g}"


def _percent(share: float) -> str:
    return f"{share * 100:.3g} %"


def _slack(rec: Recommendation) -> int:
    """Seconds from SIGTERM to SIGKILL along the curve (grace minus preStop)."""
    return rec.grace_seconds - rec.prestop_seconds


def _window(observed: float | RaceWindow | None) -> tuple[float | None, tuple[float, float] | None]:
    if isinstance(observed, RaceWindow):
        return observed.seconds, observed.ci95
    return observed, None


def draw_prestop_curve(
    rec: Recommendation, observed_window: float | RaceWindow | None = None
) -> Figure:
    """Failed requests per rollout against preStop seconds (symmetric-log y, so both the
    hundreds without a preStop and the fractions near the target show), with the target
    line, the recommended point, the simulated rollouts now and with the recommendation,
    and, when given, the race window a diagnosis observed (its 95 % interval too when a
    ``RaceWindow`` is given): a preStop left of it leaves the race open."""
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.5, 4.8), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    xs = [c.prestop_seconds for c in rec.curve]
    ys = [c.failed_per_rollout for c in rec.curve]
    allowed = rec.allowed_per_rollout
    slack = _slack(rec)
    ax.plot(
        xs,
        ys,
        color=CURVE,
        marker="o",
        markersize=4,
        linewidth=1.6,
        label=f"expected failed per rollout (grace = preStop + {slack} s)"
        + (HELD_NOTE if rec.current.params.connection != "new" else ""),
        gid=GID_CURVE,
    )
    ax.axhline(
        allowed,
        color=TARGET,
        linestyle="--",
        linewidth=1.2,
        label=f"target: {_count(allowed)} per rollout ({_percent(rec.target)} of "
        f"{rec.rollout_requests:,.0f} requests)",
        gid=GID_TARGET,
    )
    point = rec.recommended_point
    if point is not None:
        ax.plot(
            [point.prestop_seconds],
            [point.failed_per_rollout],
            linestyle="none",
            marker="*",
            markersize=16,
            color=RECOMMENDED,
            label=f"recommended: preStop {point.prestop_seconds} s, grace {_grace(rec)}"
            + ("" if rec.met else " (target not met)"),
            gid=GID_RECOMMENDED,
            zorder=5,
        )
    now = rec.current.params
    ax.plot(
        [now.prestop],
        [fixable_per_rollout(rec.current)],
        linestyle="none",
        marker="s",
        markersize=7,
        color=NOW,
        label=f"simulated now: preStop {now.prestop:g} s, grace {now.grace:g} s",
        gid=GID_NOW,
        zorder=4,
    )
    ax.plot(
        [rec.checked.params.prestop],
        [fixable_per_rollout(rec.checked)],
        linestyle="none",
        marker="D",
        markersize=6,
        markerfacecolor="none",
        markeredgecolor=RECOMMENDED,
        label=f"simulated with the recommendation ({len(rec.checked.runs)} other rollouts)",
        gid=GID_CHECKED,
        zorder=6,
    )
    seconds, ci95 = _window(observed_window)
    if seconds is not None:
        ax.axvspan(
            0,
            seconds,
            color=WINDOW,
            alpha=0.12,
            label=f"observed race window {seconds:.3g} s (diagnosis):\na shorter preStop "
            "leaves it open",
            gid=GID_WINDOW,
        )
        if ci95 is not None:
            ax.axvspan(
                ci95[0],
                ci95[1],
                facecolor="none",
                edgecolor=WINDOW,
                hatch="//",
                linewidth=0,
                label=f"its 95 % interval {ci95[0]:.3g}-{ci95[1]:.3g} s",
                gid=GID_WINDOW_CI,
            )
    top = max([*ys, allowed, fixable_per_rollout(rec.current), 1.0])
    _symlog(ax, linear=max(allowed, 1e-3) / 10, top=top)
    right = max([*xs, now.prestop, seconds or 0.0, ci95[1] if ci95 else 0.0])
    ax.set_xlim(-0.3, right + 0.7)
    ax.set_xlabel("preStop sleep (seconds)")
    ax.set_ylabel("failed requests per rollout")
    shift = np.float64(slack)
    grace = ax.secondary_xaxis(
        "top", functions=(lambda x: np.add(x, shift), lambda g: np.subtract(g, shift))
    )
    grace.set_xlabel("terminationGracePeriodSeconds along the curve")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(_title(rec), fontsize=10, loc="left")
    fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return fig


def _symlog(ax: Axes, linear: float, top: float) -> None:
    """A y-axis linear from 0 to a power of ten below ``linear``, logarithmic above, with a
    tick at 0 and at every power of ten up to past ``top``, written as plain numbers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    low = math.floor(math.log10(linear))
    high = max(low + 1, math.ceil(math.log10(top * 1.5)))
    ax.set_yscale("symlog", linthresh=10.0**low, linscale=1.0)
    ax.set_ylim(0, 10.0**high)
    ax.yaxis.set_major_locator(FixedLocator([0.0] + [10.0**k for k in range(low, high + 1)]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda y, _: f"{y:,.{max(0, -low)}f}".rstrip("0").rstrip(".") if y else "0")
    )


def _grace(rec: Recommendation) -> str:
    """The grace period to set (the YAML's: never below the current one), and the least
    the curve needs when that is shorter."""
    if rec.grace_to_set == rec.grace_seconds:
        return f"{rec.grace_seconds} s"
    return f"{rec.grace_to_set} s ({rec.grace_seconds} s needed)"


def _race_within(rec: Recommendation) -> bool:
    """The target is missed, but not by what preStop and grace act on: the curve (their
    failures) reaches it, other mechanisms (``rec.reasons``) keep the rollout above it."""
    point = rec.recommended_point
    return not rec.met and point is not None and point.failed_per_rollout <= rec.allowed_per_rollout


def _title(rec: Recommendation) -> str:
    first = rec.curve[0] if rec.curve else None
    start = f" ({_count(first.failed_per_rollout)} with no preStop)" if first else ""
    if rec.met:
        return (
            f"preStop {rec.prestop_seconds} s with grace {_grace(rec)} keeps a "
            f"rollout within {_count(rec.allowed_per_rollout)} failed requests{start}"
        )
    if _race_within(rec):
        return (
            f"preStop {rec.prestop_seconds} s brings the race within the target; "
            "other failures keep the rollout above it"
        )
    return f"no preStop meets the target of {_count(rec.allowed_per_rollout)} per rollout{start}"


def curve_alt(rec: Recommendation, observed_window: float | RaceWindow | None = None) -> str:
    """The picture's finding in words (alt text)."""
    allowed = rec.allowed_per_rollout
    target = (
        f"the target of {_count(allowed)} per rollout ({_percent(rec.target)} of "
        f"{rec.rollout_requests:,.0f} requests)"
    )
    if not rec.curve:
        return f"preStop {rec.prestop_seconds} s, grace {_grace(rec)} against {target}."
    first, point = rec.curve[0], rec.recommended_point
    at = point.failed_per_rollout if point is not None else float("nan")
    text = (
        f"Expected failed requests per rollout fall from {_count(first.failed_per_rollout)} "
        f"with no preStop to {_count(at)} at the recommended preStop of "
        f"{rec.prestop_seconds} s (grace {_grace(rec)})"
    )
    if rec.met:
        shorter = [c for c in rec.curve if c.prestop_seconds < rec.prestop_seconds]
        text += f", within {target}"
        if shorter and shorter[-1].failed_per_rollout > allowed:
            text += (
                f"; {shorter[-1].prestop_seconds} s would leave "
                f"{_count(shorter[-1].failed_per_rollout)}"
            )
    elif _race_within(rec):
        text += (
            f", within {target} for the failures preStop and grace act on; the rollout "
            f"still misses it: {'; '.join(rec.reasons)}"
        )
    else:
        floor = min(c.failed_per_rollout for c in rec.curve)
        text += f"; no preStop meets {target}: failures level off at {_count(floor)}"
    text += (
        f". Simulated now (preStop {rec.current.params.prestop:g} s): "
        f"{_count(fixable_per_rollout(rec.current))}; with the recommendation: "
        f"{_count(fixable_per_rollout(rec.checked))}."
    )
    seconds, _ = _window(observed_window)
    if seconds is not None:
        covers = "covers" if rec.prestop_seconds >= seconds else "does not cover"
        text += f" The recommended preStop {covers} the observed race window of {seconds:.3g} s."
    return text


def plot_prestop_curve(
    rec: Recommendation,
    out: Path | BinaryIO,
    fmt: str = "png",
    observed_window: float | RaceWindow | None = None,
) -> None:
    """Write the curve as ``fmt`` (png or svg) to a path or a binary stream."""
    draw_prestop_curve(rec, observed_window).savefig(out, format=fmt)
