"""The remedy model: unit tests of the planner, and the property that applying any fix lint
prints for a shutdown rule and linting again leaves no finding of that rule."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdoctor.checks import Settings
from svcdoctor.model import Probe
from svcdoctor.model.patch import Fix, Patch
from svcdoctor.model.remedy import (
    DEFAULT_MARGIN_SECONDS,
    DEFAULT_MAX_REQUEST_SECONDS,
    DEFAULT_PROPAGATION_SECONDS,
    ConnectionFacts,
    ConnectionStep,
    Exposure,
    HookKind,
    ProbeChange,
    ShutdownFacts,
    Transport,
    WindowSource,
    plan_connections,
    plan_probes,
    plan_shutdown,
)
from svcdoctor.report.fixes import fix_text, patch_text
from tests.conftest import lint_text

SHUTDOWN_RULES = ("SVD101", "SVD102", "SVD103")


def test_lint_defaults_are_defined_once() -> None:
    s = Settings()
    assert (s.propagation_seconds, s.max_request_seconds, s.margin_seconds) == (
        DEFAULT_PROPAGATION_SECONDS,
        DEFAULT_MAX_REQUEST_SECONDS,
        DEFAULT_MARGIN_SECONDS,
    )


def test_assumed_window_is_the_sleep_and_grace_is_never_lowered() -> None:
    plan = plan_shutdown(ShutdownFacts())
    assert (plan.prestop_seconds, plan.hook, plan.grace_seconds) == (5, HookKind.SLEEP, 30)
    assert plan.rules == ("SVD101",)  # 30 s already covers 5 + 10 + 5
    long = plan_shutdown(ShutdownFacts(current_grace_seconds=120))
    assert long.grace_seconds == 120


def test_measured_window_gets_a_margin_and_a_grace_floor() -> None:
    plan = plan_shutdown(ShutdownFacts(window_seconds=4.0, source=WindowSource.DIAGNOSED))
    assert plan.prestop_seconds == 6  # 4 + max(2, 2)
    assert plan.grace_seconds == 30  # not 6 + 0.1 + 5 = 12: the default is never lowered
    wide = plan_shutdown(ShutdownFacts(window_seconds=20.0, source=WindowSource.SIMULATED))
    assert wide.prestop_seconds == 30
    assert wide.grace_seconds == 45
    assert wide.rules == ("SVD101", "SVD102")


def test_lower_grace_only_when_asked() -> None:
    plan = plan_shutdown(ShutdownFacts(window_seconds=1.0, allow_lower_grace=True))
    assert plan.grace_seconds == 16


def test_hook_kind_follows_the_version_and_the_shell() -> None:
    assert plan_shutdown(ShutdownFacts(kube_version=(1, 30))).hook is HookKind.SLEEP
    old = plan_shutdown(ShutdownFacts(kube_version=(1, 29)))
    assert old.hook is HookKind.EXEC
    assert old.hook_body == {"exec": {"command": ["sh", "-c", "sleep 5"]}}
    bare = plan_shutdown(ShutdownFacts(kube_version=(1, 28), has_shell=False))
    assert bare.hook is HookKind.IMPOSSIBLE
    assert bare.hook_body is None
    assert "SVD104" in bare.rules
    unknown = plan_shutdown(ShutdownFacts(has_shell=False))
    assert unknown.hook is HookKind.SLEEP
    assert not unknown.version_known


def test_existing_sleep_and_own_drain() -> None:
    kept = plan_shutdown(ShutdownFacts(current_prestop_seconds=8, current_grace_seconds=40))
    assert (kept.prestop_seconds, kept.grace_seconds, kept.rules) == (8, 40, ())
    raised = plan_shutdown(ShutdownFacts(current_prestop_seconds=2))
    assert raised.prestop_seconds == 5
    assert raised.rules == ("SVD103",)
    drains = plan_shutdown(ShutdownFacts(drain_seconds=10))
    assert drains.hook is HookKind.NONE
    assert drains.prestop_seconds == 0


def test_a_told_drain_shortens_the_sleep_and_lengthens_the_grace() -> None:
    short = plan_shutdown(ShutdownFacts(drain_seconds=2))
    assert (short.prestop_seconds, short.rules) == (3, ("SVD101",))
    long = plan_shutdown(ShutdownFacts(drain_seconds=25))
    assert long.prestop_seconds == 0
    assert long.needed_grace_seconds == 40  # 25 s of drain + 10 s requests + 5 s margin
    assert (long.grace_seconds, long.rules) == (40, ("SVD102",))
    assert long.grace_cuts_requests  # 30 <= 25 + 10
    untold = plan_shutdown(ShutdownFacts(drain_seconds=None))
    assert (untold.prestop_seconds, untold.grace_seconds, untold.rules) == (0, 30, ())


def test_a_sleep_already_longer_than_the_window_is_not_raised() -> None:
    """A fractional sleep above the window: whole-second rounding is no reason for SVD103."""
    plan = plan_shutdown(ShutdownFacts(window_seconds=4.6, current_prestop_seconds=4.7))
    assert "SVD103" not in plan.rules
    raised = plan_shutdown(ShutdownFacts(window_seconds=4.8, current_prestop_seconds=4.7))
    assert raised.rules == ("SVD103",)
    assert raised.prestop_seconds == 5


def http(path: str, port: int | str = 8080, line: int = 1) -> Probe:
    return Probe("httpGet", ("httpGet", "HTTP", "", str(port), path), line, port=port)


def test_same_probes_split_liveness_to_the_listener() -> None:
    assert plan_probes(http("/healthz"), http("/healthz", line=9)).change is ProbeChange.NONE
    split = plan_probes(http("/readyz"), http("/readyz", line=9))
    assert split.change is ProbeChange.LIVENESS_TCP
    assert split.liveness == {"tcpSocket": {"port": 8080}, "httpGet": None}
    assert plan_probes(http("/readyz"), http("/livez")).change is ProbeChange.NONE
    assert plan_probes(None, http("/livez")).change is ProbeChange.NONE
    tcp = Probe("tcpSocket", ("tcpSocket", "80"), 1, port=80)
    assert plan_probes(tcp, tcp).change is ProbeChange.NONE  # a connect twice restarts nothing
    curl = ("curl", "-f", "http://localhost:8080/readyz")
    fetch = Probe("exec", ("exec", *curl), 1, command=curl)
    assert plan_probes(fetch, fetch).change is ProbeChange.MANUAL  # no port for liveness
    plan = plan_shutdown(ShutdownFacts(readiness=http("/api"), liveness=http("/api")))
    assert plan.rules == ("SVD101", "SVD202")
    assert plan.probes.change is ProbeChange.LIVENESS_TCP


def test_connection_plan_for_http2() -> None:
    inside = plan_connections(ConnectionFacts())
    assert inside.steps == (
        ConnectionStep.HEADLESS,
        ConnectionStep.MAX_AGE,
        ConnectionStep.L7_BALANCER,
        ConnectionStep.CLOSE_ON_SIGTERM,
    )
    assert (inside.max_age_seconds, inside.max_age_grace_seconds, inside.rules) == (
        30,
        10,
        ("SVD301",),
    )
    outside = plan_connections(
        ConnectionFacts(exposure=Exposure.EXTERNAL, longest_request_seconds=42.5)
    )
    assert ConnectionStep.HEADLESS not in outside.steps
    assert ConnectionStep.CLIENT_RECONNECT in outside.steps
    assert outside.max_age_grace_seconds == 43  # streams in flight finish
    fixed = plan_connections(ConnectionFacts(can_bound_age=False))
    assert ConnectionStep.MAX_AGE not in fixed.steps
    assert fixed.max_age_seconds is None
    bounded = plan_connections(ConnectionFacts(bounds_age=True))
    assert bounded.rules == ()
    assert bounded.steps == (ConnectionStep.CLOSE_ON_SIGTERM,)


def test_connection_plan_for_idle_timeouts() -> None:
    """ingress-nginx keeps upstream connections 60 s, Node.js closes them after 5 s: the
    server's must reach 65 s, or the proxy's drop to 4 s."""
    plan = plan_connections(
        ConnectionFacts(transport=Transport.HTTP1, caller_idle_seconds=60, server_idle_seconds=5)
    )
    assert plan.steps[:2] == (
        ConnectionStep.SERVER_IDLE_LONGER,
        ConnectionStep.CLIENT_IDLE_SHORTER,
    )
    assert (plan.server_idle_seconds, plan.caller_idle_seconds) == (65, 4)
    assert plan.rules == ()
    fine = plan_connections(
        ConnectionFacts(transport=Transport.HTTP1, caller_idle_seconds=60, server_idle_seconds=75)
    )
    assert fine.steps == (ConnectionStep.CLOSE_ON_SIGTERM,)
    unknown = plan_connections(ConnectionFacts(transport=Transport.HTTP1, caller_idle_seconds=60))
    assert unknown.server_idle_seconds is None


# --- applying fixes ---------------------------------------------------------------------


def merge(base: Any, patch: Any) -> Any:
    """A strategic merge of ``patch`` into ``base``: mappings merged, lists of mappings with
    ``name`` merged by name, other values replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)  # null deletes the field
            else:
                out[key] = merge(base[key], value) if key in base else value
        return out
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(x, dict) and "name" in x for x in [*base, *patch])
    ):
        merged = [dict(x) for x in base]
        names = [x["name"] for x in merged]
        for item in patch:
            if item["name"] in names:
                i = names.index(item["name"])
                merged[i] = merge(merged[i], item)
            else:
                merged.append(item)
        return merged
    return patch


