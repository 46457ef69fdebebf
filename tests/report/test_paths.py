"""The path in lint's reports (issue 27, output): the fixture of an ALB Ingress with IP
targets, an HTTPRoute through Envoy Gateway and Istio injection, beside a plain Deployment.

Only SVD101 runs (a stable rule): the goldens pin the rendering of the paths, not what the
path rules find. Regenerate after an intended change: ``SVCDOCTOR_UPDATE_GOLDEN=1 pytest
tests/report/test_paths.py``.
"""

from __future__ import annotations

import copy
import io
import json
import os
from importlib.resources import as_file, files
from pathlib import Path

import pytest
from rich.console import Console

from svcdoctor.checks import LintResult, Settings
from svcdoctor.report import lint_to_dict, render_text
from tests.cluster.test_scan import find, items, only, scan
from tests.cluster.test_scan import text as scan_text
from tests.conftest import lint_paths

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "path"
SETTINGS = Settings(kube_version=(1, 33), enabled=frozenset({"SVD101"}))


def golden(name: str, out: str) -> None:
    path = FIXTURES / name
    if os.environ.get("SVCDOCTOR_UPDATE_GOLDEN") or not path.exists():
        path.write_text(out)
    assert out == path.read_text()


@pytest.fixture(scope="module")
def result() -> LintResult:
    cwd = Path.cwd()
    os.chdir(FIXTURES)  # file names relative, as a user runs it
    try:
        return lint_paths(["shop.yaml"], SETTINGS)
    finally:
        os.chdir(cwd)


def text_of(result: LintResult) -> str:
    out = io.StringIO()
    render_text(result, Console(file=out, force_terminal=False, width=100))
    return out.getvalue()


def test_text_shows_each_path_and_the_covered_leg(result: LintResult) -> None:
    text = text_of(result)
    golden("shop.txt.golden", text)
    alb = (
        "  path: AWS ALB (ip, 30 s) → Istio sidecar (drains 20 s) → pod — the preStop advice "
        "covers the 30 s leg of AWS ALB (Ingress shop/web)"
    )
    assert alb in text
    assert "  path: Envoy Gateway (5 s) → Istio sidecar (drains 20 s) → pod\n" in text
    # the web Deployment has no finding: its paths make a group of their own
    assert "shop.yaml:85  Deployment shop/web\n  path:" in text


def test_text_leaves_out_the_datapath_alone(result: LintResult) -> None:
    text = text_of(result)
    plain = text[text.index("Deployment plain/api") :]
    assert "\n  path: " not in plain
    assert "SVD101" in plain


def test_json_carries_every_workload_path(result: LintResult) -> None:
    document = lint_to_dict(result)
    golden("shop.paths.json.golden", json.dumps(document["paths"], indent=2) + "\n")
    web, api = document["paths"]
    assert web["beyond_datapath"]
    assert not api["beyond_datapath"]
    assert web["prestop_covers"]["implementation"] == "aws-alb"
    assert api["prestop_covers"] == {
        "hop": None,
        "implementation": None,
        "seconds": 5.0,
        "source": "propagation-seconds",
    }
    kinds = [[h["kind"] for h in p["hops"]] for p in web["paths"]]
    assert ["load-balancer", "sidecar"] in kinds
    assert ["gateway", "sidecar"] in kinds
    assert [p["covers_prestop"] for p in web["paths"]].count(True) == 1


def test_plain_lint_has_no_path_lines() -> None:
    """A Deployment and a LoadBalancer Service (node targets): the text is as before."""
    with as_file(files("svcdoctor.examples") / "shop.yaml") as path:
        shop = lint_paths([str(path)])
    assert "\n  path: " not in text_of(shop)
    assert len(shop.paths) == 4


def test_scan_shows_the_path_of_live_objects() -> None:
    """scan renders through lint's result: an NLB with IP targets (the Service's
    annotations) in front of Istio-injected pods (the pod template's annotation)."""
    objects = copy.deepcopy(items("SVD108.bad.json"))
    service = find(objects, "Service", "api")
    service["spec"]["type"] = "LoadBalancer"
    service["metadata"].setdefault("annotations", {}).update(
        {
            "service.beta.kubernetes.io/aws-load-balancer-type": "external",
            "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
        }
    )
    template = find(objects, "Deployment", "api")["spec"]["template"]
    template["metadata"].setdefault("annotations", {})["sidecar.istio.io/inject"] = "true"
    report = scan(objects, only("SVD101"))
    shown = scan_text(report)
    assert (
        "  path: AWS NLB (ip, 60 s) → Istio sidecar (drains 5 s) → pod — the preStop advice "
        "covers the 60 s leg of AWS NLB (Service shop/api)"
    ) in shown
    document = report.to_dict()
    assert document["paths"][0]["prestop_covers"]["implementation"] == "aws-nlb"


def test_a_configured_leg_and_the_propagation_named_once() -> None:
    """``[tool.svcdoctor.hops] aws-alb = 2``: the ALB's leg is the config's, shorter than
    the propagation, which the advice then covers; with no finding and no hop slower than
    the propagation, the text leaves the clean workload out (JSON keeps it)."""
    cwd = Path.cwd()
    os.chdir(FIXTURES)
    try:
        settings = Settings(enabled=frozenset({"SVD101"}), hop_seconds={"aws-alb": 2.0})
        result = lint_paths(["shop.yaml"], settings)
    finally:
        os.chdir(cwd)
    assert "Deployment shop/web" not in text_of(result)
    assert lint_to_dict(result)["paths"][0]["prestop_covers"]["hop"] is None
    alb = next(
        h
        for p in lint_to_dict(result)["paths"][0]["paths"]
        for h in p["hops"]
        if h["label"] == "AWS ALB"
    )
    assert alb["leg"] == {"seconds": 2.0, "source": "config hops.aws-alb"}


def test_the_terminal_shows_the_paths_too(result: LintResult) -> None:
    out = io.StringIO()
    render_text(result, Console(file=out, force_terminal=True, width=250, no_color=True))
    assert "  path: AWS ALB (ip, 30 s) → Istio sidecar (drains 20 s) → pod — " in out.getvalue()
