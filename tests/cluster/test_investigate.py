"""``svcdoctor investigate``: the five steps composed from scan, collect, diagnose, probe and
rollout-test, against the lab's API server (a served fixture cluster: fast, no lab lock)
and against ``lab serve`` (kernel datapath, under the lab lock)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.fix.plan import read_diagnosis
from tests.browser import HEIGHT, Browser, assert_seen_well, browser_fixture
from tests.cluster.test_collect import _fixture_objects, _logs, play_rollout
from tests.cluster.test_collect_progress import stderr_on_terminal

if TYPE_CHECKING:
    from tests.cluster.conftest import Served
    from tests.cluster.shared_labs import BadBackend, RaceWatched, RolloutsWatched

STEPS = ["Quantify", "Correlate with the pod lifecycle", "Bypass the Service",
         "Check the shutdown path", "Look at the client"]  # fmt: skip
LOAD = "app.kubernetes.io/component=load"
MANAGED = "app.kubernetes.io/managed-by=svcdoctor"


def _served(api: Served) -> None:
    logs = _logs()
    for obj in _fixture_objects():
        api.put(obj)
    for ns, pod in {k[:2] for k in logs}:
        source = {c: text for (n, p, c), text in logs.items() if (n, p) == (ns, pod)}
        api.call(api.store.set_logs, ns, pod, lambda c, s=source: s.get(c or "", ""))


def _created(api: Served) -> list[dict[str, Any]]:
    """What svcdoctor's active steps create: Jobs and the agent's ConfigMaps."""
    jobs = api.call(api.store.select, "batch/v1", "Job")
    maps = api.call(api.store.select, "v1", "ConfigMap", None, MANAGED)
    return [*jobs, *maps]


def test_investigate_reads_only_and_lists_the_skipped_active_steps(
    api: Served, tmp_path: Path
) -> None:
    _served(api)
    out = tmp_path / "inv"
    mutator = threading.Thread(target=play_rollout, args=(api,))
    mutator.start()
    args = ["investigate", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api"]
    args += ["--out", str(out), "--watch-rollout", "3", "-o", "json", "--client-logs", LOAD]
    done = CliRunner().invoke(cli, args)
    mutator.join()
    assert done.exit_code in (0, 1, 3), done.output
    report = json.loads(done.output)
    assert [s["title"] for s in report["steps"]] == STEPS
    assert [s["step"] for s in report["steps"]] == [1, 2, 3, 4, 5]
    commands = [s["command"] for s in report["skipped"]]
    assert any(" probe api --yes" in c for c in commands), commands
    assert any(" rollout-test deployment/api --service api --yes" in c for c in commands)
    assert all(f"--kubeconfig {api.kubeconfig}" in c for c in commands)
    bypass = report["steps"][2]
    assert any("skipped without --yes" in m for m in bypass["missing"])
    assert _created(api) == []  # nothing created
    assert (out / "investigation.json").is_file()
    assert (out / "report.html").is_file()
    assert (out / "evidence" / "collect.json").is_file()
    assert json.loads((out / "investigation.json").read_text())["steps"] == report["steps"]
    again = CliRunner().invoke(cli, [*args[:-6], "-o", "json"])  # the same --out: replaced
    assert again.exit_code in (0, 1, 3), again.output
    names = {p.name for p in out.iterdir()}
    assert {"evidence", "investigation.json", "report.html"} <= names
    assert names <= {"evidence", "investigation.json", "report.html", "diagnosis.json"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from browser_fixture()


_CHECKLIST = """
return Array.from(document.querySelectorAll('header.verdict ul.facts li')).map(li => {
  const r = li.getBoundingClientRect(); return [li.innerText, r.top + r.height];
});
"""


def test_the_report_shows_the_verdict_and_the_checklist_first(
    api: Served, tmp_path: Path, browser: Browser
) -> None:
    """report.html in a headless Chromium at 1280x800: the verdict and the five steps
    within the first screen, the pictures decoded, no console error."""
    _served(api)
    out = tmp_path / "inv"
    mutator = threading.Thread(target=play_rollout, args=(api,))
    mutator.start()
    args = ["investigate", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api"]
    args += ["--out", str(out), "--watch-rollout", "3", "--client-logs", LOAD]
    done = CliRunner().invoke(cli, args)
    mutator.join()
    assert done.exit_code in (0, 1, 3), done.output
    seen = browser.open(out / "report.html", tmp_path / "investigate.png")
    assert_seen_well(seen, 1)
    assert seen.verdict_text.startswith("Verdict: ")
    steps = browser.driver.execute_script(_CHECKLIST)
    assert [text.split(":")[0] for text, _ in steps] == [f"{n}. {t}" for n, t in
                                                          enumerate(STEPS, 1)]  # fmt: skip
    assert all(bottom <= HEIGHT for _, bottom in steps), steps


def test_an_unreachable_prometheus_leaves_the_investigation_incomplete(
    api: Served, tmp_path: Path
) -> None:
    """The metrics the user asked for failed: the other steps still run, and the result
    says it is incomplete (exit 3 when no cause is named) rather than passing in silence."""
    _served(api)
    args = ["investigate", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api", "-o", "json"]
    args += ["--out", str(tmp_path / "inv"), "--prometheus", "http://127.0.0.1:9", "--since", "5m"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code in (1, 3), done.output
    report = json.loads(done.output)
    assert [n.split(":")[0] for n in report["incomplete"]] == ["metrics failed"]
    assert any(m.startswith("metrics failed") for m in report["steps"][0]["missing"])


def test_the_config_files_prometheus_is_read_and_checked(api: Served, tmp_path: Path) -> None:
    """``prometheus = URL`` in the config file stands for ``--prometheus``; a value that is
    not an http(s) URL is a one-line usage error naming the file."""
    _served(api)
    config = tmp_path / ".svcdoctor.toml"
    config.write_text('prometheus = "http://127.0.0.1:9"\n')
    args = ["investigate", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api", "-o", "json"]
    args += ["--config", str(config), "--since", "5m"]
    done = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "inv")])
    assert done.exit_code in (0, 1, 3), done.output
    assert [n.split(":")[0] for n in json.loads(done.output)["incomplete"]] == ["metrics failed"]
    config.write_text('prometheus = "prometheus:9090"\n')
    bad = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "inv2")])
    assert bad.exit_code == 2
    assert f"{config}: prometheus must be an http(s) URL" in bad.output


def test_an_unknown_service_is_one_line_and_exit_2(api: Served, tmp_path: Path) -> None:
    _served(api)
    args = ["investigate", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "nope"]
    done = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "inv")])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        "svcdoctor: error: service shop/nope not found in context svcdoctor-lab"
    ]


def test_active_flags_need_yes_and_out_must_be_an_investigation(
    api: Served, tmp_path: Path
) -> None:
    args = ["investigate", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api"]
    done = CliRunner().invoke(cli, [*args, "--rollout"])
    assert done.exit_code == 2
    assert "--rollout is an active step: it needs --yes" in done.output
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    done = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "mine")])
    assert done.exit_code == 2
    assert "holds files that are not an investigation (notes.txt)" in done.output


def test_a_rerun_replaces_the_results_even_after_an_interrupted_one(
    api: Served, tmp_path: Path
) -> None:
    """A rerun into the same --out removes the earlier results before it gathers, so an
    interrupted rerun leaves its evidence alone (no stale verdict beside it), and the
    folder is still taken as an investigation's."""
    _served(api)
    out = tmp_path / "inv"
    args = ["investigate", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api"]
    args += ["--out", str(out), "-o", "json"]
    assert CliRunner().invoke(cli, args).exit_code in (0, 1, 3)
    (out / "investigation.json").unlink()  # as an interrupted rerun leaves it
    (out / "report.html").unlink()
    again = CliRunner().invoke(cli, args)
    assert again.exit_code in (0, 1, 3), again.output
    assert (out / "investigation.json").is_file()
    assert (out / "report.html").is_file()


# ---- end to end against lab serve (kernel datapath; serialised by the lab lock) ----------

DEPLOYMENT = """\
apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: lab
spec:
  selector:
    app: api
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: lab
spec:
  replicas: 4
  selector:
    matchLabels:
      app: api
  template:
    metadata:
      labels:
        app: api
    spec:
      containers:
      - name: app
        image: api:1
        ports:
        - containerPort: 8080
"""


def _plugin(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH holds ``kubectl-svcdoctor`` (this svcdoctor) for kubectl."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "kubectl-svcdoctor"
    plugin.write_text(f"#!{sys.executable}\nfrom svcdoctor.cli import main\nmain()\n")
    plugin.chmod(0o755)
    src = str(Path(__file__).resolve().parents[2] / "src")
    path = os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])
    pythonpath = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PATH": path, "PYTHONPATH": pythonpath, "HOME": str(tmp_path)}


