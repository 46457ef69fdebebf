"""The mesh rules (``checks/mesh.py``): the printed fix of SVD113 leaves no race finding
(property), unreadable settings are findings and never crashes, the Istio annotation is
merged, and SVD115 reads the live datapath."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from svcdoctor.checks import Settings, run_checks
from svcdoctor.cli import cli
from svcdoctor.fix import apply, make_plan
from svcdoctor.manifests import build_inventory, load
from svcdoctor.model.live import LiveFacts
from svcdoctor.model.remedy import merged_proxy_config
from tests.conftest import lint_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
RACE = frozenset({"SVD101", "SVD102", "SVD103", "SVD113"})
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "api", "namespace": "shop"},
    "spec": {"selector": {"app": "api"}, "ports": [{"name": "http", "port": 80}]},
}


@st.composite
def meshed(draw: st.DrawFn) -> str:
    """A Service-backed Deployment injected by Istio or Linkerd, on the pod or by its
    Namespace, with random drain, wait, exit-on-zero, preStop and grace settings."""
    mesh = draw(
        st.sampled_from(["istio-pod", "istio-ns", "istio-rev", "linkerd-pod", "linkerd-ns"])
    )
    labels: dict[str, str] = {"app": "api"}
    annotations: dict[str, str] = {}
    namespace: dict[str, object] = {"name": "shop"}
    if mesh == "istio-pod":
        labels["sidecar.istio.io/inject"] = "true"
    elif mesh == "istio-ns":
        namespace["labels"] = {"istio-injection": "enabled"}
    elif mesh == "istio-rev":
        namespace["labels"] = {"istio.io/rev": "canary"}
    elif mesh == "linkerd-pod":
        annotations["linkerd.io/inject"] = "enabled"
    else:
        namespace["annotations"] = {"linkerd.io/inject": "enabled"}
    seconds = st.integers(min_value=0, max_value=90)
    if mesh.startswith("istio"):
        config: dict[str, object] = {}
        if draw(st.booleans()):
            config["holdApplicationUntilProxyStarts"] = True
        if draw(st.booleans()):
            config["terminationDrainDuration"] = f"{draw(seconds)}s"
        if draw(st.booleans()):
            meta = {"EXIT_ON_ZERO_ACTIVE_CONNECTIONS": "true"}
            if draw(st.booleans()):
                meta["MINIMUM_DRAIN_DURATION"] = f"{draw(seconds)}s"
            config["proxyMetadata"] = meta
        if config:
            annotations["proxy.istio.io/config"] = yaml.safe_dump(config, sort_keys=False)
    elif draw(st.booleans()):
        annotations["config.alpha.linkerd.io/proxy-wait-before-exit-seconds"] = str(draw(seconds))
    container: dict[str, object] = {
        "name": "app",
        "image": "example/api:1",
        "ports": [{"name": "http", "containerPort": 8080}],
    }
    prestop = draw(st.none() | st.integers(min_value=1, max_value=40))
    if prestop is not None:
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": prestop}}}
    pod: dict[str, object] = {"containers": [container]}
    grace = draw(st.none() | st.integers(min_value=1, max_value=120))
    if grace is not None:
        pod["terminationGracePeriodSeconds"] = grace
    metadata: dict[str, object] = {"labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": metadata, "spec": pod},
        },
    }
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": namespace}, deployment, SERVICE]
    return yaml.safe_dump_all(docs, sort_keys=False)


def _race(text: str) -> list[str]:
    found = lint_text(text, Settings(enabled=RACE)).findings
    return [f"{f.rule}: {f.message}" for f in found if f.rule in RACE]


def _fixed(text: str) -> str:
    """The objects with the safe fixes ``fix`` plans applied to them (as data: the YAML
    writer's splicing is tested in tests/fix), as YAML again."""
    loaded = load(["-"], stdin=io.BytesIO(text.encode()))
    result = run_checks(build_inventory(loaded), Settings())
    plan = make_plan(result, loaded)
    manual = [s.finding.rule for s in plan.manual if s.finding.rule in RACE]
    assert not manual, f"race fixes left as manual steps: {manual}"
    docs = list(yaml.safe_load_all(text))
    for fix in plan.fixes:
        at = next(
            i
            for i, d in enumerate(docs)
            if d["kind"] == fix.ref.kind and d["metadata"]["name"] == fix.ref.name
        )
        docs[at] = apply(docs[at], fix.patch)
    return yaml.safe_dump_all(docs, sort_keys=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(meshed())
def test_the_printed_fix_leaves_no_race_finding(text: str) -> None:
    event(f"SVD113 before the fix: {any(r.startswith('SVD113') for r in _race(text))}")
    fixed = _fixed(text)
    assert not _race(fixed), f"before:\n{text}\nafter:\n{fixed}"


def test_fix_writes_the_annotation_into_the_file() -> None:
    text = (FIXTURES / "SVD113.yaml").read_text()
    done = CliRunner().invoke(cli, ["fix", "--write", "--rule", "SVD113", "-"], input=text)
    assert done.exit_code == 1, done.output
    assert not [r for r in _race(done.stdout) if r.startswith("SVD113")]
    assert "holdApplicationUntilProxyStarts" in done.stdout  # the other fields are kept


def test_the_fix_keeps_the_other_proxy_config_fields() -> None:
    text = (
        "holdApplicationUntilProxyStarts: true\n"
        "terminationDrainDuration: 5s\n"
        "proxyMetadata: {ISTIO_META_DNS_CAPTURE: 'true'}\n"
    )
    merged = yaml.safe_load(merged_proxy_config(text, "terminationDrainDuration", "20s"))
    assert merged == {
        "holdApplicationUntilProxyStarts": True,
        "terminationDrainDuration": "20s",
        "proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true"},
    }
    exit_on_zero = "proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true'\n"
    merged = yaml.safe_load(merged_proxy_config(exit_on_zero, "MINIMUM_DRAIN_DURATION", "10s"))
    assert merged == {
        "proxyMetadata": {
            "EXIT_ON_ZERO_ACTIVE_CONNECTIONS": "true",
            "MINIMUM_DRAIN_DURATION": "10s",
        }
    }
    assert merged_proxy_config(None, "terminationDrainDuration", "20s") == (
        "terminationDrainDuration: 20s"
    )


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=60), st.sampled_from(["istio", "linkerd"]))
def test_any_annotation_value_is_a_finding_or_nothing_never_a_crash(value: str, mesh: str) -> None:
    key = (
        "proxy.istio.io/config"
        if mesh == "istio"
        else "config.alpha.linkerd.io/proxy-wait-before-exit-seconds"
    )
    inject = (
        {"sidecar.istio.io/inject": "true"} if mesh == "istio" else {"linkerd.io/inject": "enabled"}
    )
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "selector": {"matchLabels": {"app": "api"}},
            "template": {
                "metadata": {"labels": {"app": "api"}, "annotations": {**inject, key: value}},
                "spec": {"containers": [{"name": "app", "image": "example/api:1"}]},
            },
        },
    }
    text = yaml.safe_dump_all([deployment, SERVICE])
    found = lint_text(text, Settings(enabled=frozenset({"SVD113", "SVD114"}))).findings
    unreadable = [f for f in found if f.rule == "SVD114"]
    for f in unreadable:
        assert "Deployment shop/api" in f.message
        assert key in f.message
    if unreadable:
        assert not [f for f in found if f.rule == "SVD113"]  # not guessed


