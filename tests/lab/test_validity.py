"""A lab run checks its own ground truth, picks a datapath it is allowed to use, and leaves
no empty bundle behind (issue 16).

A run whose rollout did not happen as planned (no SIGTERM, no requests, no endpoint
change) proves nothing: it is invalid (exit 1, "run invalid: …"), never a verdict. The
options refuse NaN before a run starts; these tests hand the run such values directly,
as a bug in a caller would, to check the run's own guard."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.lab import kernel
from svcdoctor.lab.datapath import LabError
from svcdoctor.lab.run import RunInvalid, run
from svcdoctor.lab.scenarios import SCENARIOS

SHORT = replace(
    SCENARIOS["race"],
    replicas=1,
    nodes=1,
    baseline=1.0,
    tail=0.0,
    load=replace(SCENARIOS["race"].load, rate=20.0, clients=1),
)


def lab_dirs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("svcdoctor-lab-"))


@pytest.mark.lab
def test_a_run_without_sigterm_is_invalid(tmp_path: Path) -> None:
    """--prestop nan once made pods never see SIGTERM and the lab 'prove' there is no race."""
    broken = replace(SHORT, pod=replace(SHORT.pod, prestop=float("nan")))
    with pytest.raises(RunInvalid, match=r"^run invalid: .*(SIGTERM|never exited)"):
        asyncio.run(run(broken, "userspace", tmp_path / "b", 1))
    assert not (tmp_path / "b" / "lab.json").exists()  # no verdict's evidence either


@pytest.mark.lab
def test_a_run_without_requests_is_invalid(tmp_path: Path) -> None:
    broken = replace(SHORT, load=replace(SHORT.load, rate=float("nan")))
    with pytest.raises(RunInvalid, match=r"^run invalid: no request was sent"):
        asyncio.run(run(broken, "userspace", tmp_path / "b", 1))


@pytest.mark.lab
def test_a_valid_short_run_passes_its_checks(tmp_path: Path) -> None:
    result = asyncio.run(run(SHORT, "userspace", tmp_path / "b", 1))
    assert result.requests > 0
    assert (tmp_path / "b" / "lab.json").exists()


def test_invalid_is_exit_1_with_one_line_and_no_temporary_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def invalid(*args: Any, **kwargs: Any) -> Any:
        raise RunInvalid("run invalid: no request was sent (no verdict)")

    monkeypatch.setattr("svcdoctor.lab.run.run", invalid)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    done = CliRunner().invoke(cli, ["lab", "run", "--datapath", "userspace"])
    assert done.exit_code == 1
    assert done.output == "svcdoctor: error: run invalid: no request was sent (no verdict)\n"
    assert lab_dirs(tmp_path) == []


@pytest.mark.parametrize("error", [LabError("boom"), KeyboardInterrupt()])
def test_failed_or_interrupted_runs_leave_no_temporary_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr("svcdoctor.lab.run.run", failing)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    for command in (["run"], ["demo"]):
        done = CliRunner().invoke(cli, ["lab", *command, "--datapath", "userspace"])
        assert done.exit_code in (1, 130), done.output
        assert lab_dirs(tmp_path) == []


def test_missing_capabilities_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel.os, "geteuid", lambda: 0)
    monkeypatch.setattr(kernel.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    no_net_admin = (0x1FFFEFFFFFF) & ~(1 << kernel.CAP_NET_ADMIN)
    monkeypatch.setattr(kernel, "effective_capabilities", lambda: no_net_admin)
    reason = kernel.available()
    assert reason is not None
    assert "CAP_NET_ADMIN" in reason
    assert "CAP_SYS_ADMIN" not in reason
    monkeypatch.setattr(kernel, "effective_capabilities", lambda: 0x1FFFEFFFFFF)
    assert kernel.available() is None


def test_capabilities_are_read_from_proc_status() -> None:
    status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t0000000000001000\n"
    assert kernel.effective_capabilities(status) == 1 << kernel.CAP_NET_ADMIN
    assert kernel.effective_capabilities("Name:\tx\n") is None


def test_kernel_without_privileges_is_exit_2_with_the_alternative(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kernel, "available", lambda: "the kernel datapath needs CAP_NET_ADMIN")
    done = CliRunner().invoke(cli, ["lab", "run", "--datapath", "kernel"])
    assert done.exit_code == 2
    assert done.output == (
        "svcdoctor: error: the kernel datapath needs CAP_NET_ADMIN; --datapath userspace "
        "runs without privileges\n"
    )


def test_auto_falls_back_to_userspace_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []

    def run_one(scenario: Any, datapath: str, *args: Any) -> Any:
        seen.append(datapath)
        raise SystemExit(0)

    monkeypatch.setattr(kernel, "available", lambda: "the kernel datapath needs CAP_NET_ADMIN")
    monkeypatch.setattr(sys.modules["svcdoctor.cli.lab"], "_run_one", run_one)
    done = CliRunner().invoke(cli, ["lab", "run", "--datapath", "auto"])
    assert done.exit_code == 0
    assert seen == ["userspace"]
    assert done.output == (
        "note: using the userspace datapath: the kernel datapath needs CAP_NET_ADMIN\n"
    )


def test_auto_falls_back_when_the_kernel_refuses_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Root whose namespaces cannot be made (mount --make-shared /run/netns … not
    permitted): auto notes it and runs on userspace; kernel exits 2."""
    seen = []

    def run_one(scenario: Any, datapath: str, *args: Any) -> Any:
        seen.append(datapath)
        if datapath == "kernel":
            raise kernel.KernelUnavailable(
                "the kernel datapath is not allowed here (mount --make-shared /run/netns "
                "failed: Operation not permitted)"
            )
        raise SystemExit(0)

    monkeypatch.setattr(kernel, "available", lambda: None)
    monkeypatch.setattr(sys.modules["svcdoctor.cli.lab"], "_run_one", run_one)
    done = CliRunner().invoke(cli, ["lab", "run", "--datapath", "auto"])
    assert (done.exit_code, seen) == (0, ["kernel", "userspace"])
    assert done.output.startswith("note: using the userspace datapath: the kernel datapath is")
    seen.clear()
    done = CliRunner().invoke(cli, ["lab", "run", "--datapath", "kernel"])
    assert done.exit_code == 2
    assert "--datapath userspace runs without privileges" in done.output


