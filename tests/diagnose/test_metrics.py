"""``diagnose --prometheus``'s analysis: on per-step counts built here from a per-second
model (fast, every cause and its absence), then end to end: the simulator's OpenMetrics
history, backfilled by promtool into a real Prometheus, read through the real client."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from svcdoctor.diagnose import Settings
from svcdoctor.diagnose.metrics import NoRequestSeries, analyse, diagnose_prometheus
from svcdoctor.diagnose.metrics_history import (
    Conntrack,
    Counts,
    Grid,
    History,
    NodeTotal,
    PodLife,
    RequestSource,
    choose_step,
    counted,
)
from svcdoctor.diagnose.metrics_race import _bin_span, _union_sums, near_masks
from svcdoctor.model import Cause, Diagnosis, Verdict
from svcdoctor.model.diagnosis import BackendDetails, InfraDetails, RaceDetails, ReuseDetails
from svcdoctor.report.diagnosis import diagnosis_to_dict, render_json, render_text
from svcdoctor.report.fixes import patch_text
from tests.prometheus_server import prometheus_with  # noqa: F401  (the fixture)

T0 = 1_767_225_600.0
STEP = 15.0
FOUND = frozenset(
    {
        "istio_requests_total",
        "kube_pod_created",
        "kube_pod_deletion_timestamp",
        "kube_pod_owner",
        "kube_replicaset_owner",
        "node_nf_conntrack_stat_insert_failed",
        "node_nf_conntrack_stat_drop",
    }
)


# --- a per-second model, binned the way the store's steps bin it ----------------------------


class Model:
    """Per second: requests, failures and UC/URX-flagged failures, per pod (six replicas,
    replaced in rollouts), and conntrack drops on two nodes."""

    def __init__(self, seconds: int, seed: int, rate: float = 60.0, replicas: int = 6) -> None:
        self.rng = np.random.default_rng(seed)
        self.seconds = seconds
        self.replicas = replicas
        self.pod_n = self.rng.poisson(rate / replicas, (replicas, seconds)).astype(float)
        self.pod_k = np.zeros((replicas, seconds))
        self.closed = np.zeros(seconds)
        self.drops = np.zeros((2, seconds))
        self.pods: list[PodLife] = []
        self.deletions: list[float] = []

    def background(self, rate: float) -> None:
        self.pod_k += self.rng.binomial(self.pod_n.astype(int), rate)

    def rollouts(self, starts: list[float], window: float, gap: float = 11.3) -> None:
        """Each rollout deletes every replica, ``gap`` s apart; for ``window`` s after a
        deletion, new connections to the deleted pod fail (window 0: the fix)."""
        for r, start in enumerate(starts):
            for i in range(self.replicas):
                d = start + i * gap
                self.deletions.append(d)
                self.pods.append(PodLife(f"api-rs{r}-{i}", "api", f"api-rs{r}", T0 - 3600, T0 + d))
                if window > 0:
                    lo, hi = int(np.floor(d)), int(np.ceil(d + window))
                    # the second holding d fails for its part after d only
                    for sec in range(lo, min(hi, self.seconds)):
                        part = min(sec + 1, d + window) - max(sec, d)
                        n = int(self.pod_n[i, sec])
                        self.pod_k[i, sec] = self.rng.binomial(n, max(0.0, min(part, 1.0)))

    def bad_pod(self, i: int, rate: float) -> None:
        self.pod_k[i] = self.rng.binomial(self.pod_n[i].astype(int), rate)

    def idle_closes(self, rate: float) -> None:
        extra = self.rng.binomial(self.pod_n.astype(int), rate).astype(float)
        self.closed += extra.sum(axis=0)
        self.pod_k += extra

    def conntrack(self, lo: int, hi: int, rate: float) -> None:
        """Node 1 drops new connections from second ``lo`` to ``hi``: each drop a failure."""
        n = self.pod_n[:, lo:hi].astype(int)
        dropped = self.rng.binomial(n, rate).astype(float)
        self.pod_k[:, lo:hi] += dropped
        self.drops[1, lo:hi] += dropped.sum(axis=0)

    def history(self, *, per_pod: bool = True, flags: bool = True) -> History:
        grid = Grid(T0, T0 + self.seconds, STEP)

        def binned(x: np.ndarray) -> np.ndarray:
            # second s (its events in [s, s+1)) belongs to the bin ending at or after s + 1
            idx = np.ceil((np.arange(self.seconds) + 1) / STEP).astype(int)
            return np.bincount(idx, weights=x, minlength=grid.n)[: grid.n]

        pods = {
            f"api-rs0-{i}": Counts(binned(self.pod_n[i]), binned(self.pod_k[i]))
            for i in range(self.replicas)
        }
        counts = Counts(
            binned(self.pod_n.sum(axis=0)),
            binned(self.pod_k.sum(axis=0)),
            binned(self.closed) if flags else None,
        )
        conntrack = Conntrack(
            binned(self.drops.sum(axis=0)),
            np.zeros(grid.n),
            None,
            tuple(NodeTotal(f"node-{j}", int(self.drops[j].sum()), 0) for j in range(2)),
        )
        return History(
            service="shop/api",
            source=RequestSource.ISTIO,
            grid=grid,
            counts=counts,
            pods=tuple(self.pods),
            per_pod=pods if per_pod else {},
            conntrack=conntrack,
            found=FOUND,
        )


def _race(d: Diagnosis) -> RaceDetails:
    details = d.cause(Cause.RACE).details
    assert isinstance(details, RaceDetails)
    return details


ROLLOUTS = [600.0 + 900.0 * r for r in range(8)]


def test_race_is_found_with_its_window_and_remedy() -> None:
    m = Model(7800, seed=1)
    m.background(0.0002)
    m.rollouts(ROLLOUTS, window=4.0)
    d = analyse(m.history())
    assert d.primary is not None
    assert d.primary.cause is Cause.RACE
    assert d.primary.verdict is Verdict.LIKELY
    race = _race(d)
    assert race.window is not None
    low, high = race.window.ci95
    # the true 4 s window, found from 15 s steps: deletions fall at every offset in them
    assert low <= 4.0 <= high
    assert high - low < STEP
    assert race.recommended_prestop_seconds is not None
    assert race.recommended_prestop_seconds >= high
    assert race.remedy
    assert "preStop" in patch_text(race.remedy[0].patch)
    assert len(d.rollouts) == len(ROLLOUTS)
    assert all(r.deletions == 6 and r.failures > r.expected_failures for r in d.rollouts)
    assert d.summary.deletions == 6 * len(ROLLOUTS)
    assert d.summary.replicas is None or d.summary.replicas >= 1


def test_the_timeline_holds_every_step_and_draws_over_days(tmp_path: Path) -> None:
    """The picture of a metrics diagnosis: failures and requests per query step (not only
    the deletions), on an axis in hours or days when the range is long."""
    from svcdoctor.report.diagnosis import plot_timeline

    m = Model(7800, seed=1)
    m.background(0.0002)
    m.rollouts(ROLLOUTS, window=4.0)
    h = m.history()
    d = analyse(h)
    t = d.timeline
    assert t.step == h.grid.step
    assert len(t.second) == len(t.failures) == len(t.requests) == h.grid.n
    assert t.second[0] == h.grid.start - h.grid.step  # bins are (t - step, t]
    assert sum(t.failures) == d.summary.errors
    assert sum(t.requests) == d.summary.requests
    assert {e.ts for e in t.events} == {p.deleted for p in h.pods if p.deleted is not None}
    out = tmp_path / "timeline.svg"
    plot_timeline(d, out, "svg")
    assert f"failures per {h.grid.step:g} s" in out.read_text()
    assert "hours since" in out.read_text()


def test_kube_proxy_programming_latency_is_the_floor_of_the_remedy() -> None:
    m = Model(7800, seed=1)
    m.background(0.0002)
    m.rollouts(ROLLOUTS, window=4.0)
    plain = _race(analyse(m.history()))
    slow = analyse(replace(m.history(), programming_p99=25.0))
    race = _race(slow)
    assert plain.window is not None
    assert plain.window.ci95[1] < 25.0
    assert race.recommended_prestop_seconds is not None
    assert plain.recommended_prestop_seconds is not None
    assert race.recommended_prestop_seconds >= 25 > plain.recommended_prestop_seconds
    assert any("network programming took up to 25 s" in e for e in slow.cause(Cause.RACE).evidence)


def test_no_race_when_the_shutdown_is_fixed() -> None:
    m = Model(7800, seed=2)
    m.background(0.002)
    m.rollouts(ROLLOUTS, window=0.0)
    d = analyse(m.history())
    race = d.cause(Cause.RACE)
    assert race.verdict is Verdict.UNLIKELY
    assert _race(d).window is None
    assert d.primary is None
    assert all(r.window_seconds is None for r in d.rollouts)


def test_one_bad_pod_is_singled_out_and_the_race_not_blamed() -> None:
    m = Model(7800, seed=3)
    m.background(0.0002)
    m.rollouts(ROLLOUTS, window=0.0)
    m.bad_pod(4, 0.08)
    d = analyse(m.history())
    assert d.primary is not None
    assert d.primary.cause is Cause.BACKEND
    backend = d.cause(Cause.BACKEND).details
    assert isinstance(backend, BackendDetails)
    assert [x.pod for x in backend.suspects] == ["api-rs0-4"]
    assert d.cause(Cause.RACE).verdict is Verdict.UNLIKELY


def test_without_a_pod_label_the_backend_cannot_be_tested() -> None:
    m = Model(3600, seed=4)
    m.bad_pod(4, 0.08)
    d = analyse(m.history(per_pod=False))
    backend = d.cause(Cause.BACKEND)
    assert backend.score == 0.0
    assert backend.collect


def test_idle_closes_away_from_rollouts_are_reuse() -> None:
    m = Model(7800, seed=5)
    m.rollouts(ROLLOUTS, window=0.0)
    m.idle_closes(0.01)
    d = analyse(m.history())
    assert d.primary is not None
    assert d.primary.cause is Cause.REUSE
    reuse = d.cause(Cause.REUSE).details
    assert isinstance(reuse, ReuseDetails)
    assert reuse.closed_by_upstream is not None
    assert reuse.closed_by_upstream.away_from_deletions
    # without flags there is nothing to tell idle closes by
    flagless = analyse(m.history(flags=False))
    assert flagless.cause(Cause.REUSE).score == 0.0


def test_failures_with_conntrack_drops_on_one_node_are_infra() -> None:
    m = Model(3600, seed=6)
    m.background(0.0002)
    m.conntrack(1200, 1500, 0.05)
    d = analyse(m.history())
    assert d.primary is not None
    assert d.primary.cause is Cause.INFRA
    infra = d.cause(Cause.INFRA)
    assert isinstance(infra.details, InfraDetails)
    assert infra.details.counter_growth is not None
    assert infra.details.counter_growth.aligned
    assert "node-1" in infra.evidence[0]


def test_drops_at_another_time_do_not_explain_the_failures() -> None:
    m = Model(3600, seed=7)
    m.background(0.0002)
    m.conntrack(1200, 1500, 0.05)
    h = m.history()
    assert h.conntrack is not None
    moved = replace(h.conntrack, insert_failed=np.roll(h.conntrack.insert_failed, 100))
    d = analyse(replace(h, conntrack=moved))
    assert d.cause(Cause.INFRA).verdict is not Verdict.LIKELY


def test_healthy_has_no_cause_and_says_what_is_missing() -> None:
    m = Model(3600, seed=8)
    m.background(0.0001)
    h = m.history()
    d = analyse(replace(h, found=frozenset({"istio_requests_total"})))
    assert d.primary is None
    assert d.next_steps[0].startswith("no cause")
    warnings = " ".join(d.summary.warnings)
    assert "kube_pod_deletion_timestamp not found" in warnings
    assert "node_nf_conntrack_stat_insert_failed not found" in warnings
    assert "rollouts" not in diagnosis_to_dict(d)  # none: the file-based shape


def test_rollouts_render_in_json() -> None:
    m = Model(3600, seed=9)
    m.rollouts([600.0, 2400.0], window=3.0)
    body = json.loads(render_json(analyse(m.history())))
    assert [r["deletions"] for r in body["rollouts"]] == [6, 6]
    assert set(body["rollouts"][0]) == {
        "time",
        "end",
        "workloads",
        "deletions",
        "requests",
        "failures",
        "expected_failures",
        "failure_rate",
        "failure_rate_ci95",
        "window_seconds",
    }
    assert body["rollouts"][0]["time"].startswith("2026-01-01T00:10:00")
    console = Console(record=True, width=200)
    render_text(analyse(m.history()), console)
    text = console.export_text()
    assert "Rollouts (2;" in text
    assert "2026-01-01T00:10:00" in text


# --- the bin arithmetic --------------------------------------------------------------------


def test_bins_and_union_sums_match_a_direct_count() -> None:
    rng = np.random.default_rng(10)
    grid = Grid(T0, T0 + 3000, STEP)
    values = rng.integers(0, 9, grid.n).astype(float)
    cum = np.concatenate([[0.0], np.cumsum(values)])
    anchors = np.sort(rng.uniform(T0 - 40, T0 + 3040, (20, 7)), axis=1)
    first, last = _bin_span(grid, anchors - 1.0, anchors + 30.0)
    got = _union_sums(cum, first, last)
    t = grid.t
    for row, expected in zip(anchors, got, strict=True):
        hit = np.zeros(grid.n, dtype=bool)
        for a in row:
            hit |= (t - STEP < a + 30.0) & (t >= a - 1.0)
        assert values[hit].sum() == expected
    near = near_masks(grid, anchors[0], Settings())
    assert not (near.near & near.after).any()


def test_step_and_promql() -> None:
    assert choose_step(0, 3600) == 15.0
    assert choose_step(0, 86400) == 15.0
    assert choose_step(0, 7 * 86400) == 30.0  # 20,160 steps: the client chunks them
    assert choose_step(0, 60 * 86400) == 300.0
    q = counted('x{a="b"}', 15.0)
    assert q == '(((x{a="b"}) - (x{a="b"} offset 15s)) >= 0 or (x{a="b"}))'


# --- end to end: simulator → OpenMetrics → promtool → Prometheus → client → diagnosis --------


def _simulate(tmp: Path, name: str, plan: dict[str, Any], **params: Any) -> tuple[Path, Any]:
    from svcdoctor.simulate.metrics import MetricsPlan, Source, write_openmetrics
    from svcdoctor.simulate.params import SimParams

    kw: dict[str, Any] = {"nodes": 20, "replicas": 6, "rate": 100.0, "duration": 300.0}
    p = SimParams(**{**kw, **params}).validate()
    if "source" in plan:
        plan = {**plan, "source": Source(plan["source"])}
    mp = MetricsPlan(**{"rollouts": 3, **plan}).validate(p)
    path = tmp / f"{name}.om"
    return path, write_openmetrics(path, p, 1, mp)


@pytest.fixture
def served(prometheus_with: Any, tmp_path: Path) -> Any:  # noqa: F811
    from svcdoctor.evidence.prometheus import PromClient

    def run(
        name: str, plan: dict[str, Any], service: str | None = None, **params: Any
    ) -> tuple[Diagnosis, Any]:
        path, truth = _simulate(tmp_path, name, plan, **params)
        url = prometheus_with(path)
        with PromClient(url) as client:
            return diagnose_prometheus(client, service, truth.start, truth.end), truth

    return run


FIXED = {"prestop": 10.0, "shutdown": "graceful"}


def test_e2e_race(served: Any) -> None:
    d, truth = served("race", {})
    assert d.primary is not None
    assert d.primary.cause is Cause.RACE
    assert (d.summary.requests, d.summary.errors) == (truth.requests, truth.failed)
    assert len(d.rollouts) == 3
    assert sum(r.failures for r in d.rollouts) == truth.failed
    assert _race(d).window is not None
    assert d.service == "sim/api"
    rows = {src.path: src.rows for src in d.summary.sources}
    assert rows["kube_pod_deletion_timestamp"] == len(truth.deleted_pods)
    assert rows["kube_pod_created"] >= 12  # two ReplicaSets of 6 at least


def test_e2e_race_fixed(served: Any) -> None:
    d, truth = served("fixed", {}, **FIXED)
    assert truth.failed == 0
    assert d.primary is None
    assert d.cause(Cause.RACE).verdict is Verdict.UNLIKELY
    assert len(d.rollouts) == 3


def test_e2e_bad_pod_with_istio_pod_label(served: Any) -> None:
    # the bad pod is an old one, gone with the rollout: it is singled out from the steps
    # away from deletions, so the history holds a baseline before each rollout (the
    # deletions are known to a scrape, and their windows start that much earlier)
    d, truth = served(
        "bad",
        {"source": "istio", "pod_label": True},
        "sim/api",
        bad_backends=1,
        rollout_at=150.0,
        **FIXED,
    )
    assert d.primary is not None
    assert d.primary.cause is Cause.BACKEND
    backend = d.primary.details
    assert isinstance(backend, BackendDetails)
    assert tuple(x.pod for x in backend.suspects) == truth.bad_pods


def test_e2e_keepalive_flags(served: Any) -> None:
    d, truth = served(
        "keepalive", {"source": "istio", "idle_timeout": 0.6}, connection="keepalive", **FIXED
    )
    assert truth.failed > 0
    assert d.primary is not None
    assert d.primary.cause is Cause.REUSE


def test_e2e_conntrack_pressure(served: Any) -> None:
    d, truth = served("conntrack", {}, conntrack_max=2000, node_conn_rate=20.0, **FIXED)
    assert truth.conntrack_drops
    assert d.primary is not None
    assert d.primary.cause is Cause.INFRA


def test_e2e_healthy(served: Any) -> None:
    d, truth = served("healthy", {"rollouts": 1}, rollout=False)
    assert truth.failed == 0
    assert d.primary is None
    assert d.summary.requests == truth.requests
    assert not d.rollouts


def test_e2e_unknown_service_is_a_one_line_error(served: Any) -> None:
    with pytest.raises(NoRequestSeries, match="no requests of Service nope/none"):
        served("unknown", {"rollouts": 1}, "nope/none", rollout=False)


def _two_services(path: Path) -> Path:
    """An hour (15 s scrapes) of shop/api's ingress-nginx counters, shop/web's Istio
    counters, and two nodes' conntrack insert failures: shop/api fails 1 request a second
    while node-a's table fails inserts (minutes 20-30); shop/web never fails."""
    from tests.prometheus_server import write_openmetrics

    t = T0 + np.arange(0, 3601, STEP)
    pressure = (t > T0 + 1200) & (t <= T0 + 1800)
    failed = np.cumsum(np.where(pressure, STEP, 0.0))
    total = np.arange(t.size) * 10 * STEP  # 10 requests a second, from 0
    ok = total - failed

    def series(values: np.ndarray) -> list[tuple[float, float]]:
        return list(zip(t.tolist(), values.tolist(), strict=True))

    def nginx(status: str, values: np.ndarray) -> Any:
        labels = {"namespace": "shop", "service": "api", "ingress": "api", "status": status}
        return ({**labels, "method": "GET", "path": "/"}, series(values))

    istio = {
        "reporter": "source",
        "destination_service": "web.shop.svc.cluster.local",
        "destination_workload": "web",
        "destination_workload_namespace": "shop",
        "response_code": "200",
        "response_flags": "-",
    }
    return write_openmetrics(
        path,
        {
            "nginx_ingress_controller_requests": [nginx("200", ok), nginx("503", failed)],
            "istio_requests_total": [(istio, series(total))],
            "node_nf_conntrack_stat_insert_failed": [
                ({"instance": "node-a"}, series(failed)),
                ({"instance": "node-b"}, series(np.zeros(t.size))),
            ],
        },
    )


