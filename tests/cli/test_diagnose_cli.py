"""``svcdoctor diagnose`` as users run it: the real console script in a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factory import Scenario, generate, write_bundle

SVCDOCTOR = str(Path(sys.executable).with_name("svcdoctor"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SVCDOCTOR, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def race_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_bundle(generate(Scenario("race")), tmp_path_factory.mktemp("race") / "b")


def test_json_report_has_the_documented_schema(race_bundle: Path) -> None:
    done = run("diagnose", str(race_bundle), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == {
        "schema_version",
        "summary",
        "primary_cause",
        "causes",
        "next_steps",
        "service",
        "other_services",
    }
    assert {"requests", "errors", "error_rate", "start", "end"} <= set(report["summary"])
    assert report["primary_cause"] == "race"
    assert report["causes"][0]["cause"] == "race"
    for cause in report["causes"]:
        assert set(cause) >= {"cause", "score", "verdict", "evidence", "fixes", "details"}
        assert cause["verdict"] in ("likely", "possible", "unlikely")
    race = report["causes"][0]["details"]
    assert race["window_seconds"] > 0
    assert race["recommended_prestop_seconds"] >= race["window_seconds"]


def test_text_report_puts_the_verdict_first(race_bundle: Path) -> None:
    done = run("diagnose", str(race_bundle))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Verdict: race (likely")
    assert "preStop" in done.stdout
    assert "read: " in done.stdout


def test_html_and_plot(race_bundle: Path, tmp_path: Path) -> None:
    html, png = tmp_path / "report.html", tmp_path / "timeline.png"
    done = run(
        "diagnose", str(race_bundle), "--html", str(html), "--plot", str(png), "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    page = html.read_text()
    assert "Verdict: race (likely)" in page
    assert "data:image/svg+xml;base64," in page
    # self-contained: nothing fetched (the one inline script is the YAML copy button)
    assert not re.search(r"<script[^>]*\bsrc=|<link\b|https?://", page)


def test_backend_suspects_in_json(tmp_path: Path) -> None:
    bundle = generate(Scenario("backend", bad_pod=5))
    folder = write_bundle(bundle, tmp_path / "b", "nginx")
    report = json.loads(run("diagnose", str(folder), "-o", "json").stdout)
    assert report["primary_cause"] == "backend"
    suspect = report["causes"][0]["details"]["suspects"][0]
    assert (suspect["pod"], suspect["ip"]) == (bundle.truth["bad_pod"], bundle.truth["bad_ip"])


def test_nothing_usable_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing to see\n")
    done = run("diagnose", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "notes.txt: not a recognised evidence format" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_clock_offset_is_a_usage_error(race_bundle: Path) -> None:
    done = run("diagnose", str(race_bundle), "--clock-offset", "nginx")
    assert done.returncode == 2
    assert "SOURCE=SECONDS" in done.stderr
