"""The lab's ingress is a real nginx (``lab/nginx.py``): its config is what nginx accepts,
and the keep-alive mismatch through it gives nginx's own 502 lines, which ``diagnose``
reads as reuse; the fix gives none. The runs need nginx (CI installs it); on the kernel
datapath where it can run (root, netns), else on userspace. A run interrupted with Ctrl-C
leaves no nginx behind."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.evidence import read_evidence
from svcdoctor.lab import nginx
from svcdoctor.lab.cleanup import job_processes, leftovers, lock_dir, pod_processes
from svcdoctor.lab.datapath import Backend, UserspaceDatapath
from svcdoctor.lab.kernel import available as kernel_missing
from svcdoctor.lab.kernel import namespaces_of_runs
from svcdoctor.lab.nginx import UPSTREAMINFO, IngressSpec, Nginx, available, config
from svcdoctor.lab.pod import NOBODY
from svcdoctor.lab.scenarios import SCENARIOS
from tests.lab.procs import runs_started_by

NGINX_MISSING = available()
DATAPATH = "userspace" if kernel_missing() else "kernel"
SVCDOCTOR = [sys.executable, "-m", "svcdoctor"]
QUICK = ("--baseline", "2", "--duration", "10")  # about 12 failures in the bad case


def command(name: str, out: Path, *extra: str) -> list[str]:
    """``svcdoctor lab run`` of scenario ``name``, quick, into ``out``."""
    run = [*SVCDOCTOR, "lab", "run", "--scenario", name, "--datapath", DATAPATH]
    return [*run, *QUICK, "--out", str(out), *extra]


PREMATURE = re.compile(
    r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[error\] \d+#\d+: \*\d+ upstream prematurely closed "
    r"connection while reading response header from upstream, client: \S+, server: , "
    r'request: "GET / HTTP/1.1", upstream: "http://[\d.]+:\d+/"'
)
needs_nginx = pytest.mark.skipif(NGINX_MISSING is not None, reason=str(NGINX_MISSING))


def test_the_access_log_format_is_ingress_nginx_s() -> None:
    """Copied from https://kubernetes.github.io/ingress-nginx/user-guide/nginx-configuration/log-format/."""
    words = re.sub(r"'\s*'|'", "", UPSTREAMINFO).split()
    assert " ".join(words) == (
        '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
        '"$http_referer" "$http_user_agent" $request_length $request_time '
        "[$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr "
        "$upstream_response_length $upstream_response_time $upstream_status $req_id"
    )


def test_a_bad_next_upstream_is_refused() -> None:
    with pytest.raises(ValueError, match="proxy_next_upstream"):
        IngressSpec(next_upstream="error sometimes")
    with pytest.raises(ValueError, match="proxy_next_upstream"):
        IngressSpec(next_upstream="off error")


@needs_nginx
@pytest.mark.parametrize("backends", [0, 3])
def test_nginx_accepts_the_config(tmp_path: Path, backends: int) -> None:
    pods = [Backend(f"api-{i}", f"10.233.1.{10 + i}", 8080) for i in range(backends)]
    text = config(IngressSpec(), pods, ("127.0.0.1", 18080), tmp_path)
    (tmp_path / "nginx.conf").write_text(text)
    done = subprocess.run(
        ["nginx", "-t", "-p", f"{tmp_path}/", "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if backends:
        assert "keepalive 320;" in text
        assert 'proxy_set_header Connection "";' in text
        assert "proxy_next_upstream error timeout;" in text
    else:
        assert "return 503;" in text


def test_without_nginx_the_run_stops_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nginx, "available", lambda: "the nginx ingress needs nginx (apt-get …)")
    dp = nginx.IngressDatapath(UserspaceDatapath(), IngressSpec(), tmp_path)
    with pytest.raises(nginx.NginxUnavailable, match="needs nginx") as caught:
        asyncio.run(dp.start(2))
    assert caught.value.exit_code == 2
    assert dp.nginx is None


def lab_run(name: str, folder: Path) -> tuple[dict[str, Any], Path]:
    bundle = folder / name
    done = subprocess.run(
        command(name, bundle, "--format", "json"),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), bundle


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], Path]]:
    if NGINX_MISSING:
        pytest.skip(NGINX_MISSING)
    folder = tmp_path_factory.mktemp("nginx")
    names = ("keepalive", "keepalive-fixed")
    before = leftovers()  # other runs on this machine are left alone
    with ThreadPoolExecutor(len(names)) as pool:
        done = list(pool.map(lambda name: lab_run(name, folder), names))
    after = leftovers()  # of runs that ended: namespaces, pods, nginx, lock files
    assert set(after.namespaces) <= set(before.namespaces)
    assert set(after.processes) <= set(before.processes)
    assert set(after.folders) <= set(before.folders)
    return dict(zip(names, done, strict=True))


