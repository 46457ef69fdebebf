"""The JSON that ``simulate``, ``simulate --emit-evidence`` and ``simulate recommend`` print
stays the same keys and values: other tools and tests read it. The golden files were
written by the code before its results became dataclasses; regenerate them with
``SVCDOCTOR_REGOLD=1`` only for a deliberate change of the output."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from svcdoctor.cli import cli

GOLDEN = Path(__file__).parent / "golden"
# a rollout with every router kind, keep-alive clients and a bad backend: every mechanism
# and every part of the summary has something to show
MODEL = [
    "--nodes", "20", "--replicas", "6", "--rate", "80", "--duration", "90",
    "--bad-backends", "1", "--ingress-share", "0.3", "--lb-share", "0.2",
    "--connection", "keepalive", "--runs", "2", "--seed", "3",
]  # fmt: skip


def _check(name: str, got: Any) -> None:
    path = GOLDEN / name
    if os.environ.get("SVCDOCTOR_REGOLD"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=2) + "\n")
    assert got == json.loads(path.read_text())


def _run(*args: str) -> Any:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code in (0, 1), done.output
    return json.loads(done.output)


def test_simulate_json_is_pinned() -> None:
    _check("simulate.json", _run("simulate", *MODEL, "--format", "json"))


def test_emitted_ground_truth_is_pinned(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    _run("simulate", *MODEL, "--format", "json", "--emit-evidence", str(out))
    _check("emitted.json", json.loads((out / "simulate.json").read_text()))


def _shape(value: Any) -> Any:
    """Keys and JSON types, recursively (lists by their first item)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


def test_recommend_json_keeps_its_shape() -> None:
    """Its values follow the remedy model (``model/remedy.py``); its keys are pinned."""
    model = [*MODEL[: MODEL.index("--bad-backends")], "--runs", "2"]
    got = _run("simulate", "recommend", *model, "--format", "json")
    _check("recommend-shape.json", _shape(got))
    assert got["current"]["failed"] > got["checked"]["failed"]
    assert got["current"]["by_cause"]["race"] == got["current"]["failed"]
