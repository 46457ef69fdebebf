"""The backends picture, checked on its data: one bar per backend at its failure rate with
its interval, the suspects red, the others' rate as a line, the client-backend matrix equal
to the pairs (grey where a pair sent nothing), alt text stating the finding, and real PNG
and SVG files."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer

from svcdoctor.diagnose import diagnose
from svcdoctor.diagnose.breakdown import build_breakdown
from svcdoctor.evidence import read_evidence
from svcdoctor.model.breakdown import BackendRate, Breakdown, PairRate
from svcdoctor.report.backends import (
    ANNOTATE_CELLS,
    GID_OTHERS,
    GID_PAIRS,
    MAX_BACKENDS,
    OTHER,
    SUSPECT,
    backends_alt,
    colour_top,
    draw_backends,
    natural,
    plot_backends,
    shown_backends,
    shown_clients,
)
from tests.diagnose.test_breakdown import SIM, _simulated

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> Breakdown:
    folder = _simulated(tmp_path_factory.mktemp("pinned") / "bundle", *SIM)
    evidence = read_evidence([str(folder)])
    b = build_breakdown(evidence, diagnose(evidence))
    assert b is not None
    return b


def _bars(fig: Figure) -> dict[str, tuple[float, str]]:
    """Each backend's bar: its width (the rate) and colour."""
    from matplotlib.patches import Rectangle

    out = {}
    for a in fig.axes[0].patches:
        gid = a.get_gid() or ""
        if gid.startswith("backend:") and isinstance(a, Rectangle):
            out[gid.removeprefix("backend:")] = (a.get_width(), to_hex(a.get_facecolor()))
    return out


def test_bars_are_the_backends_rates(pinned: Breakdown) -> None:
    fig = draw_backends(pinned)
    bars = _bars(fig)
    assert bars == {
        x.backend: (pytest.approx(x.rate), SUSPECT if x.suspect else OTHER) for x in pinned.backends
    }
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [x.name for x in pinned.backends]  # suspects on top
    # error bars span each 95 % interval
    (container,) = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    assert container.errorbar is not None
    segments = container.errorbar.lines[2][0].get_segments()
    assert [(s[0][0], s[1][0]) for s in segments] == [
        (pytest.approx(x.ci95[0]), pytest.approx(x.ci95[1])) for x in pinned.backends
    ]
    (line,) = [a for a in fig.axes[0].get_lines() if a.get_gid() == GID_OTHERS]
    assert line.get_xdata()[0] == pytest.approx(pinned.others_rate)


def test_matrix_is_the_pairs(pinned: Breakdown) -> None:
    fig = draw_backends(pinned)
    (image,) = [a for a in fig.axes[1].get_images() if a.get_gid() == GID_PAIRS]
    grid = image.get_array()
    assert grid is not None
    rows = [x.backend for x in pinned.backends]
    clients = list(shown_clients(pinned))
    assert grid.shape == (len(rows), len(clients))
    expected = np.full(grid.shape, np.nan)
    for p in pinned.pairs:
        expected[rows.index(p.backend), clients.index(p.client)] = p.rate
    assert np.array_equal(np.ma.filled(grid.astype(float), np.nan), expected, equal_nan=True)
    # pinned: every client's requests on one pod, so one cell per column
    assert (~np.ma.getmaskarray(grid)).sum(axis=0).tolist() == [1] * len(clients)
    assert len(rows) * len(clients) > ANNOTATE_CELLS
    assert len(fig.axes[1].texts) == 0  # too many cells to write in


