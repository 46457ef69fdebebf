"""Shared test fixtures: where ../shared is, and a helper to lint text or paths; and the rules
of parallel runs (``pytest -n 3 --dist loadgroup``, as ``make test`` runs). Labs are isolated
by their run prefixes (namespaces, lock files, free ports), so two can run at once: the tests
that start one go to two xdist groups, each run by one worker, one test at a time, beside the
other tests. ``serve`` holds the modules that share session lab serves (tests/cluster) and the
serve of the real hops; ``run`` the rest, with every test that makes or removes a dead run's
leftovers on purpose (test_cleanup, test_pod, test_jobs), so that no worker removes what
another's test just made. What killed runs of earlier sessions left is removed once, by the
controller, before any worker starts."""

from __future__ import annotations

import contextlib
import fcntl
import io
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.lab.cleanup import leftovers, remove
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


# The lab modules that go to the ``serve`` group (the others go to ``run``): about half
# the lab tests' time each (``pytest --durations``).
SERVE_GROUP = ("tests/cluster/", "tests/lab/test_serve_hops.py")


def lab_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that starts a lab, None for the others."""
    module = item.path.relative_to(ROOT).as_posix()
    if not (
        module.startswith("tests/lab/")
        or module in LAB_MODULES
        or item.get_closest_marker("lab") is not None
    ):
        return None
    return "lab-serve" if module.startswith(SERVE_GROUP) else "lab-run"


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a parallel run whose lab tests would not keep to their groups: pytest 9.2
    drops xdist's group suffix from the node ids (pytest-xdist#1386), and the tests that make
    and remove leftovers on purpose would meet."""
    major, minor = (int(x) for x in pytest.__version__.split(".")[:2])
    if config.getoption("dist", "no") == "loadgroup" and (major, minor) >= (9, 2):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} ignores xdist_group (pytest-xdist#1386): the lab "
            "tests would run in two workers at once; install pytest<9.2 (pyproject pins it)"
        )


@contextlib.contextmanager
def deliberate_leftovers() -> Iterator[None]:
    """Hold while a test keeps what a dead run left on purpose (to find and remove it
    itself): the clean-up below, of any pytest session on this machine, waits for it."""
    path = Path(tempfile.gettempdir()) / "svcdoctor-test-leftovers.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def pytest_sessionstart(session: pytest.Session) -> None:
    """Remove what killed lab runs left on this machine, as ``lab clean`` would: once, in
    the controller (or the only process), before any test starts a lab."""
    if not hasattr(session.config, "workerinput"):
        with deliberate_leftovers():
            remove(leftovers())


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test as it is collected (before xdist reads the groups into the node ids)."""
    group = lab_group(item)
    if group:
        item.add_marker(pytest.mark.xdist_group(group))


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
