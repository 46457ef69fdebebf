"""Shared test fixtures: where ../shared is, and a helper to lint text or paths."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.manifests import build_inventory, load

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus" / "manifests"
SARIF_SCHEMA = SHARED / "schemas" / "sarif-schema-2.1.0.json"


def lint_text(text: str | bytes, settings: Settings | None = None) -> LintResult:
    """Lint a manifest given as text, read through stdin like ``svcdoctor lint -``."""
    data = text.encode() if isinstance(text, str) else text
    loaded = load(["-"], stdin=io.BytesIO(data))
    return run_checks(build_inventory(loaded), settings or Settings())


def lint_paths(paths: list[str], settings: Settings | None = None) -> LintResult:
    return run_checks(build_inventory(load(paths)), settings or Settings())


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (../shared is laid beside the checkout)")
    return CORPUS


@pytest.fixture(scope="session")
def sarif_schema() -> Path:
    if not SARIF_SCHEMA.is_file():
        pytest.skip(f"SARIF schema not found at {SARIF_SCHEMA}")
    return SARIF_SCHEMA