@pytest.mark.lab
def test_investigate_names_the_race_and_fix_takes_its_diagnosis(
    race_watched: RaceWatched, tmp_path: Path
) -> None:
    """lab serve race with a rollout: the checklist carries steps 1, 2 and 4, the verdict is
    the race, diagnosis.json is what fix --from-diagnosis takes; through the real kubectl as
    a plugin, without --yes nothing is created and the skipped steps are listed. (The serve
    is shared with test_live_lab's race test, whose scan and collect only read: shared_labs.py.)"""
    from tests.cluster.test_live_lab import svcdoctor

    if race_watched.kubectl is None:
        pytest.skip(race_watched.why)
    done, out = race_watched.investigate, race_watched.investigated
    plugin, jobs = race_watched.plugin, race_watched.jobs
    assert plugin is not None
    assert jobs is not None
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"]["cause"] == "race"
    steps = {s["step"]: s for s in report["steps"]}
    assert {1, 2, 4} <= set(report["verdict"]["decided_by"])
    for n in (1, 2, 4):
        assert steps[n]["status"] == "found", steps[n]
        assert steps[n]["found"], steps[n]
    keys = {m["key"]: m for m in steps[1]["measures"]}
    assert keys["failure_rate"]["ci95"] is not None
    assert keys["tracks_deployments"]["value"] is True
    assert any(m["key"] == "race_window_seconds" for m in steps[2]["measures"])
    assert any(f.startswith("path: kube-proxy") for f in steps[2]["found"])
    assert any("preStop none" in f for f in steps[4]["found"])
    assert report["verdict"]["fixes"][0]["patch"] is not None
    diagnosis = out / "diagnosis.json"
    assert report["verdict"]["next_command"].endswith(f"--from-diagnosis {diagnosis} --write")
    plan = read_diagnosis(diagnosis).plan
    assert plan is not None
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(DEPLOYMENT)
    fixed = svcdoctor("fix", str(manifest), "--from-diagnosis", str(diagnosis))
    assert fixed.returncode == 1, fixed.stderr
    assert "+        lifecycle:" in fixed.stdout
    assert f"+              seconds: {plan.prestop_seconds}" in fixed.stdout
    assert (out / "report.html").read_text().count("Quantify") >= 1
    # the kubectl plugin: read-only, the skipped steps listed with their commands
    assert plugin.returncode in (0, 1, 3), plugin.stderr
    assert "Skipped active steps (nothing was created in the cluster):" in plugin.stdout
    assert "kubectl svcdoctor probe api --yes -n lab" in plugin.stdout
    assert "kubectl svcdoctor rollout-test deployment/api --service api --yes" in plugin.stdout
    assert jobs.returncode == 0, jobs.stderr
    created = [
        o["metadata"]["name"]
        for o in json.loads(jobs.stdout)["items"]
        if o["kind"] == "Job" or "svcdoctor" in json.dumps(o["metadata"].get("labels") or {})
    ]
    assert created == []


