"""Noise on the real-world corpus stays down (issue 14): ``benchmarks/lint_precision.py``'s
figures held to bounds. The indicators are computed by the benchmark from the inventory,
independently of the rules' own helpers; the per-rule counts are pinned to ±15 %."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ROOT

BENCHMARK = ROOT / "benchmarks" / "lint_precision.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_precision", BENCHMARK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


lp = _load()

# Findings per rule on the corpus as of 2026-12-04 (working tree during the issue 14 work;
# 4177 files, 8024 objects, 1445 findings). Rules with at least 50 findings are held to
# ±15 %; smaller counts move by whole findings and would make the bound meaningless. When a
# fix moves one out of the band on purpose, update it here and say why in the commit.
TODAY = {
    # 2026-12-06: not on the only pod of a workload whose rollout removes it first (one
    # replica, Recreate or maxUnavailable 1, one-replica StatefulSets) where that is
    # deliberate (a data store, local state: 17), an info where SVD106 fires (13): judge38
    # and judge41 judged the warning wrong, no endpoint takes over: 412 → 395
    # 2026-12-06 (judge68-73): nor on the only pod of a data store or of a server keeping
    # local state, whatever its strategy: a surge pod cannot hold its volume or starts
    # empty, no replacement holding the data takes over (redis-cart, Argo CD's Dex and
    # Redis, istio's addons, the guestbook's Redis master: 39): 395 -> 347
    "SVD101": 347,
    "SVD204": 331,  # data stores left out (a second replica of a database is a second one)
    # 2026-12-07 (judge86/88): not on the only pod of a data store or of a server keeping
    # local data, its Services' only backend: no other pod to route to (the guestbook's and
    # Argo CD's Redis, Dex, bookinfo's databases): 277 -> 212
    "SVD201": 212,
    # not where Local would drop traffic (one replica, pods not spread), nor where no
    # workload backs the Service (issue 30: test fixtures, operators' pods): 0 in the corpus
    "SVD401": 0,
    # 2026-12-06: not where the one replica keeps local state (Argo CD's Dex, Jaeger, Loki,
    # emojivoto's voting: SVD204's note, never scaled): 72 → 57
    # 2026-12-08 (judge71/98): nor a ClusterIP port no address dials in a folder that dials
    # other Services' ports (kube-thanos' StoreAPI, Istio's samples reached by proxies): 57 -> 44
    "SVD301": 44,
    # 2026-12-06: only where the shared check may reach past the process (a readiness
    # endpoint, an aggregate health, an app's endpoint): judge69/70 judged 5 of 7 on static
    # handlers wrong; the corpus' pairs are gRPC overall status (microservices-demo: 27),
    # /healthz, /, /status and tcpSocket; kourier's /ready stays: 70 → 1; 2026-12-07: Envoy's
    # admin /ready reports its own state (kserve's kourier, judge193): 1 → 0
    "SVD202": 0,
    # issue 30: not for Services that carry no requests (metrics-only), nor Recreate where
    # the pods keep local state (Jaeger); DaemonSets behind Local added; nor a
    # one-replica StatefulSet keeping data in its claim templates (kube-thanos' store,
    # receive and rule, istio's Loki: 9), which SVD204 notes as local state instead.
    # 2026-12-06: a Prometheus scraping onto an emptyDir keeps nothing a surge pod would
    # split (as SVD204 says): its Recreate is flagged (istio's and otel-demo's addons: 3)
    # 2026-12-07 (judge376): but the OpenTelemetry demo's receives OTLP pushes into its
    # TSDB, which a second pod would not hold: local state, Recreate deliberate: 16 -> 15
    "SVD106": 15,
    # 2026-12-07 (judge332): not on a Service alone in a Go testdata folder, a unit test's
    # input (Istio's analyzer testdata, gitops-engine's health testdata: 20): 48 -> 28
    "SVD207": 28,
}
# 2026-12-06: 1355 → 1114 (SVD202 -69, SVD101 -39 and the issue-30 fixes since the count)
# 2026-12-07: 1114 -> 1074 (SVD201 -40: the lone data-holding pods)
TODAY_TOTAL = 1074
TOLERANCE = 0.15


@pytest.fixture(scope="module")
def summary(corpus: Path) -> Any:
    # with the findings on unit tests' inputs (testdata/), which lint does not show by
    # default: the rules' behaviour there is pinned too, and so are the shapes only there
    return lp.measure(corpus, test_inputs=True)


def test_unit_test_inputs_are_not_shown(corpus: Path, summary: Any) -> None:
    # 2026-12-07 (judge389): 329 of the corpus' findings (all notes) are on unit tests'
    # inputs (linkerd's inject goldens, argo-cd's and flux's testdata): not shown
    shown = lp.measure(corpus, test_inputs=False)
    assert abs(summary.findings - shown.findings - 329) <= TOLERANCE * 329


def test_report_renders(summary: Any) -> None:
    text = lp.render_text(summary)
    body = json.loads(lp.render_json(summary))
    assert "noise indicators" in text
    assert set(body["indicators"]) == {s.name for s in lp.INDICATORS}
    assert body["findings"] == sum(r["total"] for r in body["by_rule"].values())


def test_no_serving_check_on_pods_that_serve_nothing(summary: Any) -> None:
    # bound 0: the issue says such pods get no serving check at all. The corpus has 4 idle
    # workloads behind a Service (istio's sleep/curl samples) and 1 idle sidecar (linkerd's
    # nginx-and-curl), so a regression does show here.
    for name in ("idle_workload", "idle_container"):
        ind = summary.indicators[name]
        assert ind.exposure > 0, f"{name}: the corpus no longer has the shape to test"
        assert ind.count == 0, f"{name}: {ind.count} findings, e.g. {ind.examples}"


def test_no_service_selects_nothing_on_job_or_operator_labels(summary: Any) -> None:
    # bound 0: pods with these labels are made by a Job or an operator, never by files.
    # The corpus has no such Service today (exposure 0), so this holds vacuously; the
    # detector itself is pinned by test_job_and_operator_selector_detector below.
    ind = summary.indicators["job_or_operator_selector"]
    assert ind.count == 0, ind.examples


def test_headless_services(summary: Any) -> None:
    ind = summary.indicators["headless_only"]
    # SVD204: bound 0, the rule exempts headless Services (clients use the pod set).
    assert ind.by_rule.get("SVD204", 0) == 0, ind.examples
    # SVD101/SVD201 behind headless Services only: 44 today (SVD101 35, SVD201 9), mostly
    # redis-ha / StatefulSet peers. Legitimately non-zero: the issue exempts headless
    # Services from SVD204 only, and a pod behind a headless Service still stays in DNS
    # answers until its endpoint goes (the shutdown race) and is still listed before it is
    # ready. Bound: today's 44 plus 15 %, so new noise of this shape shows.
    assert ind.count <= 50, (ind.by_rule, ind.examples)


def test_numeric_target_ports_are_not_errors(summary: Any) -> None:
    ind = summary.indicators["numeric_target_port"]
    # 685 numeric targetPorts on Services that select a workload; SVD205 reports none today.
    # The issue allows them at info (and as a warning on strong evidence, e.g. only a
    # differing hostPort declared; if that starts firing on the corpus, look at each).
    assert ind.exposure > 100
    assert ind.by_severity.get("error", 0) == 0, ind.examples
    # One finding, on strong evidence: linkerd2's test/integration/deep/endpoints/testdata/
    # nginx.yaml targets 8080 on a stock nginx:alpine (no command, ports or config mounted),
    # which listens on 80 only (looked at: a real mismatch); a note, in a test's testdata
    assert ind.by_severity.get("warning", 0) == 0, ind.examples
    assert ind.by_severity.get("info", 0) == 1, ind.examples
    assert all("linkerd2/test/integration/deep" in e for e in ind.examples), ind.examples


def test_counts_per_rule_stay_near_today(summary: Any) -> None:
    now = {rule: summary.by_rule.get(rule, {"total": 0})["total"] for rule in TODAY}
    out = {
        rule: (now[rule], was)
        for rule, was in TODAY.items()
        if abs(now[rule] - was) > TOLERANCE * was
    }
    assert not out, f"(now, 2026-12-04) outside ±15 %: {out}"
    assert abs(summary.findings - TODAY_TOTAL) <= TOLERANCE * TODAY_TOTAL


@pytest.mark.parametrize(
    ("argv", "idle"),
    [
        (["sleep", "infinity"], True),
        (["/bin/sleep", "3650d"], True),
        (["tail", "-f", "/dev/null"], True),
        (["sh", "-c", "while true; do sleep 30; done"], True),
        (["/bin/sh", "-c", "trap : TERM INT; sleep infinity & wait"], True),
        (["tini", "--", "sleep", "infinity"], True),
        (["sh", "-c", "sleep 10 && exec nginx"], False),
        (["nginx", "-g", "daemon off;"], False),
        (["sh", "/entrypoint.sh"], False),
        (["sleep"], False),
        ([], False),  # the image's entrypoint: unknown
    ],
)
def test_idle_detector(argv: list[str], idle: bool) -> None:
    assert lp.idle_argv(argv) is idle


@pytest.mark.parametrize(
    ("selector", "flagged"),
    [
        ({"job-name": "migrate"}, True),
        ({"batch.kubernetes.io/job-name": "migrate"}, True),
        ({"controller-uid": "abc"}, True),
        ({"cnpg.io/cluster": "pg", "role": "primary"}, True),
        ({"application": "spilo", "spilo-role": "master"}, True),
        ({"common.k8s.elastic.co/type": "elasticsearch"}, True),
        ({"strimzi.io/cluster": "kafka"}, True),
        ({"postgres-operator.crunchydata.com/cluster": "hippo"}, True),
        ({"app": "web"}, False),
    ],
)
def test_job_and_operator_selector_detector(selector: dict[str, str], flagged: bool) -> None:
    assert lp.job_or_operator_labels(selector) is flagged