def test_small_matrix_cells_say_failed_of_requests() -> None:
    backends = (
        BackendRate("pod-b", "pod-b", 30, 30, 1.0, (0.88, 1.0), True),
        BackendRate("pod-a", "pod-a", 50, 1, 0.02, (0.0005, 0.1), False),
    )
    pairs = (
        PairRate("c1", "pod-a", 20, 0, 0.0),
        PairRate("c1", "pod-b", 30, 30, 1.0),
        PairRate("c2", "pod-a", 30, 1, 1 / 30),
    )
    fig = draw_backends(Breakdown(backends, pairs))
    texts = {(t.get_position(), t.get_text()) for t in fig.axes[1].texts}
    # rows: pod-b, pod-a; columns: c1, c2
    assert texts == {((0, 1), "0/20"), ((0, 0), "30/30"), ((1, 1), "1/30")}
    text = backends_alt(Breakdown(backends, pairs))
    assert "only c1 of 2 clients sent it requests (30 of 30 failed)" in text
    assert "the other backend failed 2 %" in text


def test_alt_text_states_the_finding(pinned: Breakdown) -> None:
    bad = pinned.suspects[0]
    (only,) = pinned.clients_of(bad.backend)
    text = backends_alt(pinned)
    assert f"{bad.name} failed {bad.failures:,} of {bad.requests:,} requests" in text
    assert f"only {only.client} of {len(pinned.clients)} clients sent it requests" in text
    assert f"the other {len(pinned.backends) - 1} backends failed" in text


def _synthetic(backends: int, suspects: int) -> Breakdown:
    rows = [
        BackendRate(f"10.0.0.{i}:8080", None, 1000, i % 4, (i % 4) / 1000, (0.0, 0.01), False)
        for i in range(backends)
    ]
    for i in range(suspects):
        rows[-1 - i] = BackendRate(
            f"10.0.1.{i}:8080", f"api-{i}", 1000, 900, 0.9, (0.88, 0.92), True
        )
    return Breakdown(tuple(sorted(rows, key=lambda x: (not x.suspect, x.name))))


def test_many_backends_keep_the_suspects_and_the_worst() -> None:
    b = _synthetic(80, 2)
    rows = shown_backends(b)
    assert len(rows) == MAX_BACKENDS
    assert {x.backend for x in b.suspects} <= {x.backend for x in rows}
    hidden = [x for x in b.backends if x not in rows]
    assert max(x.rate for x in hidden) <= min(x.rate for x in rows)
    fig = draw_backends(b)
    assert len(_bars(fig)) == MAX_BACKENDS
    assert "50 more not drawn" in fig.axes[0].get_title(loc="left")
    assert len(fig.axes) == 1  # no clients: no matrix


def test_no_suspect_alt_names_the_worst_backend() -> None:
    b = _synthetic(6, 0)
    text = backends_alt(b)
    assert "no backend singled out" in text
    assert "the highest rate 0.3 % on 10.0.0.3:8080" in text
    assert not [a for a in draw_backends(b).axes[0].get_lines() if a.get_gid() == GID_OTHERS]


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_files_are_real_pictures(pinned: Breakdown, fmt: str, tmp_path: Path) -> None:
    out = io.BytesIO()
    plot_backends(pinned, out, fmt)
    data = out.getvalue()
    if fmt == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert int.from_bytes(data[16:20], "big") > 600
    else:
        assert ET.fromstring(data).tag.endswith("svg")
    path = tmp_path / f"backends.{fmt}"
    plot_backends(pinned, path, fmt)
    assert path.read_bytes()[:8] == data[:8]


def test_colour_scale_fits_the_worst_pair() -> None:
    assert colour_top([0.0, 0.117, 0.01]) == pytest.approx(0.2)
    assert colour_top([0.05]) == pytest.approx(0.05)
    assert colour_top([1.0, 0.2]) == 1.0
    assert colour_top([]) == pytest.approx(0.01)
    b = _synthetic(3, 0)
    pairs = (
        PairRate("c1", b.backends[0].backend, 10, 1, 0.1),
        PairRate("c2", b.backends[1].backend, 5, 0, 0.0),
    )
    (image,) = draw_backends(Breakdown(b.backends, pairs)).axes[1].get_images()
    assert image.get_clim() == (0.0, pytest.approx(0.1))


def test_clients_sort_naturally() -> None:
    names = ["client-10", "client-2", "client-1", "b", "a"]
    assert sorted(names, key=natural) == ["a", "b", "client-1", "client-2", "client-10"]
