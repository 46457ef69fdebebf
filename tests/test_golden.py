"""Outputs a refactor must not move: lint, diagnose and simulate recommend (JSON, text), fix diffs.

The files under tests/golden/ were written by the code before issue 26's restructuring. JSON
is compared as data; keys the new shape adds (NEW_KEYS) are the only difference allowed.
Regenerate deliberately with SVCDOCTOR_GOLDEN_WRITE=1 when a behaviour change is intended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).with_name("golden")
EXAMPLES = Path(__file__).resolve().parents[1] / "src" / "svcdoctor" / "examples"
# Keys a newer JSON shape may add; everything else must be equal to the golden output.
NEW_KEYS = frozenset(
    {
        *("schema_version", "plan", "paths", "incomplete", "stale_connections"),
        *("masked_recovered", "masked_unrecovered", "round_timeouts", "load_summaries"),
        *("window_clock_seconds", "window_plan_seconds"),
    }
)

CASES: dict[str, tuple[str, ...]] = {
    "lint.json": ("lint", "--example", "-o", "json"),
    "lint.sarif": ("lint", "--example", "-o", "sarif"),
    "lint.txt": ("lint", "--example"),
    "diagnose.json": ("diagnose", "--example", "-o", "json"),
    "diagnose.txt": ("diagnose", "--example"),
    "recommend.txt": ("simulate", "recommend", "--seed", "7"),
    "recommend.json": ("simulate", "recommend", "--seed", "7", "-o", "json"),
    "fix_shop.diff": ("fix", "--diff", "shop.yaml"),
    "fix_rollout_race.diff": ("fix", "--diff", "rollout-race/deployment.yaml"),
    "fix_from_diagnosis.diff": (
        "fix", "--diff", "--from-diagnosis", str(GOLDEN / "diagnose.json"),
        "rollout-race/deployment.yaml",
    ),
}  # fmt: skip


def _run(args: tuple[str, ...]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "svcdoctor", *args],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    out = done.stdout.replace(str(EXAMPLES), "<examples>")
    if args[0] == "fix":  # the manual steps and the summary are part of fix's output
        out += "--- stderr\n" + done.stderr.replace(str(EXAMPLES), "<examples>")
    return out


def _without_new_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_new_keys(v) for k, v in value.items() if k not in NEW_KEYS}
    if isinstance(value, list):
        return [_without_new_keys(v) for v in value]
    return value


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_is_unchanged(name: str) -> None:
    out = _run(CASES[name])
    path = GOLDEN / name
    if os.environ.get("SVCDOCTOR_GOLDEN_WRITE"):  # as the golden holds it: no newer keys
        if name.endswith((".json", ".sarif")):
            out = json.dumps(_without_new_keys(json.loads(out)), indent=2) + "\n"
        path.write_text(out)
    expected = path.read_text()
    if name.endswith((".json", ".sarif")):
        assert _without_new_keys(json.loads(out)) == json.loads(expected)
    else:
        assert out == expected
