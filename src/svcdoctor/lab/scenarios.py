"""The lab's scenarios: each reproduces one cause (or its fix) with known ground truth."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from svcdoctor.lab.names import NAMESPACE, SERVICE
from svcdoctor.lab.nginx import IngressSpec
from svcdoctor.model.dist import Dist, DistKind
from svcdoctor.model.finding import ObjectRef
from svcdoctor.model.hops import DEFAULT_DEREGISTRATION_SECONDS, Hop, Implementation, Leg
from svcdoctor.model.remedy import HopChange, HopSetting, ShutdownFacts, plan_hops, plan_shutdown
from svcdoctor.model.scenario import (
    LAB_PROPAGATION,
    ConnectionMode,
    Event,
    LoadBalancerSpec,
    LoadSpec,
    PodSpec,
    ScenarioSpec,
    ShutdownMode,
)

if TYPE_CHECKING:
    from svcdoctor.lab.datapath import Datapath


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario(ScenarioSpec):
    """A :class:`ScenarioSpec` the lab runs: its name, the cause diagnose must find in it
    (``expect``, None: no cause), how long each phase lasts, and a node fault."""

    name: str
    expect: str | None
    baseline: float = 5.0  # seconds of load before the rollout
    tail: float = 5.0  # seconds of load after the last pod is gone
    steady: float = 10.0  # seconds of load without a rollout
    pause: float = 3.0  # between deletions of the rollout (each one's failures apart)
    broken_node: int | None = None  # this node's route to the Service fails broken_share
    broken_share: float = 0.0  # of the new connections (kernel: REJECT, userspace: reset)
    ingress: IngressSpec | None = None  # the clients go through a real nginx (lab/nginx.py)
    description: str = ""

    def __post_init__(self) -> None:
        ScenarioSpec.__post_init__(self)
        if self.propagation.override is None:
            raise ValueError("a lab scenario's propagation is one delay (override)")
        if self.ingress is not None and self.lb is not None:
            raise ValueError(
                "a lab scenario has an ingress or a load balancer in IP mode, not both"
            )

    @property
    def delay(self) -> Dist:
        """Each node's delay to apply an endpoint change (drawn per node and change)."""
        assert self.propagation.override is not None  # see __post_init__
        return self.propagation.override

    @property
    def broken_nodes(self) -> tuple[str, ...]:
        """The nodes whose route to the Service is broken (ground truth, by node name)."""
        return () if self.broken_node is None else (f"node-{self.broken_node}",)

    @property
    def drained(self) -> tuple[int, ...]:
        """A drain's victims: node 0's pods (pod ``j`` runs on node ``j mod nodes``, as in
        simulate/rollout.py)."""
        return tuple(range(0, self.replicas, self.nodes)) if self.drains else ()

    @property
    def drains(self) -> bool:
        return self.rollout and self.event is Event.DRAIN

    @property
    def planned_seconds(self) -> float:
        """A generous estimate of a run's length: pods starting, the baseline, the rollout
        (deletions spaced by the pause, each pod may take its whole grace period, the
        slowest node's propagation), the tail, the direct probe."""
        if not self.rollout:
            return 10 + self.baseline + self.steady
        lb = self.propagation.lb.high if self.lb is not None else 0.0  # the LB's leg
        settle = max(self.delay.high, lb) + self.propagation.min_sync
        gate = lb if self.lb is not None and self.lb.readiness_gate else 0.0  # new pods wait
        rollout = self.replicas * (self.pause + 1 + gate) + self.pod.grace + 2 + settle
        return 10 + self.baseline + rollout + self.tail


OLD, NEW = "api-7f6d5c4b3", "api-5b4c3d2e1"  # the ReplicaSets before and after the rollout
MAX_RUN_SECONDS = 300.0  # a hard bound on any run, whatever the parameters

