"""The numbers and variants inside fixes: computed grace periods, sleeps, version-aware hooks."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from svcdoctor.checks import Settings
from svcdoctor.checks.shells import _exec_last
from svcdoctor.manifests.objects import sleep_in
from svcdoctor.model import Severity
from svcdoctor.report.fixes import fix_text
from tests.conftest import lint_text

SERVICE = """apiVersion: v1
kind: Service
metadata: {name: api}
spec: {selector: {app: api}, ports: [{port: 80}]}
---
"""


def deployment(container: str, pod: str = "") -> str:
    return (
        SERVICE
        + f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: api}}
spec:
  replicas: 2
  template:
    metadata: {{labels: {{app: api}}}}
    spec:
      {pod or "dnsPolicy: ClusterFirst"}
      containers:
        - name: app
          image: {container}
"""
    )


def fix_of(text: str, rule: str, settings: Settings | None = None) -> dict[str, Any]:
    settings = settings or Settings()
    found = [f for f in lint_text(text, settings).findings if f.rule == rule]
    assert len(found) == 1, found
    assert found[0].fix
    body = yaml.safe_load(
        "\n".join(
            ln for ln in (fix_text(found[0].fix) or "").splitlines() if not ln.startswith("#")
        )
    )
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize(
    ("command", "seconds"),
    [
        (["sleep", "5"], 5.0),
        (["/bin/sleep", "10s"], 10.0),
        (["sh", "-c", "sleep 15 && nginx -s quit"], 15.0),
        (["/bin/bash", "-c", "echo bye; sleep 2m"], 120.0),
        (["sh", "-c", "nginx -s quit"], None),
        # it signals PID 1 first: the loop waits for the app's exit, no delay before it
        (["sh", "-ce", "kill -s TERM 1; while $(kill -0 1 2>/dev/null); do sleep 1; done"], None),
        (["sh", "-c", "sleep 5; kill -TERM 1"], 5.0),
        (["sh", "-c", "while kill -0 1; do sleep 1; done"], 1.0),
        (["sh", "-c", "kill -HUP 1; sleep 5"], 5.0),  # a reload, not a stop
        (["sh", "-c", "kill -- 1; sleep 5"], None),
        (["sh", "-c", "sleep 0; kill 1; sleep 30"], None),
        (["/wait-shutdown"], None),
        ([], None),
    ],
)
def test_sleep_in_prestop_commands(command: list[str], seconds: float | None) -> None:
    assert sleep_in(command) == seconds


@pytest.mark.parametrize(
    ("script", "fixed"),
    [
        ("./server", "exec ./server"),
        ("./migrate && ./server --port 8080", "./migrate && exec ./server --port 8080"),
        ("a; b", "a; exec b"),
        ("set -e\n./server", "set -e\nexec ./server"),
    ],
)
def test_exec_is_put_before_the_last_command(script: str, fixed: str) -> None:
    assert _exec_last(script) == fixed


def test_grace_fix_is_prestop_plus_longest_request_plus_margin() -> None:
    text = deployment(
        "example/app:1\n          lifecycle: {preStop: {sleep: {seconds: 10}}}",
        "terminationGracePeriodSeconds: 30",
    )
    body = fix_of(text, "SVD102", Settings(max_request_seconds=30))
    assert body == {"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 45}}}}


def test_prestop_fix_uses_exec_sleep_before_kubernetes_1_30() -> None:
    text = deployment("example/app:1")
    old = fix_of(text, "SVD101", Settings(kube_version=(1, 29)))
    new = fix_of(text, "SVD101", Settings(kube_version=(1, 31)))

    def hook(body: dict[str, Any]) -> Any:
        return body["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]

    assert hook(old) == {"exec": {"command": ["sh", "-c", "sleep 5"]}}
    assert hook(new) == {"sleep": {"seconds": 5}}


def test_prestop_fix_raises_a_short_grace_period() -> None:
    text = deployment("example/app:1", "terminationGracePeriodSeconds: 5")
    body = fix_of(text, "SVD101", Settings(propagation_seconds=8))
    spec = body["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == 23
    assert spec["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 8}}


def test_distroless_fix_on_an_old_cluster_ships_a_static_sleep() -> None:
    text = deployment(
        "gcr.io/distroless/static\n"
        "          lifecycle: {preStop: {exec: {command: [sh, -c, sleep 7]}}}"
    )
    found = [
        f for f in lint_text(text, Settings(kube_version=(1, 28))).findings if f.rule == "SVD104"
    ]
    text = fix_text(found[0].fix)
    assert text is not None
    assert "static sleep binary" in text
    assert "/sleep" in text
    assert "- '7'" in text


def test_severity_override_and_disable() -> None:
    text = deployment("example/app:1")
    base = {f.rule: f.severity for f in lint_text(text).findings}
    assert base["SVD101"] is Severity.WARNING
    tuned = lint_text(
        text, Settings(severities={"SVD101": Severity.ERROR}, disabled=frozenset({"SVD201"}))
    )
    rules = {f.rule: f.severity for f in tuned.findings}
    assert rules["SVD101"] is Severity.ERROR
    assert "SVD201" not in rules


@pytest.mark.parametrize(
    ("command", "seconds"),
    [
        (["sh", "-c", "sleep $DRAIN"], 15.0),  # the shell expands it from the env
        (["/bin/sh", "-c", "curl -X POST localhost:9901/drain; sleep ${DRAIN}"], 15.0),
        (["sleep", "$DRAIN"], None),  # no shell: sleep gets the text
        (["sleep", "$(DRAIN)"], None),  # Kubernetes expands $(…) in command/args, not hooks
        (["sh", "-c", "sleep $(DRAIN)"], None),  # a command substitution
        (["sh", "-c", "sleep '$DRAIN'"], None),  # single-quoted: no expansion
        (["sh", "-c", "DRAIN=2; sleep $DRAIN"], 2.0),  # the script's own value
        (["sh", "-c", "sleep $UNSET"], None),
        (["sh", "-c", 'echo "don\'t"; sleep $DRAIN'], 15.0),  # an apostrophe quotes nothing
        (["sh", "-c", "sleep \\$DRAIN"], None),  # escaped
    ],
)
def test_sleep_in_reads_the_variables_the_shell_expands(
    command: list[str], seconds: float | None
) -> None:
    assert sleep_in(command, {"DRAIN": "15"}) == seconds
