"""The backends picture: failure rate per backend pod with its 95 % interval (the
diagnosis' suspects highlighted, the other backends' rate as a line) and, when the request
log names clients, a client-backend matrix of failure rates on the same rows: who is
pinned to the pod that fails.

``draw_backends`` returns a matplotlib Figure (Agg, no pyplot state) so tests read its
artists; ``plot_backends`` writes it as PNG or SVG.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from svcdoctor.model.breakdown import BackendRate, Breakdown, PairRate

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import Formatter

MAX_BACKENDS = 30  # rows drawn: the suspects, then the highest failure rates
MAX_CLIENTS = 30  # matrix columns: the clients with the most failures
ANNOTATE_CELLS = 150  # write failed/requests in the cells up to this many
SUSPECT = "#d62728"
OTHER = "#1f77b4"
OTHERS_LINE = "#2ca02c"
EMPTY = "#e8e8e8"
GID_OTHERS = "others-rate"
GID_PAIRS = "pair-rates"


def shown_backends(b: Breakdown, limit: int = MAX_BACKENDS) -> tuple[BackendRate, ...]:
    """The rows drawn, in the breakdown's order: every suspect, then the backends with the
    highest failure rates (the busier first among equals) up to ``limit``."""
    if len(b.backends) <= limit:
        return b.backends
    ranked = sorted(b.backends, key=lambda x: (not x.suspect, -x.rate, -x.requests))
    keep = {id(x) for x in ranked[: max(limit, len(b.suspects))]}
    return tuple(x for x in b.backends if id(x) in keep)


def shown_clients(b: Breakdown, limit: int = MAX_CLIENTS) -> tuple[str, ...]:
    """The matrix columns, in name order: the clients with the most failures (then the
    most requests) up to ``limit``."""
    failed: dict[str, tuple[int, int]] = {}
    for p in b.pairs:
        k, n = failed.get(p.client, (0, 0))
        failed[p.client] = (k + p.failures, n + p.requests)
    ranked = sorted(failed, key=lambda c: (-failed[c][0], -failed[c][1], c))[:limit]
    return tuple(sorted(ranked, key=natural))


def natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts ``client-2`` before ``client-10``."""
    parts = re.split(r"(\d+)", name)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p)


def colour_top(rates: list[float]) -> float:
    """The top of the matrix's colour scale: the highest pair rate rounded up to 1, 2 or 5
    times a power of ten (at least 1 %, at most 100 %), so a 12 % pod stands out as well
    as a 100 % one."""
    top = max([*rates, 0.01])
    if top >= 1.0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    return min(1.0, next(m * power for m in (1, 2, 5, 10) if m * power >= top - 1e-12))


def _percent(rate: float) -> str:
    return f"{rate * 100:.3g} %"


