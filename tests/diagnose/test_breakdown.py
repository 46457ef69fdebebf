"""The backends picture's numbers from real-format bundles: per-backend counts equal the
request rows, the diagnosis' suspects (and the simulated bad pod) are flagged, the
client-backend pairs add up to the requests, and a bundle without backends gives nothing."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.diagnose.breakdown import build_breakdown
from svcdoctor.evidence import read_evidence
from svcdoctor.model import FAILURES, BackendDetails, Cause
from svcdoctor.model.breakdown import Breakdown
from tests.diagnose.test_weak_signals import evidence, frame
from tests.factory import Scenario, generate, write_bundle

# one bad pod of 8, HTTP/2 clients (each pinned to one pod), no rollout
SIM = (
    "--nodes", "30", "--replicas", "8", "--rate", "100", "--duration", "90", "--runs", "1",
    "--bad-backends", "1", "--connection", "http2", "--no-rollout", "--seed", "5",
)  # fmt: skip


def _simulated(folder: Path, *options: str) -> Path:
    """``svcdoctor simulate --emit-evidence``: the bundle a user gets."""
    done = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "simulate", *options, "--emit-evidence", str(folder)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return folder


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _simulated(tmp_path_factory.mktemp("pinned") / "bundle", *SIM)


@pytest.fixture(scope="module")
def rollout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bad pod during a rollout, keep-alive clients: some rows near deletions."""
    return _simulated(
        tmp_path_factory.mktemp("rollout") / "bundle",
        *("--nodes", "20", "--replicas", "6", "--rate", "80", "--duration", "120"),
        *("--bad-backends", "1", "--connection", "keepalive", "--clients", "12", "--seed", "3"),
    )


def _csv_counts(folder: Path) -> tuple[Counter[str], Counter[str], Counter[tuple[str, str]]]:
    """Requests and failures per backend, and requests per (client, backend), read from
    the request log with the csv module."""
    n: Counter[str] = Counter()
    k: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    with (folder / "requests.csv").open() as f:
        for row in csv.DictReader(f):
            n[row["backend"]] += 1
            k[row["backend"]] += row["outcome"] in FAILURES
            pairs[row["client"], row["backend"]] += 1
    return n, k, pairs


def _built(folder: Path) -> Breakdown:
    evidence = read_evidence([str(folder)])
    b = build_breakdown(evidence, diagnose(evidence))
    assert b is not None
    return b


@pytest.mark.parametrize("name", ["pinned", "rollout"])
def test_bars_equal_the_request_rows_per_backend(name: str, request: pytest.FixtureRequest) -> None:
    folder: Path = request.getfixturevalue(name)
    b = _built(folder)
    n, k, pairs = _csv_counts(folder)
    assert {x.backend: x.requests for x in b.backends} == dict(n)
    assert {x.backend: x.failures for x in b.backends} == {x: k[x] for x in n}
    assert b.requests == sum(n.values())
    for x in b.backends:
        assert x.rate == pytest.approx(k[x.backend] / n[x.backend])
        assert x.ci95[0] <= x.rate <= x.ci95[1]
        assert x.pod == x.backend  # the simulated log names pods
    # the pairs add up to the requests, per backend and in all
    assert {(p.client, p.backend): p.requests for p in b.pairs} == dict(pairs)
    for x in b.backends:
        assert sum(p.requests for p in b.clients_of(x.backend)) == x.requests
        assert sum(p.failures for p in b.clients_of(x.backend)) == x.failures


@pytest.mark.parametrize("name", ["pinned", "rollout"])
def test_the_bad_pod_is_the_flagged_suspect(name: str, request: pytest.FixtureRequest) -> None:
    folder: Path = request.getfixturevalue(name)
    evidence = read_evidence([str(folder)])
    d = diagnose(evidence)
    b = build_breakdown(evidence, d)
    assert b is not None
    truth = json.loads((folder / "simulate.json").read_text())["ground_truth"]
    details = d.cause(Cause.BACKEND).details
    assert isinstance(details, BackendDetails)
    assert [x.backend for x in b.suspects] == [s.backend for s in details.suspects]
    assert [x.pod for x in b.suspects] == truth["bad_pods"]
    assert b.backends[: len(b.suspects)] == b.suspects  # suspects first
    others = [x for x in b.backends if not x.suspect]
    assert b.others_rate == pytest.approx(
        sum(x.failures for x in others) / sum(x.requests for x in others)
    )
    assert b.suspects[0].rate > 10 * (b.others_rate or 0.0)


