"""The ``diagnose --format json`` document keeps its shape: every key of the summary and of
each cause's details, for each variant the analyses produce (race with and without a
measured window, backend suspects, reuse idle gaps, kernel bursts, conntrack counters, node
concentration, several upstreams, an error log alone). ``svcdoctor fix --from-diagnosis``,
the lab and users' scripts read these keys.

The key trees in ``json_keys.json`` were taken from the output before the analyses' results
became typed records; regenerate them only for a deliberate change of the document:
``SVCDOCTOR_UPDATE_GOLDEN=1 pytest tests/diagnose/test_json_shape.py``."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Diagnosis, KernelEvent
from svcdoctor.report.diagnosis import render_json
from tests.diagnose import test_weak_signals as weak
from tests.factory import Scenario, generate, write_bundle

GOLDEN = Path(__file__).with_name("json_keys.json")
EXAMPLE = Path(str(files("svcdoctor.examples") / "rollout-race"))
ERROR_LOG = Path(__file__).parent.parent / "fixtures" / "evidence" / "ingress-nginx-error.log"
LOADGEN = Path(__file__).parent.parent / "fixtures" / "loadgen" / "fortio.txt"


EVERY = ("causes", "other_services")  # arrays whose every element is pinned


def key_tree(value: Any, every: bool = False) -> Any:
    """The keys of a JSON document, nested; arrays by their first element (``causes`` and
    ``other_services`` by each), leaves as ``None`` (values vary, keys must not)."""
    if isinstance(value, dict):
        return {k: key_tree(v, k in EVERY) for k, v in value.items()}
    if isinstance(value, list) and every:
        return [key_tree(v) for v in value]
    if isinstance(value, list):
        return [key_tree(value[0])] if value and isinstance(value[0], dict | list) else []
    return None


def _example(tmp: Path) -> Diagnosis:
    folder = tmp / "example"
    shutil.copytree(EXAMPLE, folder)
    return diagnose(read_evidence([str(folder)]))


def _bundle(cause: str, fmt: str = "csv", **kw: Any) -> Callable[[Path], Diagnosis]:
    def run(tmp: Path) -> Diagnosis:
        folder = write_bundle(generate(Scenario(cause, **kw)), tmp / "bundle", fmt)
        return diagnose(read_evidence([str(folder)]))

    return run


def _burst(_: Path) -> Diagnosis:
    rng = np.random.default_rng(4)
    cols = weak.frame(rng, 3000, 60)
    weak.burst_failures(rng, cols, 20, 32)
    return diagnose(weak.evidence(cols, kernel=weak.kernel(list(np.arange(20, 32, 0.05)))))


def _counters(_: Path) -> Diagnosis:
    rng = np.random.default_rng(6)
    cols = weak.frame(rng, 30_000, 600)
    weak.burst_failures(rng, cols, 300, 360)
    snaps = tuple(
        KernelEvent(weak.T0 + t, "insert_failed", c, "conntrack-S.txt")
        for t, c in [(0, 10), (120, 10), (240, 10), (300, 10), (360, 900), (480, 900)]
    )
    return diagnose(weak.evidence(cols, kernel=snaps))


def _keepalive(_: Path) -> Diagnosis:
    return diagnose(weak.evidence(weak.keepalive_traffic(7, 5.0), fmt="nginx-access"))


def _node(_: Path) -> Diagnosis:
    rng = np.random.default_rng(11)
    cols = weak.frame(rng, 20_000, 600)
    node = np.where(rng.random(20_000) < 0.3, "node-a", "node-b")
    cols["node"] = node
    outcome = cols["outcome"]
    assert isinstance(outcome, np.ndarray)
    outcome[(node == "node-a") & (rng.random(20_000) < 0.03)] = "timeout"
    return diagnose(weak.evidence(cols))


def _upstreams(_: Path) -> Diagnosis:
    rng = np.random.default_rng(8)
    cols = weak.frame(rng, 40_000, 600)
    names = np.array(["shop-web-80", "shop-cart-8080", "shop-api-80", "auth-login-80"])
    cols["upstream"] = names[rng.integers(0, 4, 40_000)]
    backend = np.char.add(np.char.add(cols["upstream"], "/"), np.asarray(cols["backend"]))
    cols["backend"] = backend
    outcome = cols["outcome"]
    assert isinstance(outcome, np.ndarray)
    for bad_backend in ("shop-api-80/10.0.0.12:8080", "shop-web-80/10.0.0.14:8080"):
        bad = np.flatnonzero(backend == bad_backend)
        outcome[rng.choice(bad, int(0.05 * bad.size), replace=False)] = "http_error"
    return diagnose(weak.evidence(cols, fmt="nginx-access"))


def _error_log(tmp: Path) -> Diagnosis:
    shutil.copy(ERROR_LOG, tmp)
    return diagnose(read_evidence([str(tmp)]))


def _load_summary(tmp: Path) -> Diagnosis:
    shutil.copy(LOADGEN, tmp)
    return diagnose(read_evidence([str(tmp)]))


CASES: dict[str, Callable[[Path], Diagnosis]] = {
    "example": _example,  # race with a measured window and a remedy per container
    "sigkill": _bundle("sigkill"),  # race without a window, the grace period raised
    "backend": _bundle("backend", bad_pod=3),  # a suspect with pod, node and readiness
    "keepalive": _keepalive,  # idle gaps without connection ids
    "reuse": _bundle("reuse"),  # reused connections, exits on reused connections
    "burst": _burst,  # kernel alignment
    "counters": _counters,  # conntrack counter growth
    "node": _node,  # node concentration
    "upstreams": _upstreams,  # several Services: the upstream table and other_services
    "error-log": _error_log,  # no request log: no race test, no backend column
    "load-summary": _load_summary,  # a load generator's report: counts, no request rows
}


def _paths(tree: Any, prefix: str = "") -> list[str]:
    """Every key path of a key tree, in document order."""
    if isinstance(tree, dict):
        return [p for k, v in tree.items() for p in [prefix + k, *_paths(v, prefix + k + ".")]]
    if isinstance(tree, list) and tree:
        return _paths(tree[0], prefix + "[].")
    return []


@pytest.mark.parametrize("case", list(CASES))
def test_json_keys_are_pinned(case: str, tmp_path: Path) -> None:
    tree = key_tree(json.loads(render_json(CASES[case](tmp_path))))
    golden = json.loads(GOLDEN.read_text())
    if os.environ.get("SVCDOCTOR_UPDATE_GOLDEN"):
        golden[case] = tree
        GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
    expected = golden[case]
    assert tree["summary"] == expected["summary"]
    for mine, pinned in zip(tree["causes"], expected["causes"], strict=True):
        assert mine == pinned
    assert tree == expected
    # the order of keys is what readers see (diffs, jq output): pinned too
    assert _paths(tree) == _paths(expected)
