"""The path in diagnose's reports (issue 27, output): the rollout-race example's evidence
with its workload behind an AWS ALB with IP targets, Envoy Gateway and Istio
(``tests/fixtures/path/rollout-race.yaml``): text, JSON and the HTML page's Path section,
the last in a real headless Chromium."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from tests.browser import Browser, assert_seen_well, browser_fixture
from tests.report.test_paths import FIXTURES, golden

EXAMPLE = Path(str(files("svcdoctor.examples") / "rollout-race"))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("path") / "bundle"
    shutil.copytree(EXAMPLE, folder)
    shutil.copy(FIXTURES / "rollout-race.yaml", folder / "deployment.yaml")
    return folder


def diagnose(*args: str) -> str:
    done = CliRunner().invoke(cli, ["diagnose", *args, "--kubernetes-version", "1.33"])
    assert done.exit_code == 0, done.output
    return done.output


def test_text_names_the_path_and_the_compared_leg(bundle: Path) -> None:
    out = diagnose(str(bundle))
    path = out[out.index("Path (edge → pod") : out.index("\nNext:")]
    golden("rollout-race.path.txt.golden", path)
    assert (
        "    path: AWS ALB (ip, 30 s) → Istio sidecar (drains 5 s) → pod — the measured window "
        "is compared with the 30 s leg of AWS ALB (Ingress default/api)"
    ) in path
    assert (
        "path of Deployment default/api: the measured race window (95 % upper bound 2.5 s) is "
        "compared with the 30 s leg of AWS ALB (Ingress default/api)"
    ) in out


def test_json_carries_the_paths(bundle: Path) -> None:
    document = json.loads(diagnose(str(bundle), "-o", "json"))
    (api,) = document["paths"]
    assert api["object"] == {"kind": "Deployment", "namespace": "default", "name": "api"}
    assert api["prestop_covers"]["implementation"] == "aws-alb"
    race = document["causes"][0]
    assert any(line.startswith("path of Deployment default/api") for line in race["evidence"])


def test_html_path_section(bundle: Path, tmp_path: Path) -> None:
    page = tmp_path / "path.html"
    diagnose(str(bundle), "--html", str(page))
    html = page.read_text()
    start = html.index("<h2>Path</h2>")
    section = html[start : html.index("<h2>", start + 1)]
    golden("rollout-race.path.html.golden", section.replace("><", ">\n<") + "\n")
    assert section.count("class='hop load-balancer covered'") == 1


def test_plain_manifests_show_no_path() -> None:
    """The example's plain Deployment and Service: kube-proxy only, nothing to show."""
    out = diagnose(str(EXAMPLE))
    assert "Path (edge" not in out
    assert "path:" not in out
    assert "path of " not in out


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from browser_fixture()


def test_html_draws_the_hops_with_the_covered_leg(
    bundle: Path, browser: Browser, tmp_path: Path
) -> None:
    page = tmp_path / "path.html"
    diagnose(str(bundle), "--html", str(page))
    seen = browser.open(page, tmp_path / "path.png")
    assert_seen_well(seen, 1)
    d = browser.driver
    rows = d.execute_script(
        "return [...document.querySelectorAll('section.path ol.hops')].map(ol =>"
        " [...ol.querySelectorAll('.hop')].map(h => h.innerText.replace(/\\n/g, ' ')));"
    )
    assert ["AWS ALB ip · leg 30 s", "Istio sidecar drains 5 s", "pod"] in rows
    assert ["Envoy Gateway leg 5 s", "Istio sidecar drains 5 s", "pod"] in rows
    covered = d.execute_script(
        "return [...document.querySelectorAll('.hop.covered')].map(h => ["
        " h.querySelector('b').innerText, getComputedStyle(h).borderTopWidth,"
        " h.getBoundingClientRect().height]);"
    )
    assert len(covered) == 1
    label, border, height = covered[0]
    assert label == "AWS ALB"
    assert border == "2px"
    assert height > 0
    # the boxes of one path stand in a row, left to right, centred on one line
    boxes = d.execute_script(
        "const ol = document.querySelector('section.path ol.hops');"
        " return [...ol.querySelectorAll('.hop')].map(h => h.getBoundingClientRect());"
    )
    for a, b in itertools.pairwise(boxes):
        assert a["right"] < b["left"]
        assert abs((a["top"] + a["bottom"]) - (b["top"] + b["bottom"])) < 2
    caption = d.find_element("css selector", "section.path p.covers").text
    assert caption.startswith("The measured window is compared with the 30 s leg of AWS ALB")
    severe = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []
