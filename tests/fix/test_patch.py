"""Which fixes are applied, and how several combine on one object."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from svcdoctor.checks import RULES
from svcdoctor.fix import apply, combine, decide, effective
from svcdoctor.model import Cause, Finding, Location, ObjectRef, Severity
from svcdoctor.model.patch import (
    Fix,
    FixAvailability,
    Handler,
    ObjectPatch,
    PodPatch,
    PreStopHook,
    strategic_merge_patch,
)


def finding(
    rule: str, fix: Fix, kind: str = "Deployment", container: str | None = "web"
) -> Finding:
    """A finding of ``rule`` with ``fix``, safe as the rule declares it."""
    safe = RULES[rule].fix is FixAvailability.SAFE
    return Finding(
        rule=rule,
        name="x",
        cause=Cause.RACE,
        severity=Severity.WARNING,
        message="m",
        location=Location("f.yaml", 5),
        object=ObjectRef(kind, "shop", "web"),
        container=container,
        fix=replace(fix, safe=safe),
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
SLEEP_5 = PodPatch("Deployment", "web", prestop=PreStopHook(Handler.SLEEP, 5))
PRESTOP = Fix(SLEEP_5, note="\n# a note after the patch is ignored")


def test_only_a_patch_alone_is_applicable() -> None:
    assert PRESTOP.applicable
    assert not Fix(note="# give readiness a deeper check").applicable
    assert not replace(PRESTOP, lead="# first ship a binary:\n").applicable  # a condition first
    two = Fix(ObjectPatch({"spec": {"a": 1}}), prior=ObjectPatch({"spec": {"replicas": 2}}))
    assert not two.applicable
    assert not Fix(note="just words").applicable


def test_safe_rules_only_and_known_containers() -> None:
    assert decide(finding("SVD101", PRESTOP), BODY).patch is not None
    assert decide(finding("SVD203", PRESTOP), BODY).patch is None
    nope = Fix(replace(SLEEP_5, container="nope"))
    missing = decide(finding("SVD101", nope), BODY)
    assert missing.patch is None
    assert "not found" in missing.reason
    replicas = decide(finding("SVD106", Fix(ObjectPatch({"spec": {"replicas": 2}}))), BODY)
    assert replicas.patch is None
    assert "spec.replicas" in replicas.reason
    service = decide(finding("SVD101", PRESTOP, kind="Service"), {"spec": {"ports": []}})
    assert service.patch is None
    assert "no spec.template.spec" in service.reason


def test_exec_fix_only_when_it_only_adds_exec() -> None:
    lead = "# make the shell replace itself with the app:\n"
    good = Fix(PodPatch("Deployment", "web", command=("sh", "-c", "./a && exec ./b")), lead)
    step = decide(finding("SVD105", good), BODY)
    assert step.patch is not None
    assert step.patch.data() == {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "web", "command": ["sh", "-c", "./a && exec ./b"]}]
                }
            }
        }
    }
    tini = PodPatch("Deployment", "web", command=("tini", "-g", "--", "sh", "-c", "./a && ./b"))
    assert decide(finding("SVD105", Fix(tini, "# a pipeline:\n")), BODY).patch is None


def test_combine_keeps_the_longest_sleep_and_grace() -> None:
    a = PodPatch("Deployment", "web", 30, prestop=PreStopHook(Handler.SHELL, 14))
    b = PodPatch("Deployment", "web", 25, prestop=PreStopHook(Handler.SLEEP, 10))
    out = combine([a, b])["spec"]["template"]["spec"]
    assert out["terminationGracePeriodSeconds"] == 30
    assert out["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 14}}


def test_effective_deletes_replaced_handlers_and_drops_no_ops() -> None:
    patch = SLEEP_5.data()
    change = effective(patch, BODY)
    hook = change["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]
    assert hook == {"sleep": {"seconds": 5}, "exec": None}
    fixed = apply(BODY, change)
    assert effective(patch, fixed) == {}
    assert fixed["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"] == {
        "sleep": {"seconds": 5}
    }


def test_the_merge_keeps_a_swapped_handler_in_its_place() -> None:
    """The one strategic merge (fix and the lab's API server): a handler swapped for
    another takes its place, lists merge on their keys, ``null`` deletes, the target is
    left as it was."""
    probe = {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5}
    target = {"containers": [{"name": "web", "livenessProbe": probe}, {"name": "side"}]}
    patch = {"containers": [{"name": "web", "livenessProbe": {"tcpSocket": {"port": 80},
                                                              "httpGet": None}}]}  # fmt: skip
    out = strategic_merge_patch(target, patch)
    assert list(out["containers"][0]["livenessProbe"].items()) == [
        ("tcpSocket", {"port": 80}),
        ("periodSeconds", 5),
    ]
    assert out["containers"][1] == {"name": "side"}
    assert target["containers"][0]["livenessProbe"] is probe
    assert "httpGet" in probe
