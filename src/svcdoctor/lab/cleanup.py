"""What lab runs leave behind when they cannot clean up (a SIGKILL, a power cut): network
namespaces and pod processes, told apart from those of runs still going.

A run holds an exclusive ``flock`` on ``LOCK_DIR/<prefix>.lock`` while it lives; the kernel
drops the lock when the process dies, however it dies. Pod processes carry the run's prefix
and their parent's pid on their command line, and die with their parent (``PDEATHSIG``); one
whose parent is gone is an orphan. The processes ``lab serve`` runs for its API clients' Jobs
and pods (``jobs.py``) work in ``LOCK_DIR/<prefix>-jobs/<pod>/`` and run files from there:
one of a run that no longer holds its lock is an orphan, and so is that directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from svcdoctor.lab.kernel import PREFIX_PATTERN, namespaces_of_runs, remove_namespaces

POD_MODULE = "svcdoctor.lab.pod"
JOBS_DIR = re.compile(r"/(svcd[0-9a-f]{6})-jobs(/|$)")  # jobs.jobs_directory()


def lock_dir() -> Path:
    return Path("/run/svcdoctor") if os.geteuid() == 0 else Path(tempfile.gettempdir())


@contextlib.contextmanager
def claim(prefix: str) -> Iterator[None]:
    """Mark the run ``prefix`` as alive for as long as the block runs."""
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{prefix}.lock"
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def alive(prefix: str) -> bool:
    """Whether the run ``prefix`` still holds its lock."""
    path = lock_dir() / f"{prefix}.lock"
    try:
        handle = path.open("r")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


@dataclass(frozen=True, slots=True)
class Leftovers:
    namespaces: tuple[str, ...]
    processes: tuple[int, ...]
    locks: tuple[Path, ...]  # lock files of runs that died without removing them
    folders: tuple[Path, ...] = ()  # the Job pods' directories of dead runs

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.processes or self.locks or self.folders)


def pod_processes() -> dict[int, tuple[str, int | None, int]]:
    """Every lab pod process on the machine: pid → (run prefix, parent named on its command
    line, actual parent)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if POD_MODULE not in args:
            continue
        named = _value(args, "--parent")
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        found[int(entry.name)] = (
            _value(args, "--run") or "",
            int(named) if named and named.isdigit() else None,
            ppid,
        )
    return found


def job_processes() -> dict[int, str]:
    """Every process the lab runs for a Job or pod of its API clients: pid → run prefix
    (from its files or working directory under ``LOCK_DIR/<prefix>-jobs/``)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        match = JOBS_DIR.search(args) or JOBS_DIR.search(cwd + "/")
        if match and POD_MODULE not in args:
            found[int(entry.name)] = match.group(1)
    return found


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args[:-1] else None


def leftovers() -> Leftovers:
    """Namespaces of runs that no longer hold their lock, pod processes whose parent is
    gone, and the dead runs' lock files."""
    namespaces = tuple(ns for ns in namespaces_of_runs() if not alive(ns.split("-", 1)[0]))
    folder = lock_dir()
    locks = tuple(
        path
        for path in (sorted(folder.glob("svcd*.lock")) if folder.is_dir() else [])
        if PREFIX_PATTERN.match(f"{path.stem}-") and not alive(path.stem)
    )
    orphans = tuple(
        pid
        for pid, (run, named, ppid) in pod_processes().items()
        if PREFIX_PATTERN.match(f"{run}-") and named != ppid
    )
    jobs = tuple(pid for pid, run in job_processes().items() if not alive(run))
    folders = tuple(
        path
        for path in (sorted(folder.glob("svcd*-jobs")) if folder.is_dir() else [])
        if JOBS_DIR.search(f"/{path.name}") and not alive(path.name.removesuffix("-jobs"))
    )
    return Leftovers(namespaces, orphans + jobs, locks, folders)


def remove(found: Leftovers) -> None:
    for pid in found.processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    remove_namespaces(list(found.namespaces))
    for path in found.locks:
        path.unlink(missing_ok=True)
    for path in found.folders:
        shutil.rmtree(path, ignore_errors=True)
