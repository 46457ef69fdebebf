"""``diagnose`` says what the manifests given with the evidence break with the rules'
settings ``lint`` would use in the same place: the nearest config file's, ``--config`` and
the remedy flags; the race's remedy uses the same settings."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

EXAMPLE = Path(str(files("svcdoctor.examples") / "rollout-race"))


def _diagnose(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "diagnose", str(EXAMPLE), *args],
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


def _race(cwd: Path, *args: str) -> tuple[dict[str, Any], str]:
    """The race details of ``diagnose -o json`` with ``args``, and its manifest note ("" when
    lint's SVD101 asks for nothing)."""
    body = json.loads(_diagnose(cwd, "-o", "json", *args))
    race = next(c for c in body["causes"] if c["cause"] == "race")
    note = next((e for e in race["evidence"] if e.startswith("manifest SVD101")), "")
    return race["details"], note


def test_the_config_and_the_remedy_flags_set_the_remedy_and_the_notes(tmp_path: Path) -> None:
    """``--config`` and lint's remedy flags: the same longest request, margin and Kubernetes
    version for the manifest notes and the race's remedy as lint and fix use."""
    plain, note = _race(tmp_path)
    assert (plain["plan"]["grace_seconds"], plain["plan"]["hook"]) == (30, "sleep")
    assert "also cuts requests" not in note
    config = tmp_path / "mine.toml"
    config.write_text('max-request-seconds = 40\nkubernetes-version = "1.28"\n')
    for args in (
        ("--config", str(config)),
        ("--max-request-seconds", "40", "--kube-version", "1.28"),
    ):
        details, note = _race(tmp_path, *args)
        assert details["plan"]["grace_seconds"] == 5 + 40 + 5
        assert details["plan"]["hook"] == "exec"
        assert details["remedy"][0]["plan"]["prestop"]["handler"] == "shell"
        assert "also cuts requests longer than 30 s" in note
    margin, _ = _race(tmp_path, "--margin-seconds", "20")
    assert margin["plan"]["grace_seconds"] == 5 + 10 + 20


def test_an_app_that_drains_by_itself_shortens_the_diagnosed_preStop(tmp_path: Path) -> None:
    """lint's ``drains`` with seconds: the measured window less the app's own drain (and the
    grace period counts the drain); without seconds the measured failures say the app's drain
    is too short, so the diagnosed preStop stays."""
    plain, _ = _race(tmp_path)
    prestop = plain["remedy"][0]["plan"]["prestop"]["seconds"]
    assert prestop == 5
    drained, _ = _race(tmp_path, "--drains", "deployment/api=4", "--max-request-seconds", "30")
    assert drained["remedy"][0]["plan"]["prestop"]["seconds"] == prestop - 4
    assert drained["remedy"][0]["prestop_seconds"] == prestop - 4
    assert drained["remedy"][0]["grace_seconds"] == (prestop - 4) + 4 + 30 + 5
    untold, _ = _race(tmp_path, "--drains", "deployment/api")
    assert untold["remedy"][0]["plan"]["prestop"]["seconds"] == prestop
