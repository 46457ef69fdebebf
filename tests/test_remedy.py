"""The remedy model: unit tests of the planner, and the property that applying any fix lint
prints for a shutdown rule and linting again leaves no finding of that rule."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdoctor.checks import Settings
from svcdoctor.model.remedy import (
    DEFAULT_MARGIN_SECONDS,
    DEFAULT_MAX_REQUEST_SECONDS,
    DEFAULT_PROPAGATION_SECONDS,
    HookKind,
    ShutdownFacts,
    WindowSource,
    plan_shutdown,
)
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


def apply_fix(docs: list[dict[str, Any]], kind: str, name: str, fix: str) -> list[dict[str, Any]]:
    patch = yaml.safe_load(fix)
    assert isinstance(patch, dict), fix
    out = [
        merge(d, patch) if (d["kind"], d["metadata"]["name"]) == (kind, name) else d for d in docs
    ]
    for d in out:
        pod = d.get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("containers", []):
            hook = c.get("lifecycle", {}).get("preStop", {})
            assert len(set(hook) & {"exec", "sleep", "httpGet", "tcpSocket"}) <= 1, hook
    return out


def manifest(
    grace: int | None, prestop: dict[str, Any] | None, replicas: int = 2
) -> list[dict[str, Any]]:
    container: dict[str, Any] = {
        "name": "app",
        "image": "example/api:1.0",
        "ports": [{"name": "http", "containerPort": 8080}],
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
