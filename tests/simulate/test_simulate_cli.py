"""``svcdoctor simulate`` and ``simulate recommend`` from the command line, and the evidence
bundles they emit, diagnosed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence

SMALL = ["--nodes", "40", "--rate", "200", "--duration", "90"]


def svcdoctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "svcdoctor", *args], capture_output=True, text=True, check=False
    )


def test_json_carries_the_answer_and_the_parameters() -> None:
    proc = svcdoctor("simulate", *SMALL, "--runs", "3", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"requests", "failed", "failure_rate", "by_cause", "parameters", "timeline"} <= set(out)
    assert out["failed"] > 0
    assert out["by_cause"]["race"] == pytest.approx(out["failed"])
    assert len(out["runs"]) == 3
    lo, hi = out["interval"]
    assert lo <= out["failed"] <= hi
    params = out["parameters"]
    assert params["nodes"] == 40
    assert (params["max_surge"], params["max_unavailable"]) == (3, 2)  # 25 % of 10
    assert params["propagation"]["controller"] == "lognormal:0.05,0.5"
    assert params["propagation"]["min_sync"] == 1.0
    assert sum(out["timeline"]["requests"]) == out["runs"][0]["requests"]
    assert proc.stderr == ""


def test_text_names_the_cause_and_the_next_step(tmp_path: Path) -> None:
    plot = tmp_path / "t.png"
    proc = svcdoctor("simulate", *SMALL, "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    assert "Failed requests per window" in proc.stdout
    assert "race" in proc.stdout
    assert "Next: svcdoctor simulate recommend --nodes 40 --rate 200 --duration 90 " in proc.stdout
    assert "During the rollout" in proc.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--latency", "lognormal:3,1"], "'--latency': 'lognormal:3,1': lognormal needs"),
        (["--propagation", "zipf:1"], "unknown distribution 'zipf'"),
        (["--max-surge", "0", "--max-unavailable", "0"], "cannot both be 0"),
        (["--max-surge", "lots"], "'--max-surge': 'lots': give a whole number"),
        (["--bad-backends", "20"], "bad-backends (20) exceeds replicas"),
        (["--connection", "keepalive", "--clients", "1"], "add clients"),
        (["--nodes", "0"], "'--nodes'"),
        (["--plot", "x.png", "recommend"], "options of simulate itself"),
        (["recommend", "--kubernetes-version", "new"], "expected MAJOR.MINOR"),
        (["--seed", "-1"], "'--seed': '-1' is out of range"),
        (["--clients", "1000000000000"], "'--clients': '1000000000000' is out of range"),
        (["--rate", "nan"], "'--rate': 'nan' is not a finite number"),
        (["--duration", "inf"], "'--duration': 'inf' is not a finite number"),
        (["--idempotent", "150%"], "'--idempotent': '150%' is out of range"),
        (["--min-sync", "nan"], "'nan' is not a finite number"),
        (["recommend", "--target-failures", "nan"], "'--target-failures': 'nan' is not a"),
        (["recommend", "--target-failures", "inf"], "'--target-failures': 'inf' is not a"),
        (["--latency", "lognormal:1,60"], "past the client timeout (5 s)"),
        (["recommend", "--no-rollout"], "recommend needs a rollout"),
        (["--event", "scale-down", "--scale-to", "10"], "scale-to must be between 0 and"),
        (["--event", "evacuate"], "'--event': 'evacuate' is not one of"),
        (["--pdb-max-unavailable", "0"], "'--pdb-max-unavailable': '0' is out of range"),
        (["--sidecar-drain", "nan"], "'--sidecar-drain': 'nan' is not a finite number"),
        (
            ["--event", "drain", "--emit-metrics", "m.om", "--rollouts", "2"],
            "a drain happens once: give --rollouts 1",
        ),
    ],
)
def test_bad_options_exit_2_with_one_error_line(args: list[str], message: str) -> None:
    proc = svcdoctor("simulate", *args)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    assert message in errors[0]
    assert "Traceback" not in proc.stderr


def test_events_and_hop_legs_from_the_command_line() -> None:
    proc = svcdoctor(
        "simulate",
        *SMALL,
        *("--event", "drain", "--pdb-max-unavailable", "1", "--runs", "1", "-o", "json"),
    )
    assert proc.returncode == 0, proc.stderr
    params = json.loads(proc.stdout)["parameters"]
    assert (params["event"], params["pdb_max_unavailable"]) == ("drain", 1)
    text = svcdoctor("simulate", *SMALL, "--event", "scale-down", "--scale-to", "4", "--runs", "1")
    assert "scale-down to 4" in text.stdout
    proc = svcdoctor(
        "simulate",
        *SMALL,
        *("--shutdown", "graceful", "--sidecar-drain", "1", "--lb-share", "0.5"),
        *("--lb-delay", "uniform:6,8", "--lb-deregistration", "60", "--runs", "1"),
        *("recommend", "-o", "json"),
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["prestop_seconds"] >= 8  # the LB's leg, not kube-proxy's
    assert out["sidecar_drain_seconds"] >= out["prestop_seconds"]
    assert out["parameters"]["lb_deregistration"] == 60.0


def test_recommend_json_and_options_before_the_subcommand() -> None:
    proc = svcdoctor("simulate", "--nodes", "50", "recommend", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["parameters"]["nodes"] == 50
    assert {"prestop_seconds", "grace_seconds", "predicted_failure_rate"} <= set(out)
    assert out["met"] is True
    assert out["predicted_failure_rate"] <= 1e-4
    assert f"seconds: {out['prestop_seconds']}" in out["yaml"]


def test_recommend_text_and_exit_1_when_unmet() -> None:
    proc = svcdoctor("simulate", "recommend", "--nodes", "40", "--kubernetes-version", "1.28")
    assert proc.returncode == 0, proc.stderr
    assert "meets the target" in proc.stdout
    assert 'command: ["sh", "-c", "sleep' in proc.stdout
    unmet = svcdoctor("simulate", "recommend", "--nodes", "40", "--bad-backends", "1")
    assert unmet.returncode == 1
    assert "does NOT meet the target" in unmet.stdout
    assert "bad_backend" in unmet.stdout


@pytest.mark.parametrize(
    ("args", "cause", "culprit"),
    [
        ([], "race", None),
        (
            ["--bad-backends", "1", "--replicas", "8", "--no-rollout"],
            "backend",
            "api-7f6d5c4b3-007",
        ),
        (["--connection", "keepalive", "--clients", "400"], "reuse", None),
    ],
)
def test_emitted_evidence_is_diagnosed(
    tmp_path: Path, args: list[str], cause: str, culprit: str | None
) -> None:
    out = tmp_path / "bundle"
    proc = svcdoctor("simulate", *SMALL, *args, "--runs", "1", "--emit-evidence", str(out))
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in out.iterdir()}
    assert names == {
        "requests.csv",
        "events.json",
        "pods.json",
        "endpointslices.jsonl",
        "simulate.json",
    }
    meta = json.loads((out / "simulate.json").read_text())
    d = diagnose(read_evidence([str(out)]))
    assert d.primary is not None
    assert d.primary.cause.value == cause
    if culprit:
        assert meta["ground_truth"]["bad_pods"] == [culprit]
        assert culprit in " ".join(d.primary.evidence)
    # the bundle holds every request of the run, with the failures the model counted
    assert d.summary.requests == meta["requests"]
    assert d.summary.errors == meta["failed"]
    again = svcdoctor("diagnose", str(out), "--format", "json")
    assert json.loads(again.stdout)["primary_cause"] == cause


def test_emit_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    proc = svcdoctor("simulate", *SMALL, "--emit-evidence", str(tmp_path))
    assert proc.returncode == 2
    assert "exists and is not an empty directory" in proc.stderr
    assert proc.stdout == ""
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_sigkilled_pods_exit_137_in_the_bundle(tmp_path: Path) -> None:
    out = tmp_path / "b"
    proc = svcdoctor(
        "simulate",
        *SMALL,
        "--shutdown",
        "graceful",
        "--prestop",
        "2",
        "--grace",
        "3",
        "--latency",
        "lognormal:0.2,4",
        "--timeout",
        "30",
        "--emit-evidence",
        str(out),
        "--runs",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    pods = json.loads((out / "pods.json").read_text())["items"]
    codes = {
        s["state"]["terminated"]["exitCode"]
        for pod in pods
        for s in pod["status"]["containerStatuses"]
        if "terminated" in s["state"]
    }
    assert 137 in codes
    d = diagnose(read_evidence([str(out)]))
    assert d.primary is not None
    assert d.primary.cause.value == "race"
    assert "grace" in " ".join(d.primary.evidence + tuple(f.text for f in d.primary.fixes)).lower()


@pytest.mark.parametrize("option", ["--plot", "--emit-evidence"])
def test_an_output_that_cannot_be_written_is_one_line(tmp_path: Path, option: str) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    name = "out.png" if option == "--plot" else "out"
    proc = svcdoctor("simulate", *SMALL, "--runs", "1", option, str(blocked / name))
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    assert f"'{option}': cannot write" in errors[0]
    assert "is not a directory" in errors[0]
    assert proc.stdout == ""  # refused before simulating


def test_a_plot_is_png_or_svg(tmp_path: Path) -> None:
    proc = svcdoctor("simulate", *SMALL, "--runs", "1", "--plot", str(tmp_path / "out.pdf"))
    assert proc.returncode == 2
    assert proc.stderr.endswith(
        f"Error: Invalid value for '--plot': '{tmp_path / 'out.pdf'}': the plot is written as "
        "PNG or SVG: give a name ending in .png or .svg\n"
    )
    assert proc.stdout == ""


def test_a_measured_propagation_holds_the_sync_wait() -> None:
    """--propagation is the whole delay (e.g. the window diagnose measured): no min-sync
    batching on top unless --min-sync-period is given too."""
    alone = json.loads(svcdoctor("simulate", *SMALL, "--propagation", "2", "-o", "json").stdout)
    assert alone["parameters"]["propagation"]["min_sync"] == 0.0
    assert alone["runs"][0]["programming_seconds"]["kube-proxy"]["max"] == pytest.approx(2.0)
    both = svcdoctor(
        "simulate", *SMALL, "--propagation", "2", "--min-sync-period", "1", "-o", "json"
    )
    batched = json.loads(both.stdout)["runs"][0]["programming_seconds"]["kube-proxy"]
    assert 2.0 < batched["max"] <= 3.0


def test_settings_that_do_nothing_are_named() -> None:
    proc = svcdoctor("simulate", *SMALL, "--max-connection-age", "5", "--prestop", "40")
    assert "--max-connection-age has no effect with a new connection per request" in proc.stdout
    assert "preStop 40 s is not shorter than the grace period 30 s" in proc.stdout


def test_a_full_conntrack_table_is_in_the_kernel_log(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    proc = svcdoctor(
        "simulate",
        *("--nodes", "20", "--rate", "200", "--duration", "30", "--no-rollout"),
        *("--node-conn-rate", "1500", "--runs", "1", "--emit-evidence", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    lines = (out / "kernel.log").read_text().splitlines()
    assert lines[0].endswith(" kernel: nf_conntrack: nf_conntrack: table full, dropping packet")
    assert any(" kernel: net_ratelimit: " in line for line in lines)
    evidence = read_evidence([str(out)])
    dropped = json.loads((out / "simulate.json").read_text())["ground_truth"]["by_mechanism"]
    assert sum(e.count for e in evidence.kernel) == dropped["conntrack"]
    d = diagnose(evidence)
    assert d.primary is not None
    assert d.primary.cause.value == "infra"