def draw_backends(b: Breakdown) -> Figure:
    """One horizontal bar per backend (its failure rate, the 95 % interval as error bars,
    suspects in red), a line at the rate of the other backends together, and, with
    clients, the failure rate of each client-backend pair on the same rows (grey: no
    requests; the cells say failed/requests when there are few)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = shown_backends(b)
    clients = shown_clients(b) if b.pairs else ()
    height = max(3.2, 1.4 + 0.28 * len(rows))
    matrix = min(6.0, max(2.5, 0.25 * len(clients)))
    width = 7.0 + (matrix + 1.5 if clients else 0.0)
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    if clients:
        ratios = [5.0, matrix]
        ax, grid = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": ratios})
    else:
        ax, grid = fig.add_subplot(), None
    y = list(range(len(rows)))
    rates = [x.rate for x in rows]
    errors = [
        [x.rate - x.ci95[0] for x in rows],
        [x.ci95[1] - x.rate for x in rows],
    ]
    bars = ax.barh(
        y,
        rates,
        xerr=errors,
        color=[SUSPECT if x.suspect else OTHER for x in rows],
        error_kw={"ecolor": "#333333", "elinewidth": 0.8, "capsize": 2},
        height=0.7,
    )
    for bar, x in zip(bars, rows, strict=True):
        bar.set_gid(f"backend:{x.backend}")
    ax.set_yticks(y, [x.name for x in rows], fontsize=8)
    for label, x in zip(ax.get_yticklabels(), rows, strict=True):
        if x.suspect:
            label.set_color(SUSPECT)
            label.set_fontweight("bold")
    ax.invert_yaxis()
    top = max([x.ci95[1] for x in rows] + [1e-4])
    ax.set_xlim(0, min(1.0, top * 1.08) if top < 1.0 else 1.02)
    ax.xaxis.set_major_formatter(_percent_formatter())
    ax.set_xlabel("failed requests (95 % interval)")
    ax.grid(True, axis="x", alpha=0.3)
    handles: list[Artist] = [
        Patch(color=SUSPECT, label="singled out by the diagnosis"),
        Patch(color=OTHER, label="other backends"),
    ]
    others = b.others_rate
    if b.suspects and others is not None:
        line = ax.axvline(
            others,
            color=OTHERS_LINE,
            linestyle="--",
            linewidth=1.2,
            label=f"the other backends together: {_percent(others)}",
            gid=GID_OTHERS,
        )
        handles.append(line)
    hidden = len(b.backends) - len(rows)
    ax.set_title(
        "failure rate per backend" + (f" ({hidden} more not drawn)" if hidden else ""),
        fontsize=9,
        loc="left",
    )
    fig.suptitle(_title(b), fontsize=10, x=0.01, ha="left")
    if grid is not None:
        _draw_pairs(fig, grid, b, rows, clients)
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return fig


def _percent_formatter() -> Formatter:
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0, decimals=None)


def _draw_pairs(
    fig: Figure,
    ax: Axes,
    b: Breakdown,
    rows: tuple[BackendRate, ...],
    clients: tuple[str, ...],
) -> None:
    """The client-backend matrix of failure rates (masked where a pair has no requests)."""
    import numpy as np
    from matplotlib.colors import LinearSegmentedColormap

    row_of = {x.backend: i for i, x in enumerate(rows)}
    col_of = {c: j for j, c in enumerate(clients)}
    rate = np.full((len(rows), len(clients)), np.nan)
    cells: list[PairRate] = []
    for p in b.pairs:
        i, j = row_of.get(p.backend), col_of.get(p.client)
        if i is not None and j is not None:
            rate[i, j] = p.rate
            cells.append(p)
    top = colour_top([p.rate for p in cells])
    colours = ["#ffffff", "#fcbba1", SUSPECT, "#67000d"]
    cmap = LinearSegmentedColormap.from_list("failed", colours).with_extremes(bad=EMPTY)
    image = ax.imshow(
        np.ma.masked_invalid(rate),
        cmap=cmap,
        vmin=0.0,
        vmax=top,
        aspect="auto",
        interpolation="nearest",
        gid=GID_PAIRS,
    )
    if len(rows) * len(clients) <= ANNOTATE_CELLS:
        for p in cells:
            i, j = row_of[p.backend], col_of[p.client]
            ax.text(
                j,
                i,
                f"{p.failures}/{p.requests}",
                ha="center",
                va="center",
                fontsize=6,
                color="white" if p.rate > 0.5 * top else "#333333",
            )
    ax.set_xticks(range(len(clients)), clients, rotation=90, fontsize=7)
    ax.tick_params(axis="y", left=False)
    hidden = len({p.client for p in b.pairs}) - len(clients)
    ax.set_xlabel("client" + (f" (the {len(clients)} with most failures)" if hidden else ""))
    ax.set_title("failure rate per client and backend (failed/requests)", fontsize=9, loc="left")
    bar = fig.colorbar(image, ax=ax, shrink=0.8, format=_percent_formatter())
    bar.set_label("failed (grey: no requests)", fontsize=8)


def _title(b: Breakdown) -> str:
    if b.suspects:
        worst = b.suspects[0]
        more = f" and {len(b.suspects) - 1} more" if len(b.suspects) > 1 else ""
        return (
            f"{worst.name}{more} failed {worst.failures:,} of {worst.requests:,} requests "
            f"({_percent(worst.rate)}); the other backends {_percent(b.others_rate or 0.0)}"
        )
    return f"{b.failures:,} of {b.requests:,} requests failed over {len(b.backends)} backends"


def backends_alt(b: Breakdown) -> str:
    """The picture's finding in words (alt text)."""
    if not b.backends:
        return "Failure rate per backend pod: no request names a backend."
    parts = []
    for x in b.suspects:
        parts.append(
            f"{x.name} failed {x.failures:,} of {x.requests:,} requests ({_percent(x.rate)}, "
            f"95 % interval {_percent(x.ci95[0])}-{_percent(x.ci95[1])})"
        )
        pairs = sorted(b.clients_of(x.backend), key=lambda p: (-p.failures, -p.requests))
        if len(pairs) == 1:
            only = pairs[0]
            parts.append(
                f"only {only.client} of {len(b.clients)} clients sent it requests "
                f"({only.failures:,} of {only.requests:,} failed): pinned to it"
            )
        elif pairs:
            hit = sum(1 for p in pairs if p.failures)
            most = pairs[0]
            parts.append(
                f"{len(pairs)} of {len(b.clients)} clients sent it requests and {hit} of them "
                f"saw failures there, most {most.client} ({most.failures:,} of "
                f"{most.requests:,})"
            )
    if b.suspects:
        others = b.others_rate
        rest = len(b.backends) - len(b.suspects)
        parts.append(
            (
                f"the other backend failed {_percent(others or 0.0)}"
                if rest == 1
                else f"the other {rest} backends failed {_percent(others or 0.0)} together"
            )
            if rest
            else "no other backend served requests"
        )
        text = "Failure rate per backend pod: " + "; ".join(parts) + "."
    else:
        worst = max(b.backends, key=lambda x: (x.rate, x.requests))
        text = (
            f"Failure rate per backend pod: no backend singled out; {b.failures:,} of "
            f"{b.requests:,} requests failed over {len(b.backends)} backends, the highest "
            f"rate {_percent(worst.rate)} on {worst.name}."
        )
    if b.pairs and not b.suspects:
        top = max(b.pairs, key=lambda p: (p.failures, p.requests))
        if top.failures:
            text += (
                f" The client-backend pair with most failures: {top.client} → {top.backend} "
                f"({top.failures:,} of {top.requests:,})."
            )
    return text


def plot_backends(b: Breakdown, out: Path | BinaryIO, fmt: str = "png") -> None:
    """Write the picture as ``fmt`` (png or svg) to a path or a binary stream."""
    draw_backends(b).savefig(out, format=fmt)