def apply_fix(
    docs: list[dict[str, Any]], kind: str, name: str, fix: Fix | Patch | str
) -> list[dict[str, Any]]:
    """``docs`` with the typed patch of ``fix`` applied (a YAML text: parsed), after checking
    that the printed fix is that patch."""
    if isinstance(fix, str):
        patch = yaml.safe_load(fix)
    else:
        typed = fix.patch if isinstance(fix, Fix) else fix
        assert typed is not None, fix
        patch = typed.data()
        printed = fix_text(fix) if isinstance(fix, Fix) else patch_text(fix)
        assert yaml.safe_load(printed or "") == patch  # the printed fix is the typed patch
    assert isinstance(patch, dict), fix
    out = [
        merge(d, patch) if (d["kind"], d["metadata"]["name"]) == (kind, name) else d for d in docs
    ]
    handlers = {"exec", "sleep", "httpGet", "tcpSocket", "grpc"}
    for d in out:
        pod = d.get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("containers", []):
            hook = c.get("lifecycle", {}).get("preStop", {})
            assert len(set(hook) & handlers) <= 1, hook
            for probe in ("readinessProbe", "livenessProbe"):
                assert len(set(c.get(probe, {})) & handlers) <= 1, c[probe]
    return out


def manifest(
    grace: int | None,
    prestop: dict[str, Any] | None,
    replicas: int = 2,
    probes: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    container: dict[str, Any] = {
        "name": "app",
        "image": "example/api:1.0",
        "ports": [{"name": "http", "containerPort": 8080}],
        **(probes or {}),
    }
    if prestop is not None:
        container["lifecycle"] = {"preStop": prestop}
    pod: dict[str, Any] = {"containers": [container]}
    if grace is not None:
        pod["terminationGracePeriodSeconds"] = grace
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "api", "namespace": "default"},
            "spec": {"selector": {"app": "api"}, "ports": [{"port": 80, "targetPort": "http"}]},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "api", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "api"}},
                "template": {"metadata": {"labels": {"app": "api"}}, "spec": pod},
            },
        },
    ]


