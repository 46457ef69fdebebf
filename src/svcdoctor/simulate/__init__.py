"""``svcdoctor simulate``: the endpoint-removal race (and the other causes) at cluster scale.

A vectorised model of one window of traffic through a Service during a rolling update, a
node drain or a scale-down: every node's kube-proxy, ingress controllers and a cloud LB
(IP mode: its leg and its deregistration delay) with their own propagation delays, the
pods' mesh sidecars' drain, the kubelet's preStop/SIGTERM/SIGKILL, clients with new,
keep-alive or HTTP/2 connections, retries, bad backends and full conntrack tables.
"""

from svcdoctor.model.dist import Dist, DistError, parse_dist
from svcdoctor.model.scenario import Propagation
from svcdoctor.simulate.engine import CAUSE_OF, MECHANISMS, Mechanism, Run, simulate_run
from svcdoctor.simulate.params import ParamError, SimParams, resolve_count
from svcdoctor.simulate.recommend import SLEEP_ACTION, Recommendation, recommend
from svcdoctor.simulate.summary import (
    Quantiles,
    Router,
    RunSummary,
    Simulation,
    Timeline,
    simulate,
)

__all__ = [
    "CAUSE_OF",
    "MECHANISMS",
    "SLEEP_ACTION",
    "Dist",
    "DistError",
    "Mechanism",
    "ParamError",
    "Propagation",
    "Quantiles",
    "Recommendation",
    "Router",
    "Run",
    "RunSummary",
    "SimParams",
    "Simulation",
    "Timeline",
    "parse_dist",
    "recommend",
    "resolve_count",
    "simulate",
    "simulate_run",
]
