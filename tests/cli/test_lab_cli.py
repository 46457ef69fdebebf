"""``svcdoctor lab run`` refuses bad options before it starts anything (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--propagation", "2:1"], "uniform needs LOW ≤ HIGH"),
        (["--propagation", "lognormal:1,200"], "the lab takes at most 60 s"),
        (["--propagation", "zipf:1"], "unknown distribution 'zipf'"),
        (["--latency", "exp:-1"], "values must be finite and ≥ 0"),
        (["--slow", "2,1"], "SHARE in [0, 1]"),
        (["--slow", "half"], "expected SHARE,SECONDS"),
        (["--bad", "4"], "--bad-backends must be smaller than --replicas"),
        (["--max-surge", "0", "--max-unavailable", "0"], "cannot both be 0"),
        (["--scenario", "nope"], "'--scenario'"),
        (["--scenario", "race", "--prestop-fails"], "--prestop-fails needs a preStop hook"),
        (["--baseline", "120", "--tail", "120", "--replicas", "32"], "would take about"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    done = CliRunner().invoke(cli, ["lab", "run", *args])
    assert done.exit_code == 2
    assert message in done.output


def test_out_must_not_mix_evidence_with_other_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    done = CliRunner().invoke(cli, ["lab", "run", "--out", str(tmp_path)])
    assert done.exit_code == 2
    assert done.output.startswith(f"svcdoctor: error: --out {tmp_path}: holds other files")
    file = tmp_path / "notes.txt"
    done = CliRunner().invoke(cli, ["lab", "run", "--out", str(file)])
    assert done.exit_code == 2
    assert "exists and is not a directory" in done.output


def test_the_legacy_low_high_propagation_is_uniform() -> None:
    from svcdoctor.cli._lab import dist as _dist
    from svcdoctor.model import Dist

    assert _dist(None, None, "0.5:1.5") == Dist("uniform", 0.5, 1.5)
    assert _dist(None, None, "exp:0.5") == Dist("exp", 0.5)
