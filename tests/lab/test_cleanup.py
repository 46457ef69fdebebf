"""A lab run cleans up after itself on Ctrl-C and SIGTERM; after a SIGKILL its pods die with
it and ``svcdoctor lab clean`` removes what is left, leaving runs still going alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from svcdoctor.lab.cleanup import leftovers, pod_processes
from svcdoctor.lab.kernel import available, namespaces_of_runs
from tests.conftest import deliberate_leftovers

pytestmark = pytest.mark.lab
DATAPATH = "userspace" if available() else "kernel"
SVCDOCTOR = (sys.executable, "-m", "svcdoctor")


@contextmanager
def running(folder: Path) -> Iterator[subprocess.Popen[str]]:
    """A ``lab run`` whose four pods are up."""
    proc = subprocess.Popen(
        [*SVCDOCTOR, "lab", "run", "--datapath", DATAPATH, "--out", str(folder), "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        end = time.time() + 30
        while len(pods_of(proc.pid)) < 4:
            assert proc.poll() is None, proc.communicate()
            assert time.time() < end, "the run's pods did not start"
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def pods_of(lab: int) -> list[int]:
    return [pid for pid, (_, parent, _) in pod_processes().items() if parent == lab]


def prefix_of(lab: int) -> str:
    """The run prefix of the lab process ``lab``, as its pods name it."""
    return next(run for run, parent, _ in pod_processes().values() if parent == lab)


def namespaces_of(run: str) -> list[str]:
    """The network namespaces of the run ``run`` (other labs on the machine are not ours)."""
    return [ns for ns in namespaces_of_runs() if ns.startswith(f"{run}-")]


def gone(pids: list[int], within: float = 5.0) -> bool:
    end = time.time() + within
    while time.time() < end:
        if not set(pids) & set(pod_processes()):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGINT,), (signal.SIGTERM,), (signal.SIGINT, signal.SIGINT)],
    ids=["ctrl-c", "sigterm", "ctrl-c-twice"],
)
def test_an_interrupted_run_removes_everything(
    tmp_path: Path, signals: tuple[signal.Signals, ...]
) -> None:
    sig = signals[0]
    with running(tmp_path / "bundle") as proc:
        pods = pods_of(proc.pid)
        for each in signals:
            proc.send_signal(each)
            time.sleep(0.2)  # the second one arrives while the run cleans up
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 128 + sig
        assert err.strip() == (
            "svcdoctor: error: interrupted; the run's namespaces, rules and processes were removed"
        )
    assert gone(pods, within=0.5)
    assert not leftovers()  # what the run left would be a dead run's


def test_a_killed_run_is_cleaned_by_lab_clean(tmp_path: Path) -> None:
    with deliberate_leftovers(), running(tmp_path / "bundle") as proc:
        pods = pods_of(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        assert gone(pods)  # PDEATHSIG: the pods die with their lab
        left = leftovers()
        namespaces = 0 if DATAPATH == "userspace" else 3 + 4  # fabric, 2 nodes, 4 pods
        assert len(left.namespaces) == namespaces
        assert len(left.locks) == 1
        done = subprocess.run(
            [*SVCDOCTOR, "lab", "clean"],
            capture_output=True,
            text=True,
            check=True,
        )
    expected = f"removed {namespaces} network namespaces, 0 pod processes and 1 stale lock files"
    assert done.stdout.strip() == expected
    assert not leftovers()


def test_lab_clean_leaves_a_live_run_alone(tmp_path: Path) -> None:
    with running(tmp_path / "bundle") as proc:
        assert not leftovers()
        run = prefix_of(proc.pid)
        if DATAPATH == "kernel":
            assert len(namespaces_of(run)) == 7
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert namespaces_of(run) == []