@pytest.mark.lab
def test_the_mismatch_gives_nginx_s_own_502s(runs: dict[str, tuple[dict[str, Any], Path]]) -> None:
    out, bundle = runs["keepalive"]
    failed = out["failed"]
    assert failed >= 5, out
    assert out["by_outcome"] == {"ok": out["requests"] - failed, "http_error": failed}
    errors = (bundle / "ingress-nginx" / "error.log").read_text().splitlines()
    assert sum(1 for ln in errors if PREMATURE.match(ln)) == failed
    assert not [ln for ln in errors if "[error]" in ln and not PREMATURE.match(ln)]
    access = (bundle / "ingress-nginx" / "access.log").read_text().splitlines()
    assert len(access) == out["requests"]
    assert sum(1 for ln in access if '" 502 ' in ln and ln.endswith(tuple("0123456789abcdef"))) == (
        failed
    )
    combined = (bundle / ".lab" / "access-combined.log").read_text().splitlines()
    assert len(combined) == len(access)
    truth = json.loads((bundle / "lab.json").read_text())["ingress"]
    assert truth["upstream_errors"] == {"upstream prematurely closed connection": failed}
    assert truth["statuses"]["502"] == failed
    assert len(truth["reloads"][-1]["upstreams"]) == SCENARIOS["keepalive"].replicas
    assert truth["settings"]["next_upstream"] == "off"


@pytest.mark.lab
def test_diagnose_names_reuse_from_nginx_s_own_logs(
    runs: dict[str, tuple[dict[str, Any], Path]],
) -> None:
    out, bundle = runs["keepalive"]
    assert out["diagnosis"]["primary_cause"] == "reuse"  # the bundle: nginx's logs + kubectl
    done = subprocess.run(
        [*SVCDOCTOR, "diagnose", str(bundle / "ingress-nginx"), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    verdict = json.loads(done.stdout)
    assert verdict["primary_cause"] == "reuse", done.stderr
    reuse = next(c for c in verdict["causes"] if c["cause"] == "reuse")
    assert any("upstream prematurely closed" in e for e in reuse["evidence"]), reuse
    # nginx's combined format is read too (no upstream fields: a row per request)
    rows = read_evidence([str(bundle / ".lab" / "access-combined.log")]).requests
    assert rows.height == out["requests"]
    assert int((rows.get_column("status") == 502).sum()) == out["failed"]


@pytest.mark.lab
def test_the_fix_leaves_nginx_nothing_to_retry(
    runs: dict[str, tuple[dict[str, Any], Path]],
) -> None:
    out, bundle = runs["keepalive-fixed"]
    assert out["failed"] == 0
    assert out["requests"] >= 20
    assert out["diagnosis"]["primary_cause"] is None
    assert "[error]" not in (bundle / "ingress-nginx" / "error.log").read_text()


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    """What an exited run wrote to stderr (nothing while it runs)."""
    if proc.poll() is None or proc.stderr is None:
        return ""
    return proc.stderr.read().decode(errors="replace")[-2000:]


def worker(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"nginx: worker")
    except OSError:  # gone meanwhile (a reload replaces the workers)
        return False


def uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[1])


@needs_nginx
@pytest.mark.lab
def test_ctrl_c_leaves_no_nginx_behind(tmp_path: Path) -> None:
    others = set(job_processes().values())  # other runs on this machine
    proc = subprocess.Popen(
        command("keepalive", tmp_path / "bundle"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    end = time.monotonic() + 60
    ours: set[str] = set()
    while not ours and time.monotonic() < end and proc.poll() is None:
        # this run's: another test's lab may start a run meanwhile (the xdist groups)
        ours = runs_started_by(proc.pid) - others
        time.sleep(0.1)
    assert len(ours) == 1, "nginx never started"
    time.sleep(1.0)  # nginx serves, the pods start
    if os.geteuid() == 0:  # its workers serve as nobody (forked a moment after the master)
        workers: list[int] = []
        end = time.monotonic() + 60
        while not workers and time.monotonic() < end and proc.poll() is None:
            workers = [pid for pid, r in job_processes().items() if r in ours and worker(pid)]
            time.sleep(0.1)
        assert workers, f"no nginx worker seen (run exited {proc.poll()}): {ours} {_stderr(proc)}"
        assert all(uid(pid) == NOBODY for pid in workers)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 128 + signal.SIGINT
    (run,) = ours
    assert run not in set(job_processes().values())
    assert not [ns for ns in namespaces_of_runs() if ns.startswith(f"{run}-")]
    assert not [p for p, (r, _, _) in pod_processes().items() if r == run]
    assert not (lock_dir() / f"{run}-jobs").exists()


def test_slice_changes_within_the_sync_delay_make_one_reload(tmp_path: Path) -> None:
    """The controller's sync: changes join the pending one; the reload (SIGHUP to the
    master) comes ``sync_delay`` after the first, with the latest endpoints."""

    async def main() -> tuple[Nginx, float]:
        proxy = Nginx(IngressSpec(sync_delay=0.3), tmp_path, ("127.0.0.1", 18080))
        proxy.process = subprocess.Popen(["sleep", "30"])  # stands in for the master
        pods = [Backend(f"api-{i}", f"10.233.1.{10 + i}", 8080) for i in range(3)]
        first = time.time()
        for n in (1, 2, 3):
            proxy.watch(pods[:n])
            await asyncio.sleep(0.05)
        proxy.watch(pods)  # no change: nothing more
        await asyncio.sleep(0.5)
        proxy.process.wait(timeout=5)
        return proxy, first

    proxy, first = asyncio.run(main())
    assert [pods for _, pods in proxy.reloads] == [("api-0", "api-1", "api-2")]
    assert proxy.reloads[0][0] >= first + 0.3
    assert proxy.process is not None
    assert proxy.process.returncode == -signal.SIGHUP
    text = (tmp_path / "nginx.conf").read_text()
    assert text.count("max_fails=0;") == 3
    assert proxy.settled
