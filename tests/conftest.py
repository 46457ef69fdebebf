"""Shared test fixtures: where ../shared is, and a helper to lint text or paths; and the one
rule of parallel runs (``pytest -n 2 --dist loadgroup``, as ``make test`` runs): every test
that runs the lab's processes, namespaces or iptables rules runs in one worker, one at a time,
because two labs on one machine break each other."""

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


# Modules outside tests/lab/ whose tests start a lab (``lab run``, ``lab serve`` with pods).
LAB_MODULES = frozenset(
    {
        "tests/cli/test_fuzz.py",
        "tests/cli/test_lab_cli.py",
        "tests/cluster/test_agentjob.py",
        "tests/cluster/test_live_lab.py",
        "tests/cluster/test_probe.py",
        "tests/cluster/test_rollout_test.py",
    }
)


def runs_a_lab(item: pytest.Item) -> bool:
    module = item.path.relative_to(ROOT).as_posix()
    return (
        module.startswith("tests/lab/")
        or module in LAB_MODULES
        or item.get_closest_marker("lab") is not None
    )


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a parallel run whose lab tests would not share one worker: pytest 9.2 drops
    xdist's group suffix from the node ids (pytest-xdist#1386), and two labs collide."""
    major, minor = (int(x) for x in pytest.__version__.split(".")[:2])
    if config.getoption("dist", "no") == "loadgroup" and (major, minor) >= (9, 2):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} ignores xdist_group (pytest-xdist#1386): the lab "
            "tests would run in two workers at once; install pytest<9.2 (pyproject pins it)"
        )


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test as it is collected (before xdist reads the groups into the node ids)."""
    if runs_a_lab(item):
        item.add_marker(pytest.mark.xdist_group("lab"))


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
