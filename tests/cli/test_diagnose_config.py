"""``diagnose`` says what the manifests given with the evidence break with the rules'
settings ``lint`` would use in the same place: the nearest config file's."""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files
from pathlib import Path

EXAMPLE = Path(str(files("svcdoctor.examples") / "rollout-race"))


def _diagnose(cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "diagnose", str(EXAMPLE)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_config_file_lint_reads_sets_the_manifest_notes(tmp_path: Path) -> None:
    assert "manifest SVD101 no-prestop-delay" in _diagnose(tmp_path)
    (tmp_path / ".svcdoctor.toml").write_text('disable = ["SVD101"]\n')
    quiet = _diagnose(tmp_path)
    assert "manifest SVD101" not in quiet
    assert "Verdict:" in quiet
    assert "race" in quiet