def dumps(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


prestops = st.one_of(
    st.none(),
    st.builds(lambda n: {"sleep": {"seconds": n}}, st.integers(1, 40)),
    st.builds(lambda n: {"exec": {"command": ["sh", "-c", f"sleep {n}"]}}, st.integers(1, 40)),
    st.just({"httpGet": {"path": "/drain", "port": 8080}}),
    st.just({"exec": {"command": ["nginx", "-s", "quit"]}}),
    st.just({"tcpSocket": {"port": 8080}}),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grace=st.one_of(st.none(), st.integers(1, 120)),
    prestop=prestops,
    propagation=st.floats(0.5, 30),
    longest=st.floats(0, 60),
    margin=st.floats(0, 10),
    version=st.sampled_from([None, (1, 28), (1, 30), (1, 34)]),
)
def test_applying_a_lint_fix_clears_its_rule(
    grace: int | None,
    prestop: dict[str, Any] | None,
    propagation: float,
    longest: float,
    margin: float,
    version: tuple[int, int] | None,
) -> None:
    s = Settings(
        propagation_seconds=propagation,
        max_request_seconds=longest,
        margin_seconds=margin,
        kube_version=version,
    )
    docs = manifest(grace, prestop)
    findings = [f for f in lint_text(dumps(docs), s).findings if f.rule in SHUTDOWN_RULES]
    for f in findings:
        assert f.fix is not None
        assert f.object is not None
        fixed = apply_fix(docs, f.object.kind, f.object.name, f.fix)
        after = {g.rule for g in lint_text(dumps(fixed), s).findings}
        assert f.rule not in after, (f.rule, f.fix)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grace=st.one_of(st.none(), st.integers(1, 120)),
    prestop=prestops,
    propagation=st.floats(0.5, 30),
    longest=st.floats(0, 60),
    drain=st.one_of(st.none(), st.floats(0, 40)),
)
def test_applying_a_fix_clears_its_rule_for_a_draining_app(
    grace: int | None,
    prestop: dict[str, Any] | None,
    propagation: float,
    longest: float,
    drain: float | None,
) -> None:
    """``drains`` with or without its seconds: the planner counts them, and the fixes it
    prints clear their rules."""
    s = Settings(
        propagation_seconds=propagation,
        max_request_seconds=longest,
        drains=("example/api",),
        drain_seconds={} if drain is None else {"example/api": drain},
    )
    docs = manifest(grace, prestop)
    findings = [f for f in lint_text(dumps(docs), s).findings if f.rule in SHUTDOWN_RULES]
    for f in findings:
        assert f.fix is not None
        assert f.object is not None
        fixed = apply_fix(docs, f.object.kind, f.object.name, f.fix)
        after = {g.rule for g in lint_text(dumps(fixed), s).findings}
        assert f.rule not in after, (f.rule, f.fix)


