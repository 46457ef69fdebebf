"""``--html`` on every command that has a result to show: written where asked, checked
before the work, and holding the pictures of its own result."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from svcdoctor.cli import cli
from svcdoctor.cli.simulate import _model_arguments

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "src" / "svcdoctor" / "examples" / "rollout-race"
SMALL = ("--nodes", "50", "--replicas", "4", "--runs", "2")


def invoke(*args: str, **kw: Any) -> Result:
    return CliRunner().invoke(cli, list(args), **kw)


def images(page: str) -> list[tuple[str, bytes]]:
    """(alt, decoded bytes) of every inline picture of a page."""
    found = re.findall(r"<img alt='([^']*)' src='data:image/(?:svg\+xml|png);base64,([^']*)'", page)
    return [(alt, base64.b64decode(data)) for alt, data in found]


def test_diagnose_html_has_the_lanes_of_the_evidence(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    done = invoke("diagnose", str(EXAMPLE), "--html", str(page), "-o", "json")
    assert done.exit_code == 0, done.output
    text = page.read_text()
    assert "<h1>Verdict: race (likely)</h1>" in text
    ((alt, svg),) = images(text)
    assert alt.startswith("api: 82 failed requests")
    assert b"<!-- api: 82 failed requests on 8 pods -->" in svg  # the lanes' title
    assert "preStop:" in text  # the fix's YAML
    assert "requests.csv" in text  # the sources read


def test_simulate_html_with_and_without_evidence(tmp_path: Path) -> None:
    plain, lanes = tmp_path / "plain.html", tmp_path / "lanes.html"
    assert invoke("simulate", *SMALL, "--html", str(plain)).exit_code == 0
    done = invoke("simulate", *SMALL, "--html", str(lanes), "--emit-evidence", str(tmp_path / "e"))
    assert done.exit_code == 0, done.output
    (only,) = images(plain.read_text())
    assert only[0].startswith("Simulated requests and failures")
    first, second = images(lanes.read_text())
    assert "failed requests" in first[0]  # the emitted bundle's lanes come first
    assert second[0] == only[0]  # the same run (same seed): the same timeline


def test_recommend_html_and_plot(tmp_path: Path) -> None:
    page, svg, png = tmp_path / "r.html", tmp_path / "c.svg", tmp_path / "c.PNG"
    done = invoke("simulate", "recommend", *SMALL, "--html", str(page), "--plot", str(svg))
    assert done.exit_code in (0, 1), done.output
    assert invoke("simulate", "recommend", *SMALL, "--plot", str(png)).exit_code in (0, 1)
    assert svg.read_text().lstrip().startswith("<?xml")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    text = page.read_text()
    assert "<h1>preStop sleep " in text
    ((alt, _),) = images(text)
    assert "preStop" in alt
    assert "Copy</button><pre>" in text  # the Deployment fields, copyable
    # a diagnosis' window on the curve: a band in the picture, a sentence in its alt text
    seen = tmp_path / "seen.html"
    done = invoke("simulate", "recommend", *SMALL, "--observed-window", "2.5s", "--html", str(seen))
    assert done.exit_code in (0, 1), done.output
    ((alt, _),) = images(seen.read_text())
    assert "the observed race window of 2.5 s" in alt


def test_simulate_html_before_the_subcommand_is_refused(tmp_path: Path) -> None:
    done = invoke("simulate", "--html", str(tmp_path / "r.html"), "recommend")
    assert done.exit_code == 2
    assert "options of simulate itself" in done.output
    assert not (tmp_path / "r.html").exists()


def test_html_is_not_a_model_option() -> None:
    argv = ["svcdoctor", "simulate", "--nodes", "5", "--html", "r.html", "--plot=p.png"]
    assert _model_arguments(argv) == "--nodes 5"


@pytest.mark.parametrize(
    "command",
    [
        ["diagnose", str(EXAMPLE)],
        ["simulate", *SMALL],
        ["simulate", "recommend", *SMALL],
        ["lab", "run"],
        ["lab", "demo"],
        ["probe", "api"],
        ["rollout-test", "deployment/api"],
    ],
)
def test_a_report_that_is_not_html_is_refused_before_the_work(
    tmp_path: Path, command: list[str]
) -> None:
    done = invoke(*command, "--html", str(tmp_path / "report.pdf"))
    assert done.exit_code == 2
    assert "ending in .html or .htm" in done.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [["lab", "run"], ["lab", "demo"], ["probe", "api"], ["rollout-test", "deployment/api"]],
)
def test_every_command_with_a_result_offers_html(command: list[str]) -> None:
    done = invoke(*command, "--help")
    assert done.exit_code == 0
    assert "--html FILE" in done.output
