"""Which lab runs a test's own process started (another test's lab may start one at the
same time: the xdist groups run two labs at once)."""

from __future__ import annotations

from pathlib import Path

from svcdoctor.lab.cleanup import job_processes


def runs_started_by(ancestor: int) -> set[str]:
    """The run prefixes of the lab's job processes that descend from ``ancestor``."""
    return {run for pid, run in job_processes().items() if _descends(pid, ancestor)}


def _descends(pid: int, ancestor: int) -> bool:
    """Whether process ``pid`` is ``ancestor`` or one of its descendants (by /proc's ppid)."""
    for _ in range(64):
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state
        if pid <= 1:
            return False
    return False