def _probe(handler: str, target: str, port: int | str) -> dict[str, Any]:
    if handler == "httpGet":
        return {"httpGet": {"path": target, "port": port}}
    if handler == "grpc":  # a named service's status may be its dependencies'
        return {"grpc": {"port": 8080, "service": "api"} if target == "/readyz" else {"port": 8080}}
    if handler == "tcpSocket":
        return {"tcpSocket": {"port": port}}
    return {"exec": {"command": ["cat", target]}}


def check_of(probe: dict[str, Any]) -> dict[str, Any]:
    """What a probe checks: timing left out, the named port resolved (8080)."""
    out: dict[str, Any] = {}
    for key, value in probe.items():
        if key in ("periodSeconds", "failureThreshold"):
            continue
        named = isinstance(value, dict) and value.get("port") == "http"
        out[key] = {**value, "port": 8080} if named else value
    return out


probes = st.builds(
    lambda handler, target, port, timing: _probe(handler, target, port) | timing,
    st.sampled_from(["httpGet", "grpc", "tcpSocket", "exec"]),
    st.sampled_from(["/healthz", "/readyz"]),
    st.sampled_from([8080, "http"]),
    st.sampled_from([{}, {"periodSeconds": 5}, {"failureThreshold": 5}]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    readiness=probes,
    liveness=st.one_of(probes, st.none()),
    timing=st.sampled_from([{}, {"failureThreshold": 6}]),
)
def test_applying_the_probe_split_clears_svd202(
    readiness: dict[str, Any], liveness: dict[str, Any] | None, timing: dict[str, Any]
) -> None:
    """The split the planner prints is a patch when there is a port to check (then
    applying it clears SVD202), a manual step otherwise. ``liveness`` ``None``: the same
    check as readiness, with other timing."""
    liveness = liveness or check_of(readiness) | timing
    docs = manifest(30, {"sleep": {"seconds": 5}}, probes={
        "readinessProbe": readiness, "livenessProbe": liveness
    })  # fmt: skip
    (found,) = [f for f in lint_text(dumps(docs)).findings if f.rule == "SVD202"] or [None]
    # a check that may reach past the process: the readiness endpoint, a named gRPC service
    deep = readiness.get("httpGet", {}).get("path") == "/readyz" or "service" in readiness.get(
        "grpc", {}
    )
    assert (found is not None) == (check_of(readiness) == check_of(liveness) and deep)
    if found is None:
        return
    assert found.fix is not None
    if (fix_text(found.fix) or "").startswith("#"):  # exec: the app needs its own endpoint
        assert set(readiness) & {"tcpSocket", "exec"}
        return
    assert found.object is not None
    fixed = apply_fix(docs, found.object.kind, found.object.name, found.fix)
    after = {g.rule for g in lint_text(dumps(fixed)).findings}
    assert "SVD202" not in after, found.fix
    container = fixed[1]["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"] == readiness  # readiness keeps its check


def grpc_service(kind: str, args: list[str]) -> list[dict[str, Any]]:
    docs = manifest(30, {"sleep": {"seconds": 5}})
    docs[0]["spec"]["type"] = kind
    docs[0]["spec"]["ports"] = [{"name": "grpc", "port": 9090, "targetPort": 9090}]
    container = docs[1]["spec"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"name": "grpc", "containerPort": 9090}]
    container["args"] = args
    return docs


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["ClusterIP", "LoadBalancer", "NodePort"]),
    longest=st.floats(0, 120),
)
def test_applying_a_connection_step_clears_svd301(kind: str, longest: float) -> None:
    """Each step of the connection plan SVD301 prints clears it: the headless Service patch
    (in-cluster clients), and the server's maximum connection age it names, with the
    plan's numbers (set here as the server flag a gRPC server would take)."""
    s = Settings(max_request_seconds=longest)
    docs = grpc_service(kind, ["--grpc-port=9090"])
    (found,) = [f for f in lint_text(dumps(docs), s).findings if f.rule == "SVD301"]
    assert found.fix is not None
    plan = plan_connections(
        ConnectionFacts(
            exposure=Exposure.CLUSTER if kind == "ClusterIP" else Exposure.EXTERNAL,
            longest_request_seconds=longest,
        )
    )
    text = fix_text(found.fix) or ""
    assert f"{plan.max_age_seconds}" in text
    assert f"{plan.max_age_grace_seconds}" in text
    if kind == "ClusterIP":
        assert found.object is not None
        headless = apply_fix(docs, found.object.kind, found.object.name, found.fix)
        assert headless[0]["spec"]["clusterIP"] == "None"
        assert "SVD301" not in {g.rule for g in lint_text(dumps(headless), s).findings}
    else:
        assert "clusterIP" not in text  # no headless Service for outside clients
    aged = grpc_service(
        kind, ["--grpc-port=9090", f"--grpc-max-connection-age={plan.max_age_seconds}s"]
    )
    assert "SVD301" not in {g.rule for g in lint_text(dumps(aged), s).findings}