def test_e2e_every_service_the_strongest_leads(prometheus_with: Any, tmp_path: Path) -> None:  # noqa: F811
    from svcdoctor.evidence.prometheus import PromClient

    url = prometheus_with(_two_services(tmp_path / "two.om"))
    with PromClient(url) as client:
        d = diagnose_prometheus(client, None, T0, T0 + 3600)
        web = diagnose_prometheus(client, "shop/web", T0, T0 + 3600)
        api = diagnose_prometheus(client, "shop/api", T0, T0 + 3600)  # nginx's only
    assert d.service == "shop/api"
    assert d.primary is not None
    assert d.primary.cause is Cause.INFRA
    assert "node-a" in d.primary.evidence[0]
    assert d.summary.errors == 600
    assert d.summary.upstreams is not None
    assert [row.upstream for row in d.summary.upstreams] == ["shop/api", "shop/web"]
    assert d.others == ()  # shop/web has no cause
    assert web.primary is None
    assert web.summary.errors == 0
    assert web.summary.requests == 36_000
    assert web.summary.sources[0].path == "istio_requests_total"
    assert api.primary is not None
    assert api.primary.cause is Cause.INFRA
    assert api.summary.sources[0].path == "nginx_ingress_controller_requests"
    body = json.loads(render_json(d))
    assert body["primary_cause"] == "infra"
    assert "rollouts" not in body  # no lifecycle series: no rollouts