@pytest.mark.lab
def test_investigate_with_yes_and_rollout_runs_the_rollout_test(tmp_path: Path) -> None:
    from tests.cluster.test_live_lab import lab_serve, svcdoctor

    out = tmp_path / "inv"
    with lab_serve(tmp_path, "race", "--no-load") as kubeconfig:
        done = svcdoctor(
            "investigate", "--kubeconfig", str(kubeconfig), "api", "--out", str(out),
            "--yes", "--rollout", "--rate", "40", "--duration", "70", "-o", "json",
            timeout=300,
        )  # fmt: skip
        left = json.loads(
            svcdoctor("cleanup", "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json").stdout
        )["found"]
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["skipped"] == []
    assert report["verdict"]["cause"] == "race"
    lifecycle = report["steps"][1]
    assert any(c.startswith("rollout-test: deployment/api") for c in lifecycle["checked"])
    assert any(m["key"] == "rollout_race_window_seconds" for m in lifecycle["measures"])
    bypass = report["steps"][2]
    assert any(c.startswith("the direct probe") for c in bypass["checked"])
    assert (out / "rollout-test" / "collect.json").is_file()
    assert read_diagnosis(out / "diagnosis.json").plan is not None
    assert left == []
    shutil.rmtree(out)


@pytest.mark.lab
def test_investigate_with_yes_names_the_bad_pod_from_the_direct_probe(
    bad_backend: BadBackend,
) -> None:
    """investigate --yes after 8 s of load (and after test_live_lab's collect, which only
    reads, on the same serve: shared_labs.py)."""
    done, inv = bad_backend.investigate, bad_backend.investigated
    truth = bad_backend.truth
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"]["cause"] == "backend"
    assert 3 in report["verdict"]["decided_by"]
    bypass = report["steps"][2]
    assert bypass["status"] == "found"
    (bad,) = truth["bad_pods"]
    (probed,) = [f for f in bypass["found"] if f.startswith(f"probe {bad}: ")]
    assert probed.endswith("FAILS MORE")
    assert report["verdict"]["next_command"] == f"kubectl -n lab describe pod {bad}"
    # report.html draws the direct probe per backend, as probe --html does
    failed, sent = re.search(r": (\d+) of (\d+) failed directly", probed).groups()  # type: ignore[union-attr]
    page = (inv / "report.html").read_text()
    assert f"{bad} failed {int(failed):,} of {int(sent):,} requests" in page