_NEW = LoadSpec(rate=150.0, clients=8, connection=ConnectionMode.NEW)
_KEEP = LoadSpec(rate=150.0, clients=8, connection=ConnectionMode.KEEPALIVE)
_NAIVE = PodSpec(shutdown=ShutdownMode.NAIVE)
# A quiet Service behind the ingress: each of 8 pods gets a request every 2 s or so, so that
# nginx's pooled connections to it often sit idle past the app's keep-alive timeout.
_QUIET = LoadSpec(rate=4.0, clients=2, connection=ConnectionMode.NEW)
# gunicorn's default keep-alive, 2 s (https://docs.gunicorn.org/en/stable/settings.html#keepalive)
GUNICORN_KEEPALIVE = 2.0
# the fix diagnose gives: longer than ingress-nginx's 60 s by 5 s (diagnose/keepalive.py)
FIXED_KEEPALIVE = IngressSpec().keepalive_timeout + 5.0
# The fixed pods have the remedy the tools compute (model/remedy.py), not numbers of their
# own: lint's plan under its assumptions (propagation 5 s, requests up to 10 s, margin 5 s),
# which scan and lint check the lab's manifests against; diagnose, planning from the lab's
# shorter measured window, keeps it (it never lowers a sleep or a grace period).
FIXED_PLAN = plan_shutdown(ShutdownFacts())
_FIXED = PodSpec(
    shutdown=ShutdownMode.GRACEFUL,
    prestop=float(FIXED_PLAN.prestop_seconds),
    grace=float(FIXED_PLAN.grace_seconds),
)

# the drains' PodDisruptionBudget: one of the 4 pods may be down, so node-0's second pod is
# evicted only once the first one's replacement is Ready (its first eviction is refused)
DRAIN_BUDGET = 1

# The lab's load balancer in IP mode (lab/haproxy.py). Its leg, from a pod's deregistration
# to its last new request, is uniform 6-8 s: the 25 s to 2 minutes of cloud load balancers
# (model/hops.py) scaled down to keep a run short, and longer than the kube-proxy-sized
# preStop (FIXED_PLAN's 5 s), as theirs is. Its deregistration delay is ELB's default
# (300 s); the pods carry its readiness gate.
LB_LEG = Dist(DistKind.UNIFORM, 6.0, 8.0)
_LB_PROPAGATION = replace(LAB_PROPAGATION, lb=LB_LEG)
_LB = LoadBalancerSpec(deregistration=DEFAULT_DEREGISTRATION_SECONDS, readiness_gate=True)
# The path-aware plan: FIXED_PLAN's facts with the LB on the path (its leg, the upper bound
# of the lab's), and the LB's own settings plan_hops asks for (its deregistration delay).
LB_HOP = Hop(
    Implementation.CLOUD_LB,
    Leg(LB_LEG.high, "the lab's load balancer (lab/haproxy.py)"),
    via=ObjectRef("Service", NAMESPACE, SERVICE),
    readiness_gate=True,
    deregistration=Leg(_LB.deregistration, "ELB's default deregistration delay"),
)
_LB_FACTS = ShutdownFacts(hop_window_seconds=LB_HOP.leg.seconds, window_hop=LB_HOP.label)
LB_PLAN = plan_shutdown(_LB_FACTS)
LB_SETTINGS = plan_hops(LB_PLAN, _LB_FACTS, (LB_HOP,), ObjectRef("Deployment", NAMESPACE, SERVICE))


def _deregistration(settings: tuple[HopSetting, ...], current: float) -> float:
    """The deregistration delay the settings ask for (``deregistration_delay.timeout_
    seconds=N``, model/remedy.py ``_tg_setting``; ``current`` when none)."""
    for setting in settings:
        if setting.change is HopChange.DEREGISTRATION:
            return float(setting.value.rsplit("=", 1)[-1])
    return current


