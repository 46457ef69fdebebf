"""``--plot FILE``: the picture's type follows the extension (.png or .svg, any case); any
other extension is one line and exit 2, before the work."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "src" / "svcdoctor" / "examples" / "rollout-race"
SMALL = ("--nodes", "50", "--replicas", "4", "--runs", "2")
COMMANDS = {
    "diagnose": ["diagnose", str(EXAMPLE)],
    "simulate": ["simulate", *SMALL],
    "recommend": ["simulate", "recommend", *SMALL],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ["p.svg", "p.PNG"])
def test_the_type_follows_the_extension(tmp_path: Path, command: str, name: str) -> None:
    out = tmp_path / name
    done = CliRunner().invoke(cli, [*COMMANDS[command], "--plot", str(out)])
    assert done.exit_code in (0, 1), done.output  # recommend: 1 when the target is unmet
    data = out.read_bytes()
    if name.endswith(".svg"):
        assert data.lstrip().startswith(b"<?xml")
        assert b"<svg" in data
    else:
        assert data.startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ["p.jpg", "p.pdf", "p", "p.svgz"])
def test_other_extensions_are_refused(tmp_path: Path, command: str, name: str) -> None:
    done = CliRunner().invoke(cli, [*COMMANDS[command], "--plot", str(tmp_path / name)])
    assert done.exit_code == 2
    errors = [line for line in done.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1
    assert "written as PNG or SVG: give a name ending in .png or .svg" in errors[0]
    assert list(tmp_path.iterdir()) == []


def test_diagnose_plot_is_the_lanes(tmp_path: Path) -> None:
    out = tmp_path / "lanes.svg"
    assert CliRunner().invoke(cli, ["diagnose", str(EXAMPLE), "--plot", str(out)]).exit_code == 0
    assert b"<!-- api: 82 failed requests on 8 pods -->" in out.read_bytes()


def test_recommend_plot_is_the_prestop_curve(tmp_path: Path) -> None:
    out = tmp_path / "curve.svg"
    done = CliRunner().invoke(cli, ["simulate", "recommend", *SMALL, "--plot", str(out)])
    assert done.exit_code in (0, 1), done.output
    assert b"<!-- preStop sleep (seconds) -->" in out.read_bytes()
