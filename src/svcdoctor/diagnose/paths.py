"""The path in a diagnosis: the paths of the workloads in the manifests given with the
evidence, and which leg the measured race window is compared to (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from svcdoctor.model.diagnosis import RaceDetails
from svcdoctor.model.pathreport import WorkloadPaths


def window_lines(details: RaceDetails | None, shown: Sequence[WorkloadPaths]) -> list[str]:
    """One sentence per workload whose path holds more than the datapath: the measured
    window's upper bound (what the remedy's preStop covers) against the leg lint's preStop
    advice covers (the slowest sender's, or the cluster's propagation). None without a
    measured window."""
    window = details.window if details is not None else None
    if window is None:
        return []
    high = window.plan_seconds if window.plan_seconds is not None else window.ci95[1]
    lines = []
    for w in shown:
        if not w.beyond_datapath:
            continue
        head = (
            f"path of {w.workload}: the measured race window (95 % upper bound {high:g} s) is "
            f"compared with {w.cover_text()}"
        )
        if high >= w.covered.seconds:
            lines.append(f"{head}: it covers that leg and every shorter one on the path")
        else:
            lines.append(
                f"{head}: the window is shorter. If the evidence holds that hop's requests, "
                "its leg is shorter than assumed (say so in [tool.svcdoctor.hops]); if it "
                "holds another hop's, the preStop planned from the window does not cover "
                "it: svcdoctor lint plans for the path"
            )
    return lines
