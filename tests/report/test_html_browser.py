"""Every report kind as a person sees it, in a real headless Chromium at 1280x800: no
console error, every picture decoded with a size, the verdict above the fold, a
screenshot in the test's temporary directory. One browser for the module."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.cli._report import probe_page, rollout_page, write_page
from svcdoctor.cluster.probing import assess
from svcdoctor.cluster.rollout import Plan, PodDelay, RolloutTest, Timing
from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from tests.browser import Browser, Seen, assert_seen_well, browser_fixture
from tests.factory import Scenario, generate, write_bundle

EXAMPLE = Path(str(files("svcdoctor.examples") / "rollout-race"))
SVCDOCTOR = str(Path(sys.executable).with_name("svcdoctor"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from browser_fixture()


def _cli(*args: str) -> None:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code in (0, 1), done.output  # recommend exits 1 when the target is unmet


def _seen(browser: Browser, page: Path, tmp_path: Path, images: int) -> Seen:
    seen = browser.open(page, tmp_path / f"{page.stem}.png")
    assert_seen_well(seen, images)
    return seen


def test_diagnose_report(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "diagnose.html"
    _cli("diagnose", str(EXAMPLE), "--html", str(page))
    seen = _seen(browser, page, tmp_path, 1)
    assert seen.verdict_text == "Verdict: race (likely)"
    assert "82 failed requests" in seen.images[0].alt
    assert seen.copy_buttons_shown == 1  # the script ran: the fix's YAML is copyable


def test_the_copy_button_copies_or_selects(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "copy.html"
    _cli("diagnose", str(EXAMPLE), "--html", str(page))
    browser.open(page, tmp_path / "copy.png")
    d = browser.driver
    button = d.find_element("css selector", "button.copy")
    d.execute_script("arguments[0].scrollIntoView();", button)
    button.click()
    text = d.execute_script("return arguments[0].textContent;", button)
    assert text in ("Copied", "Selected: press Ctrl+C")
    selected = d.execute_script("return window.getSelection().toString();")
    assert selected.startswith("spec:\n")  # the YAML, ready for Ctrl+C either way
    assert "preStop:" in selected
    severe = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []


def test_diagnose_report_in_dark_mode(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "dark.html"
    _cli("diagnose", str(EXAMPLE), "--html", str(page))
    d = browser.driver
    dark = {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", dark)
    try:
        _seen(browser, page, tmp_path, 1)
        body, card = d.execute_script(
            "return [getComputedStyle(document.body).backgroundColor,"
            " getComputedStyle(document.images[0]).backgroundColor];"
        )
    finally:
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert body == "rgb(21, 23, 27)"
    assert card == "rgb(255, 255, 255)"  # the pictures keep a white card


def test_diagnose_report_prints(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "print.html"
    _cli("diagnose", str(EXAMPLE), "--html", str(page))
    browser.open(page, tmp_path / "print.png")
    d = browser.driver
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        button, raw, background = d.execute_script(
            "return [getComputedStyle(document.querySelector('button.copy')).display,"
            " getComputedStyle(document.querySelector('details')).display,"
            " getComputedStyle(document.body).backgroundColor];"
        )
        pdf = base64.b64decode(d.execute_cdp_cmd("Page.printToPDF", {})["data"])
    finally:
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    assert (button, raw, background) == ("none", "none", "rgb(255, 255, 255)")
    assert pdf.startswith(b"%PDF")
    (tmp_path / "print.pdf").write_bytes(pdf)


def test_bad_backend_report(browser: Browser, tmp_path: Path) -> None:
    bundle = write_bundle(generate(Scenario("backend", bad_pod=5)), tmp_path / "b", "nginx")
    page = tmp_path / "backend.html"
    _cli("diagnose", str(bundle), "--html", str(page))
    seen = _seen(browser, page, tmp_path, 2)
    assert seen.verdict_text.startswith("Verdict: backend")


def test_simulate_report_with_lanes(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "simulate.html"
    emitted = tmp_path / "emitted"
    _cli(
        "simulate", "--nodes", "50", "--replicas", "4", "--runs", "2",
        "--emit-evidence", str(emitted), "--html", str(page),
    )  # fmt: skip
    seen = _seen(browser, page, tmp_path, 2)
    assert seen.verdict_text.startswith("Simulated:")
    assert "failed requests" in seen.images[0].alt  # the lanes of the emitted bundle


def test_simulate_report_without_evidence(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "simulate-plain.html"
    _cli("simulate", "--nodes", "50", "--replicas", "4", "--runs", "2", "--html", str(page))
    seen = _seen(browser, page, tmp_path, 1)
    assert seen.images[0].alt.startswith("Simulated requests and failures")


def test_recommend_report(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "recommend.html"
    _cli("simulate", "recommend", "--nodes", "50", "--replicas", "4", "--runs", "2",
         "--html", str(page))  # fmt: skip
    seen = _seen(browser, page, tmp_path, 1)
    assert seen.verdict_text.startswith("preStop sleep")
    assert "preStop" in seen.images[0].alt


def test_rollout_test_report(browser: Browser, tmp_path: Path) -> None:
    evidence = read_evidence([str(EXAMPLE)])
    diagnosis = diagnose(evidence)
    start = diagnosis.summary.start
    assert start is not None
    result = RolloutTest(
        plan=Plan("default", "deployments", "api", EXAMPLE),
        service="api",
        requests=diagnosis.summary.requests,
        failed=diagnosis.summary.errors,
        by_outcome={"ok": 5918, "refused": 50, "reset": 32},
        by_phase={"before": {"requests": 1800}, "during": {"requests": 4200, "refused": 50}},
        delays=(PodDelay("api-7d9f8b6c5-a00x", start + 60, start + 61.2, start + 63),),
        timing=Timing(start, start + 58, start + 135, start + 200),
        diagnosis=diagnosis,
        bundle=EXAMPLE,
        interrupted=False,
        cleanup=None,
    )
    page = tmp_path / "rollout.html"
    write_page(page, rollout_page(result, json.dumps({"failed": result.failed})))
    seen = _seen(browser, page, tmp_path, 1)
    assert seen.verdict_text == "82 requests failed during the rollout: race (likely)"


def test_probe_report(browser: Browser, tmp_path: Path) -> None:
    backends = [f"10.244.1.{i}:8080" for i in range(1, 5)]
    direct = [
        {"backend": b, "outcome": "reset" if b.endswith(".3:8080") and n % 3 == 0 else "ok",
         "latency_ms": 2.0}
        for b in backends
        for n in range(60)
    ]  # fmt: skip
    service = [{"outcome": "reset" if n % 12 == 0 else "ok"} for n in range(240)]
    names = {b: f"api-{i}" for i, b in enumerate(backends)}
    result = assess(direct, service, names=names)
    assert result.bad_backends  # the probe singles out api-2
    page = tmp_path / "probe.html"
    write_page(page, probe_page(result, "default/api", "run-1", (), json.dumps({})))
    seen = _seen(browser, page, tmp_path, 1)
    assert seen.verdict_text == "Singled out: api-2"


# ---- the lab (a real run, marked lab like tests/lab: the kernel datapath needs root) -----
# (lab run's, probe's and rollout-test's reports against the lab are written by their own
# lab tests: tests/lab/test_lab_cli.py, tests/cluster/test_probe.py, test_rollout_test.py)


def _lab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SVCDOCTOR, "lab", *args], capture_output=True, text=True, timeout=timeout,
        check=False, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


@pytest.mark.lab
def test_lab_demo_writes_the_before_after_report_last(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "demo.html"
    done = _lab("demo", "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().splitlines()[-1] == f"before/after report: {page}"
    seen = _seen(browser, page, tmp_path, 1)
    assert seen.verdict_text.startswith("Before the fix: ")
    assert "After the fix (race-fixed)" in seen.images[0].alt
