"""The lab: a small but real Service on this machine, to reproduce each cause and prove
each fix (pods as processes, kube-proxy-style routing, rollouts under load)."""

from svcdoctor.lab.datapath import LabError
from svcdoctor.lab.run import RunResult, run
from svcdoctor.lab.scenarios import SCENARIOS, Scenario

__all__ = ["SCENARIOS", "LabError", "RunResult", "Scenario", "run"]
