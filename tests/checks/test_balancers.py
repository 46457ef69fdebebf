"""The load balancer rules (checks/balancers.py): applying the printed fix (``svcdoctor fix
--write``) to generated ALB, NLB and TargetGroupBinding manifests leaves no finding of the
race rules it answers; the fix keeps a value's other attributes and writes nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("ruamel.yaml")

from svcdoctor.checks import Settings
from svcdoctor.checks.balancers import _attributes
from svcdoctor.cli import cli
from svcdoctor.fix.patch import Unsafe, _check
from tests.conftest import lint_paths, lint_text

FIXED = {"SVD101", "SVD102", "SVD103", "SVD110", "SVD112"}
ALB_ATTRS = "alb.ingress.kubernetes.io/target-group-attributes"
NLB_ATTRS = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"


@dataclass(frozen=True)
class Case:
    balancer: str  # alb | nlb | nlb-ip | tgb
    ip: bool
    delay: int | None  # deregistration_delay.timeout_seconds, None: unset
    sticky: bool  # another attribute in the same value
    on_service: bool  # an ALB's attributes on the Service (which overrides the Ingress)
    sleep: int | None
    grace: int | None
    namespace: str  # absent | plain | gated

    def manifest(self) -> str:
        docs = []
        if self.namespace != "absent":
            label = (
                "\n  labels: {elbv2.k8s.aws/pod-readiness-gate-inject: enabled}"
                if self.namespace == "gated"
                else ""
            )
            docs.append(f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop{label}")
        hook = f"\n          lifecycle: {{preStop: {{sleep: {{seconds: {self.sleep}}}}}}}"
        grace = f"\n      terminationGracePeriodSeconds: {self.grace}" if self.grace else ""
        docs.append(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n"
            "spec:\n  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n"
            f"    metadata: {{labels: {{app: web}}}}\n    spec:{grace}\n      containers:\n"
            "        - name: web\n          image: example/web:1\n"
            "          ports: [{containerPort: 8080}]\n"
            "          readinessProbe: {httpGet: {path: /ready, port: 8080}}"
            + (hook if self.sleep else "")
        )
        attrs = ",".join(
            [*(["stickiness.enabled=true"] if self.sticky else [])]
            + (
                [f"deregistration_delay.timeout_seconds={self.delay}"]
                if self.delay is not None
                else []
            )
        )
        service: dict[str, str] = {}
        ingress: dict[str, str] = {}
        kind = "ClusterIP"
        if self.balancer == "alb":
            ingress["alb.ingress.kubernetes.io/target-type"] = "ip" if self.ip else "instance"
            if attrs:
                (service if self.on_service else ingress)[ALB_ATTRS] = attrs
            kind = "ClusterIP" if self.ip else "NodePort"
        elif self.balancer == "nlb":
            kind = "LoadBalancer"
            service["service.beta.kubernetes.io/aws-load-balancer-type"] = "external"
            service["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"] = (
                "ip" if self.ip else "instance"
            )
        elif self.balancer == "nlb-ip":
            kind = "LoadBalancer"
            service["service.beta.kubernetes.io/aws-load-balancer-type"] = "nlb-ip"
        if self.balancer in ("nlb", "nlb-ip") and attrs:
            service[NLB_ATTRS] = attrs
        docs.append(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\n"
            + _annotations(service)
            + f"spec:\n  type: {kind}\n  selector: {{app: web}}\n"
            "  ports: [{port: 80, targetPort: 8080}]"
        )
        if self.balancer == "alb":
            docs.append(
                "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n"
                "  namespace: shop\n" + _annotations(ingress) + "spec:\n  ingressClassName: alb\n"
                "  defaultBackend: {service: {name: web, port: {number: 80}}}"
            )
        if self.balancer == "tgb":
            docs.append(
                "apiVersion: elbv2.k8s.aws/v1beta1\nkind: TargetGroupBinding\n"
                "metadata: {name: web, namespace: shop}\nspec:\n"
                "  serviceRef: {name: web, port: 80}\n"
                "  targetGroupARN: arn:aws:elasticloadbalancing:eu-west-1:111122223333:"
                "targetgroup/web/0123456789abcdef\n"
                f"  targetType: {'ip' if self.ip else 'instance'}"
            )
        return "\n---\n".join(docs) + "\n"


def _annotations(values: dict[str, str]) -> str:
    if not values:
        return ""
    return "  annotations:\n" + "".join(f"    {k}: '{v}'\n" for k, v in values.items())


cases = st.builds(
    Case,
    balancer=st.sampled_from(["alb", "nlb", "nlb-ip", "tgb"]),
    ip=st.booleans(),
    delay=st.one_of(st.none(), st.integers(0, 3600)),
    sticky=st.booleans(),
    on_service=st.booleans(),
    sleep=st.one_of(st.none(), st.integers(1, 120)),
    grace=st.one_of(st.none(), st.integers(1, 400)),
    namespace=st.sampled_from(["absent", "plain", "gated"]),
)


def _rules(path: Path) -> set[str]:
    return {f.rule for f in lint_paths([str(path)], Settings()).findings}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases)
def test_the_printed_fix_leaves_no_finding_of_its_rules(case: Case, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("lb") / "web.yaml"
    path.write_text(case.manifest())
    before = _rules(path)
    result = CliRunner().invoke(cli, ["fix", "--write", str(path)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    after = _rules(path)
    assert not (after & FIXED), (case, before, after, path.read_text())
    if case.sticky and case.balancer != "tgb":  # the other attribute is kept
        assert "stickiness.enabled=true" in path.read_text()


def test_attributes_keep_the_others_in_order() -> None:
    assert _attributes(None, 10) == "deregistration_delay.timeout_seconds=10"
    assert (
        _attributes("a=1, deregistration_delay.timeout_seconds=300 ,b=2", 10)
        == "a=1,deregistration_delay.timeout_seconds=10,b=2"
    )
    assert _attributes("a=1", 30) == "a=1,deregistration_delay.timeout_seconds=30"


def test_fix_writes_only_the_target_group_attributes() -> None:
    _check({"metadata": {"annotations": {ALB_ATTRS: "x=1"}}}, "Ingress", {})
    _check({"metadata": {"annotations": {NLB_ATTRS: "x=1"}}}, "Service", {})
    for patch, kind in (
        ({"metadata": {"annotations": {NLB_ATTRS: "x=1"}}}, "Ingress"),
        ({"metadata": {"annotations": {"other": "x"}}}, "Service"),
        ({"metadata": {"labels": {"a": "b"}}}, "Service"),
        ({"metadata": {"annotations": {ALB_ATTRS: "x=1"}}, "spec": {"type": "x"}}, "Service"),
    ):
        with pytest.raises(Unsafe):
            _check(patch, kind, {})


def test_readiness_gate_unknown_without_the_namespace() -> None:
    case = Case("alb", True, 10, False, False, 30, 45, "absent")
    assert "SVD111" not in {f.rule for f in lint_text(case.manifest()).findings}
    plain = Case("alb", True, 10, False, False, 30, 45, "plain")
    assert "SVD111" in {f.rule for f in lint_text(plain.manifest()).findings}
    gated = Case("alb", True, 10, False, False, 30, 45, "gated")
    assert "SVD111" not in {f.rule for f in lint_text(gated.manifest()).findings}


@pytest.mark.parametrize(
    "case",
    [
        Case("alb", True, 5, True, False, 10, None, "plain"),
        Case("alb", True, 2, True, True, 10, None, "absent"),
        Case("nlb", True, 900, True, False, 20, 40, "absent"),
        Case("nlb-ip", True, None, False, False, None, None, "absent"),
    ],
)
def test_the_fix_answers_findings_it_had(case: Case, tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    path.write_text(case.manifest())
    before = _rules(path)
    assert "SVD112" in before, before
    assert before & {"SVD101", "SVD110"}, before
    CliRunner().invoke(cli, ["fix", "--write", str(path)], catch_exceptions=False)
    assert not (_rules(path) & FIXED)


def test_an_ingress_suppresses_its_own_finding() -> None:
    text = Case("alb", True, 5, False, False, 30, 45, "absent").manifest()
    assert "SVD112" in {f.rule for f in lint_text(text).findings}
    quiet = text.replace(
        "kind: Ingress\nmetadata:\n  name: web\n  namespace: shop\n  annotations:\n",
        "kind: Ingress\nmetadata:\n  name: web\n  namespace: shop\n  annotations:\n"
        "    ignore.svcdoctor.io/SVD112: 'the platform sets it'\n",
    )
    result = lint_text(quiet)
    assert "SVD112" not in {f.rule for f in result.findings}
    assert result.suppressed == 1


def test_a_patch_dir_annotation_patch_keeps_the_objects_name(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "app.yaml").write_text(Case("alb", True, 5, True, False, 30, 45, "absent").manifest())
    (base / "kustomization.yaml").write_text("resources: [app.yaml]\n")
    out = tmp_path / "overlay"
    CliRunner().invoke(
        cli, ["fix", "--patch-dir", str(out), str(base / "app.yaml")], catch_exceptions=False
    )
    patch = yaml.safe_load((out / "ingress-shop-web.yaml").read_text())
    assert patch["metadata"] == {
        "name": "web",
        "namespace": "shop",
        "annotations": {
            ALB_ATTRS: "stickiness.enabled=true,deregistration_delay.timeout_seconds=10"
        },
    }


AGIC = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 105
      containers:
        - name: app
          image: example/app:1
          lifecycle: {preStop: {sleep: {seconds: 90}}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  annotations: {appgw.ingress.kubernetes.io/connection-draining-timeout: "5"}
spec:
  ingressClassName: azure-application-gateway
  defaultBackend: {service: {name: web, port: {number: 80}}}
"""


@pytest.mark.parametrize("draining", ["", "true"])
def test_application_gateway_draining_is_turned_on_and_long_enough(
    draining: str, tmp_path: Path
) -> None:
    """Connection draining off (the default), or a 5 s timeout against 10 s requests: the fix
    turns it on with the longest request's timeout, and SVD112 is silent after it."""
    text = AGIC
    if draining:
        text = text.replace(
            "annotations: {",
            f'annotations: {{appgw.ingress.kubernetes.io/connection-draining: "{draining}", ',
        )
    path = tmp_path / "web.yaml"
    path.write_text(text)
    assert "SVD112" in _rules(path)
    result = CliRunner().invoke(cli, ["fix", "--write", str(path)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    annotations = list(yaml.safe_load_all(path.read_text()))[2]["metadata"]["annotations"]
    assert annotations["appgw.ingress.kubernetes.io/connection-draining"] == "true"
    assert annotations["appgw.ingress.kubernetes.io/connection-draining-timeout"] == "10"
    assert "SVD112" not in _rules(path)