def test_cilium_note_only_on_a_live_cilium_datapath() -> None:
    text = yaml.safe_dump_all(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "api", "namespace": "shop"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "api"}},
                    "template": {
                        "metadata": {"labels": {"app": "api"}},
                        "spec": {"containers": [{"name": "app", "image": "example/api:1"}]},
                    },
                },
            },
            SERVICE,
        ]
    )
    inventory = build_inventory(load(["-"], stdin=io.BytesIO(text.encode())))
    only = Settings(enabled=frozenset({"SVD115"}))
    assert not run_checks(inventory, only).findings  # lint: no live facts
    kube_proxy = replace(inventory, live=LiveFacts(now=0.0))
    assert not run_checks(kube_proxy, only).findings
    cilium = replace(inventory, live=LiveFacts(now=0.0, datapath="cilium"))
    (finding,) = run_checks(cilium, only).findings
    assert "no new connections" in finding.message
    assert "leave no ready pod" in finding.message  # one replica
    assert finding.fix is not None
    assert "ready replica" in finding.fix.note


def test_alternative_namespace_files_that_differ_tell_no_injection(tmp_path: Path) -> None:
    """EdwinVW/pitstop (judge266): src/k8s holds a plain, an Istio and a Linkerd definition
    of Namespace pitstop, one applied per variant; the first read no longer injects every
    variant's pods. One definition of it does."""
    app = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: pitstop}\n"
        "spec:\n  replicas: 2\n  template:\n    metadata: {labels: {app: api}}\n    spec:\n"
        "      containers:\n      - name: api\n        image: pitstop/api:1.0\n"
        "        ports: [{containerPort: 5000}]\n"
        "        readinessProbe: {httpGet: {path: /hc, port: 5000}}\n"
        "        lifecycle: {preStop: {sleep: {seconds: 10}}}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: pitstop}\n"
        "spec: {selector: {app: api}, ports: [{name: http, port: 5000}]}\n"
    )
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: pitstop\n"
    (tmp_path / "api.yaml").write_text(app)
    (tmp_path / "ns-istio.yaml").write_text(namespace + "  labels: {istio-injection: enabled}\n")

    def svd113() -> list[str]:
        findings = run_checks(build_inventory(load([str(tmp_path)])), Settings()).findings
        return [f.rule for f in findings if f.rule == "SVD113"]

    assert svd113() == ["SVD113"]
    (tmp_path / "ns-plain.yaml").write_text(namespace)
    assert svd113() == []