def test_http2_clients_are_pinned_to_one_pod(pinned: Path) -> None:
    """With one long-lived connection per client, each client's requests all go to one
    pod: one pair per client, and the bad pod's failures are its clients' failures."""
    b = _built(pinned)
    assert len(b.pairs) == len(b.clients)
    bad = b.suspects[0]
    theirs = b.clients_of(bad.backend)
    assert theirs
    assert all(p.rate == 1.0 for p in theirs)
    assert sum(p.failures for p in theirs) == bad.failures == b.failures


def test_masked_attempts_count_on_the_backend_that_failed_them(tmp_path: Path) -> None:
    """An ingress-nginx log with retried attempts: the backend failed the attempts the
    client never saw, and the bars count them; pods are named from their IPs."""
    generated = generate(Scenario("backend", duration=120.0, retries=True, seed=4))
    folder = write_bundle(generated, tmp_path / "nginx", "nginx-retries")
    evidence = read_evidence([str(folder)])
    b = build_breakdown(evidence, diagnose(evidence))
    assert b is not None
    rows = [r for r in evidence.requests.to_dicts() if r["role"] != "error_log" and r["backend"]]
    n = Counter(r["backend"] for r in rows)
    k = Counter(r["backend"] for r in rows if r["outcome"] in FAILURES)
    assert {x.backend: (x.requests, x.failures) for x in b.backends} == {x: (n[x], k[x]) for x in n}
    assert any(r["role"] == "masked" for r in rows)
    assert [x.pod for x in b.suspects] == [generated.truth["bad_pod"]]
    assert all(x.pod is not None and x.pod != x.backend for x in b.backends)
    # the client is the log's remote address; its pairs add up to the attempts
    assert sum(p.requests for p in b.pairs) == len(rows)
    assert sum(p.failures for p in b.pairs) == sum(k.values())


def test_no_backend_column_gives_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    rows = ["ts,outcome"] + [
        f"{1_796_205_600 + i / 10},{'reset' if i % 7 else 'ok'}" for i in range(300)
    ]
    (folder / "requests.csv").write_text("\n".join(rows) + "\n")
    evidence = read_evidence([str(folder)])
    assert build_breakdown(evidence, diagnose(evidence)) is None


def test_one_ingress_log_breaks_down_the_diagnosed_service() -> None:
    """A proxy log of four Services: the picture is of the diagnosed one (or the one the
    user picked), never the others' pods."""
    rng = np.random.default_rng(8)
    cols = frame(rng, 40_000, 600)
    upstream = np.array(["shop-web-80", "shop-cart-8080", "shop-api-80", "auth-login-80"])
    cols["upstream"] = upstream[rng.integers(0, 4, 40_000)]
    outcome = cols["outcome"]
    assert isinstance(outcome, np.ndarray)
    backend = np.char.add(np.char.add(cols["upstream"], "/"), np.asarray(cols["backend"]))
    cols["backend"] = backend
    bad = np.flatnonzero(backend == "shop-api-80/10.0.0.12:8080")
    outcome[rng.choice(bad, int(0.05 * bad.size), replace=False)] = "http_error"
    ev = evidence(cols, fmt="nginx-access")
    for service, prefix in (("shop-api-80", "shop-api-80/"), ("shop/cart", "shop-cart-8080/")):
        d = diagnose(ev, service=service)
        b = build_breakdown(ev, d)
        assert b is not None
        assert b.service == service
        assert b.backends
        assert all(x.backend.startswith(prefix) for x in b.backends)
        assert b.requests == int((np.asarray(cols["upstream"]) == prefix[:-1]).sum())
    d = diagnose(ev)  # the strongest Service, found by itself
    b = build_breakdown(ev, d)
    assert b is not None
    assert [x.backend for x in b.suspects] == ["shop-api-80/10.0.0.12:8080"]
