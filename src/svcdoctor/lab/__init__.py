"""The lab: a small but real Service on this machine, to reproduce each cause and prove
each fix (pods as processes, kube-proxy-style routing, rollouts under load).

The names below load on first use: a pod process (``python -m svcdoctor.lab.pod``) imports
this package and must start fast, without polars.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from svcdoctor.lab.datapath import LabError
    from svcdoctor.lab.run import RunResult, run
    from svcdoctor.lab.scenarios import SCENARIOS, Scenario

_HOME = {
    "LabError": "svcdoctor.lab.datapath",
    "RunResult": "svcdoctor.lab.run",
    "run": "svcdoctor.lab.run",
    "SCENARIOS": "svcdoctor.lab.scenarios",
    "Scenario": "svcdoctor.lab.scenarios",
}

__all__ = ["SCENARIOS", "LabError", "RunResult", "Scenario", "run"]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
