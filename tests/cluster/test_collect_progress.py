"""``collect --watch`` shows its progress on a terminal (the watch window's elapsed time and
the events seen, under a spinner) and nothing when stderr is not a terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from rich.console import Console

from svcdoctor.cli._progress import terminal_progress
from svcdoctor.cluster import WatchEvent
from tests.cluster.conftest import Served
from tests.cluster.test_collect import _fixture_objects, play_rollout

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


class _Reader:
    namespace = "shop"

    def watch(self, *_: object, **__: object) -> object:
        for i in range(3):
            yield WatchEvent("ADDED", {"n": i}, time.time())


def test_the_display_counts_the_events_of_the_watch_window() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with terminal_progress(True, 60, console=console) as display:
        display.step("3 pods, 1 endpointslices")
        reader = display.wrap(_Reader())  # type: ignore[arg-type]
        assert reader.namespace == "shop"
        assert len(list(reader.watch("pods"))) == 3
        time.sleep(0.6)  # a refresh
    text = ANSI.sub("", out.getvalue())
    assert "3 pods, 1 endpointslices" in text
    assert "0 s of 60 s, 3 events" in text
    silent = _Reader()
    with terminal_progress(False, 60) as display:
        assert display.wrap(silent) is silent  # type: ignore[arg-type]
        display.step("nothing shown")


def _run(api: Served, tmp_path: Path, tty: bool) -> tuple[int, str]:
    """``collect --watch 3`` while a rollout happens; its stderr (a terminal when ``tty``)."""
    for obj in _fixture_objects():
        api.put(obj)

    args = [sys.executable, "-m", "svcdoctor", "collect", "--kubeconfig", str(api.kubeconfig),
            "-n", "shop", "api", "--out", str(tmp_path / f"b{tty}"), "--watch", "3"]  # fmt: skip
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    mutator = threading.Thread(target=play_rollout, args=(api,))
    if not tty:
        mutator.start()
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=120, env=env, check=False
        )
        mutator.join()
        return done.returncode, done.stderr
    return stderr_on_terminal(args, env, mutator)


def stderr_on_terminal(
    args: list[str], env: dict[str, str], during: threading.Thread | None = None
) -> tuple[int, str]:
    """Run ``args`` with stderr on a pseudo-terminal (``during`` runs meanwhile): its exit
    code and what it wrote there, without ANSI codes."""
    main, side = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=side, env=env)
    os.close(side)
    if during is not None:
        during.start()
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    if during is not None:
        during.join()
    os.close(main)
    return proc.wait(timeout=60), ANSI.sub("", b"".join(chunks).decode(errors="replace"))


def test_collect_watch_shows_progress_on_a_terminal(api: Served, tmp_path: Path) -> None:
    code, err = _run(api, tmp_path, tty=True)
    assert code == 0, err
    assert "watching" in err
    seen = [int(n) for n in re.findall(r"\d+ s of 3 s, (\d+) events?", err)]
    assert seen, err
    assert max(seen) >= 4  # the listed objects and the rollout's changes


def test_collect_watch_is_quiet_without_a_terminal(api: Served, tmp_path: Path) -> None:
    code, err = _run(api, tmp_path, tty=False)
    assert code == 0, err
    assert err == ""