_LB_FIXED = replace(_LB, deregistration=_deregistration(LB_SETTINGS, _LB.deregistration))
# Load long enough before and after the rollout that diagnose's placement test tells the
# failures 5-8 s after each deletion from chance (with 5 s each, p ≈ 0.09; with these, 0.01)
LB_BASELINE, LB_TAIL = 20.0, 15.0

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            name="race",
            expect="race",
            pod=_NAIVE,
            load=_NEW,
            description="naive shutdown, no preStop: nodes keep routing new connections "
            "to pods that stopped listening",
        ),
        Scenario(
            name="race-fixed",
            expect=None,
            pod=_FIXED,
            load=_NEW,
            description="preStop sleep longer than propagation + graceful shutdown",
        ),
        Scenario(
            name="bad-backend",
            expect="backend",
            load=_NEW,
            replicas=8,
            rollout=False,
            bad=1,
            description="1 of 8 pods passes readiness but fails every request",
        ),
        Scenario(
            name="keepalive-exit",
            expect="reuse",
            pod=replace(_NAIVE, prestop=3.0),
            load=_KEEP,
            description="keep-alive clients, naive shutdown after a preStop that closes the "
            "race: the connections clients hold break when their pod exits",
        ),
        Scenario(
            name="keepalive-exit-fixed",
            expect=None,
            pod=_FIXED,
            load=_KEEP,
            description="graceful shutdown: from SIGTERM every response says Connection: "
            "close, so clients move their connections before the pod exits (a maximum "
            "connection age, --max-connection-age 1, fixes it from the client side)",
        ),
        Scenario(
            name="keepalive",
            expect="reuse",
            replicas=8,
            rollout=False,
            pod=PodSpec(keepalive_timeout=GUNICORN_KEEPALIVE),
            load=_QUIET,
            ingress=IngressSpec(next_upstream="off"),
            description="through a real nginx: the app closes kept-alive connections idle "
            f"{GUNICORN_KEEPALIVE:g} s, nginx keeps them {IngressSpec().keepalive_timeout:g} s "
            "and reuses them: nginx's own 'upstream prematurely closed connection' 502s "
            "(proxy_next_upstream off, as for a POST: a GET would be retried)",
        ),
        Scenario(
            name="keepalive-fixed",
            expect=None,
            replicas=8,
            rollout=False,
            pod=PodSpec(keepalive_timeout=FIXED_KEEPALIVE),
            load=_QUIET,
            ingress=IngressSpec(next_upstream="off"),
            description=f"the app's idle timeout ({FIXED_KEEPALIVE:g} s) is longer than "
            "nginx's upstream keepalive_timeout: nginx closes idle connections first",
        ),
        Scenario(
            name="sigkill",
            expect="race",
            pod=replace(_FIXED, prestop=2.0, grace=3.0, slow_share=0.2, slow_seconds=4.0),
            load=replace(_NEW, clients=32),
            description="preStop + the longest request exceed the grace period: SIGKILL "
            "(exit 137) mid-request",
        ),
        Scenario(
            name="broken-node",
            expect="infra",
            load=_NEW,
            rollout=False,
            broken_node=1,
            broken_share=0.3,
            description="node-1's route to the Service rejects 30 % of the new connections: "
            "its clients fail, the other node's do not, whichever pod they reach",
        ),
        Scenario(
            name="drain",
            expect="race",
            pod=_NAIVE,
            load=_NEW,
            event=Event.DRAIN,
            pdb_max_unavailable=DRAIN_BUDGET,
            description="kubectl drain of node-0 (cordon, evictions honouring a PDB of "
            "maxUnavailable 1, replacements on node-1), naive shutdown, no preStop: the nodes "
            "keep routing to evicted pods that stopped listening",
        ),
        Scenario(
            name="drain-fixed",
            expect=None,
            pod=_FIXED,
            load=_NEW,
            event=Event.DRAIN,
            pdb_max_unavailable=DRAIN_BUDGET,
            description="the same drain with the planned preStop sleep and grace period",
        ),
        Scenario(
            name="lb-ip",
            expect="race",
            pod=_FIXED,
            load=_NEW,
            propagation=_LB_PROPAGATION,
            lb=_LB,
            baseline=LB_BASELINE,
            tail=LB_TAIL,
            description=f"through a load balancer in IP mode (a real haproxy) whose leg is "
            f"{LB_LEG.a:g}-{LB_LEG.b:g} s: the kube-proxy-sized preStop "
            f"({FIXED_PLAN.prestop_seconds} s) ends before it stops sending new requests",
        ),
        Scenario(
            name="lb-ip-fixed",
            expect=None,
            pod=PodSpec(
                shutdown=ShutdownMode.GRACEFUL,
                prestop=float(LB_PLAN.prestop_seconds),
                grace=float(LB_PLAN.grace_seconds),
            ),
            load=_NEW,
            propagation=_LB_PROPAGATION,
            lb=_LB_FIXED,
            baseline=LB_BASELINE,
            tail=LB_TAIL,
            description=f"the path-aware plan: a preStop of {LB_PLAN.prestop_seconds} s covers "
            f"the load balancer's leg, its deregistration delay {_LB_FIXED.deregistration:g} s",
        ),
    )
}


def break_nodes(scenario: Scenario, datapath: Datapath) -> None:
    """Apply the scenario's node fault to the datapath (before it starts)."""
    if scenario.broken_node is not None:
        datapath.break_node(scenario.broken_node, scenario.broken_share)