def test_refusals_are_recognised() -> None:
    assert kernel._refused("mount --make-shared /run/netns failed: Operation not permitted")
    assert not kernel._refused("RTNETLINK answers: File exists")


CAPSH = shutil.which("capsh")


@pytest.mark.lab
@pytest.mark.skipif(os.geteuid() != 0 or CAPSH is None, reason="needs root and capsh")
def test_root_without_net_admin_for_real(tmp_path: Path) -> None:
    """A real root process without CAP_NET_ADMIN/CAP_SYS_ADMIN (as in an unprivileged
    container): kernel exits 2 naming the capability; auto runs on userspace."""
    assert CAPSH is not None

    def lab(*args: str) -> subprocess.CompletedProcess[str]:
        command = " ".join([sys.executable, "-m", "svcdoctor", "lab", "run", *args])
        return subprocess.run(
            [CAPSH, "--drop=cap_net_admin,cap_sys_admin", "--", "-c", command],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=tmp_path,
        )

    refused = lab("--datapath", "kernel")
    assert refused.returncode == 2, refused.stderr
    assert "CAP_NET_ADMIN" in refused.stderr
    assert "--datapath userspace" in refused.stderr
    quick = "--replicas 1 --nodes 1 --baseline 1 --tail 0 --rate 20 --clients 1 -o json"
    fallback = lab("--datapath", "auto", *quick.split(), "--out", str(tmp_path / "b"))
    assert fallback.returncode == 0, fallback.stderr
    assert fallback.stderr.startswith("note: using the userspace datapath:")
    assert '"datapath": "userspace"' in fallback.stdout
