"""Which fixes are applied, and how several combine on one object."""

from __future__ import annotations

from typing import Any

from svcdoctor.fix import apply, combine, decide, effective, parse_fix
from svcdoctor.model import Cause, Finding, Location, ObjectRef, Severity


def finding(
    rule: str, fix: str, kind: str = "Deployment", container: str | None = "web"
) -> Finding:
    return Finding(
        rule=rule,
        name="x",
        cause=Cause.RACE,
        severity=Severity.WARNING,
        message="m",
        location=Location("f.yaml", 5),
        object=ObjectRef(kind, "shop", "web"),
        container=container,
        fix=fix,
    )


BODY: dict[str, Any] = {
    "kind": "Deployment",
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "command": ["sh", "-c", "./a && ./b"],
                        "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 1"]}}},
                    }
                ]
            }
        }
    },
}
PRESTOP = """\
spec:
  template:
    spec:
      containers:
      - name: web
        lifecycle:
          preStop:
            sleep:
              seconds: 5
# a note after the patch is ignored"""


def test_parse_fix_reads_patches_not_prose() -> None:
    assert parse_fix(PRESTOP) is not None
    assert parse_fix("# give readiness a deeper check") is None
    assert parse_fix("# first ship a binary:\n" + PRESTOP) is None  # a condition first
    assert parse_fix("spec: {replicas: 2}\n---\nspec: {a: 1}") is None
    assert parse_fix("just words") is None


def test_safe_rules_only_and_known_containers() -> None:
    assert decide(finding("SVD101", PRESTOP), BODY).patch is not None
    assert decide(finding("SVD203", PRESTOP), BODY).patch is None
    missing = decide(finding("SVD101", PRESTOP.replace("name: web", "name: nope")), BODY)
    assert missing.patch is None
    assert "not found" in missing.reason
    replicas = decide(finding("SVD106", "spec:\n  replicas: 2"), BODY)
    assert replicas.patch is None
    assert "spec.replicas" in replicas.reason
    service = decide(finding("SVD101", PRESTOP, kind="Service"), {"spec": {"ports": []}})
    assert service.patch is None
    assert "no spec.template.spec" in service.reason


def test_exec_fix_only_when_it_only_adds_exec() -> None:
    good = '# make the shell replace itself with the app:\ncommand: ["sh", "-c", "./a && exec ./b"]'
    step = decide(finding("SVD105", good), BODY)
    assert step.patch == {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "web", "command": ["sh", "-c", "./a && exec ./b"]}]
                }
            }
        }
    }
    tini = '# a pipeline:\ncommand: ["tini", "-g", "--", "sh", "-c", "./a && ./b"]'
    assert decide(finding("SVD105", tini), BODY).patch is None


def test_combine_keeps_the_longest_sleep_and_grace() -> None:
    a = {"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 30, "containers": [
        {"name": "web", "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 14"]}}}}
    ]}}}}  # fmt: skip
    b = {"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 25, "containers": [
        {"name": "web", "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}
    ]}}}}  # fmt: skip
    out = combine([a, b])["spec"]["template"]["spec"]
    assert out["terminationGracePeriodSeconds"] == 30
    assert out["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 14}}


def test_effective_deletes_replaced_handlers_and_drops_no_ops() -> None:
    patch = parse_fix(PRESTOP)
    assert patch is not None
    change = effective(patch, BODY)
    hook = change["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]
    assert hook == {"sleep": {"seconds": 5}, "exec": None}
    fixed = apply(BODY, change)
    assert effective(patch, fixed) == {}
    assert fixed["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"] == {
        "sleep": {"seconds": 5}
    }
