"""SVD105's model of the shells, checked against the real ones: for each script, run
``<shell> -c <script>`` and read /proc to see whether the shell replaced itself with the
command (exec) or stayed its parent; the rule's decision must match.

dash and bash are Debian's; busybox comes from the `busybox` package (installed by .ci/run).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from svcdoctor.checks._scripts import parse_script
from svcdoctor.checks.shells import shell_family, stays_parent

SHELLS = {"bash": ["bash"], "dash": ["dash"], "ash": ["busybox", "ash"]}

# Scripts of one simple command: the rule must match each shell exactly.
LONE = [
    "APP 30",
    "APP 30;",
    "  APP 30  ",
    "APP 30\n",
    "APP 30 \n",
    "APP 30\n\n",
    "APP 30 # a comment\n",
    "FOO=1 BAR=2 APP 30",
    "APP 30 >/dev/null 2>&1",
    "APP 30 </dev/null",
    "APP $(echo 30)",
    "A='x;y' APP \"30\"",
    'APP 30 "$(echo 1;)"',
    "exec APP 30",
    "exec APP 30\n",
]
# Lists, pipelines, background jobs, compound commands: flagged in dash unless the last
# command is exec'd. bash 5.1+ and busybox ash exec the last command of some of them (bash's
# model must match a bash >= 5.1 exactly; older ones exec none: ``OLD_BASH``).
COMPOUND = [
    "true; APP 30",
    "true && APP 30",
    "false || APP 30",
    "true\nAPP 30",
    "true\nAPP 30\n",
    "cd / && APP 30",
    "set -e; export A=1; APP 30",
    "APP 30 | cat",
    "APP 30 & wait",
    "{ APP 30; }",
    "(APP 30)",
    "if true; then APP 30; fi",
    "true; exec APP 30",
    "cd / && exec APP 30",
    "set -e\necho start >&2\nexec APP 30\n",
    "if true; then true && if true; then true; fi; exec APP 30; fi",
    "if true; then if false; then true; fi; APP 30; fi",
]


def _bash_at_least_5_1() -> bool:
    out = subprocess.run(
        ["bash", "-c", "echo ${BASH_VERSINFO[0]} ${BASH_VERSINFO[1]}"],
        capture_output=True,
        text=True,
        check=True,
    )
    major, minor = map(int, out.stdout.split())
    return (major, minor) >= (5, 1)


def _installed(shell: str) -> bool:
    return shutil.which(SHELLS[shell][0]) is not None


def reality(shell: list[str], script: str, app: Path) -> str:
    """``exec`` when the shell's own process becomes the app, ``parent`` when the app runs
    as its child."""
    proc = subprocess.Popen(
        [*shell, "-c", script.replace("APP", str(app))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.02)
            if Path(f"/proc/{proc.pid}/comm").read_text().strip() == app.name:
                return "exec"
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            for child in children:
                comm = Path(f"/proc/{child}/comm")
                if comm.exists() and comm.read_text().strip() == app.name:
                    return "parent"
        return "unknown"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the session this test started, by its id
        proc.wait()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of sleep under a name no shell has a builtin or applet for."""
    path = tmp_path_factory.mktemp("bin") / "svdapp"
    sleep = shutil.which("sleep")
    assert sleep
    shutil.copy(sleep, path)
    return path


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("script", LONE + COMPOUND)
@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_rule_matches_the_real_shell(shell: str, script: str, app: Path) -> None:
    if not _installed(shell):
        pytest.skip(f"{SHELLS[shell][0]} is not installed (apt-get install {SHELLS[shell][0]})")
    real = reality(SHELLS[shell], script, app)
    assert real in ("exec", "parent"), f"{shell} -c {script!r}: could not observe the app"
    flagged = stays_parent(shell, parse_script(script))
    if not flagged:
        assert real == "exec", f"{shell} -c {script!r}: rule says exec'd, the shell stays"
    elif script in LONE or (shell == "bash" and _bash_at_least_5_1()):
        assert real == "parent", f"{shell} -c {script!r}: rule flags it, the shell execs"
    # A flagged compound script may be exec'd by this shell version (see COMPOUND).


def test_dash_keeps_even_a_lone_command_and_explicit_exec_always_works() -> None:
    assert stays_parent("dash", parse_script("APP 30"))
    for family in ("bash", "dash", "ash", None):
        assert not stays_parent(family, parse_script("./migrate && exec ./server"))
        assert stays_parent(family, parse_script("./server | tee log"))
    assert not stays_parent("bash", parse_script("cd /data && ./server"))
    assert stays_parent("bash<5.1", parse_script("cd /data && ./server"))
    assert not stays_parent("bash<5.1", parse_script("./server"))


@pytest.mark.parametrize(
    ("shell", "image", "family"),
    [
        ("bash", "alpine:3.20", "bash"),
        ("dash", "example/app:1", "dash"),
        ("sh", "alpine:3.20", "ash"),
        ("sh", "node:20-alpine", "ash"),
        ("sh", "busybox:1.36", "ash"),
        ("sh", "docker.io/curlimages/curl:8.16.0", "ash"),
        ("sh", "gcr.io/distroless/base:debug", "ash"),
        ("sh", "debian:12", "dash"),
        ("sh", "ubuntu:24.04", "dash"),
        ("sh", "python:3.12-slim", "dash"),
        ("sh", "nginx:1.27", "dash"),
        ("sh", "docker.io/library/postgres:16", "dash"),
        ("sh", "bitnami/redis:7.2", "dash"),
        ("sh", "registry.access.redhat.com/ubi9/ubi-minimal:9.4", "bash"),
        ("sh", "quay.io/centos/centos:stream9", "bash"),
        ("sh", "amazonlinux:2023", "bash"),
        ("sh", "example/app:1", None),
        ("bash", "zookeeper:3.8.4", "bash"),
        ("bash", "python:3.8-buster", "bash<5.1"),
        ("bash", "centos:7", "bash<5.1"),
        ("sh", "registry.access.redhat.com/ubi8/ubi-minimal:8.9", "bash<5.1"),
        ("sh", "amazonlinux:2", "bash<5.1"),
        ("bash", "ubuntu:focal", "bash<5.1"),
        ("zsh", "example/app:1", None),
    ],
)
def test_shell_family(shell: str, image: str, family: str | None) -> None:
    assert shell_family(shell, image) == family