@pytest.mark.lab
def test_investigate_the_fixed_rollout_finds_no_cause(rollouts_watched: RolloutsWatched) -> None:
    """investigate --watch-rollout 30s of race-fixed rolled 8 s after Ready (its serve runs
    beside test_live_lab's two scan serves: shared_labs.py)."""
    done = rollouts_watched.investigate
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"]["cause"] is None
    assert [s["status"] for s in report["steps"][:2]] == ["clear", "clear"]


def _stderr(api: Served, tmp_path: Path, tty: bool) -> tuple[int, str]:
    """``investigate`` of the served Service; its stderr (a terminal when ``tty``)."""
    _served(api)
    args = [sys.executable, "-m", "svcdoctor", "investigate", "--kubeconfig",
            str(api.kubeconfig), "-n", "shop", "api"]  # fmt: skip
    args += ["--out", str(tmp_path / f"i{tty}")]
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    if not tty:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=180, env=env, check=False
        )
        return done.returncode, done.stderr
    return stderr_on_terminal(args, env)


def test_investigate_shows_each_step_with_its_time_on_a_terminal(
    api: Served, tmp_path: Path
) -> None:
    code, err = _stderr(api, tmp_path, tty=True)
    assert code in (0, 1, 3), err
    steps = dict.fromkeys(re.findall(r"\[\s*(\d+\.\d) s\] == ([a-z]+)", err))
    assert [name for _, name in steps][:4] == ["live", "evidence", "diagnosis", "checklist"], err
    assert [float(t) for t, _ in steps] == sorted(float(t) for t, _ in steps)


def test_investigate_is_quiet_without_a_terminal(api: Served, tmp_path: Path) -> None:
    code, err = _stderr(api, tmp_path, tty=False)
    assert code in (0, 1, 3), err
    assert err == ""


def test_bad_flags_are_refused_before_the_cluster_is_read(tmp_path: Path) -> None:
    """A Prometheus URL that is none, or a rollout too short for its warm-up and tail, is
    a usage error at once (exit 2), not a note after minutes of reading the cluster."""
    missing = ["--kubeconfig", str(tmp_path / "nowhere"), "api"]
    bad_url = CliRunner().invoke(cli, ["investigate", *missing, "--prometheus", "notaurl"])
    assert bad_url.exit_code == 2
    assert "bad Prometheus URL 'notaurl'" in bad_url.output
    short = CliRunner().invoke(
        cli, ["investigate", *missing, "--yes", "--rollout", "--duration", "5"]
    )
    assert short.exit_code == 2
    assert "--duration 5s leaves no time for the rollout" in short.output
