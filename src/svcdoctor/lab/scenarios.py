"""The lab's scenarios: each reproduces one cause (or its fix) with known ground truth."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from svcdoctor.lab.cluster import PodSpec, Propagation
from svcdoctor.lab.load import LoadSpec

if TYPE_CHECKING:
    from svcdoctor.lab.datapath import Datapath
    from svcdoctor.simulate import SimParams


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    expect: str | None  # the cause diagnose must find (None: no cause)
    pod: PodSpec = field(default_factory=PodSpec)
    load: LoadSpec = field(default_factory=LoadSpec)
    propagation: Propagation = field(default_factory=Propagation)
    replicas: int = 4
    nodes: int = 2
    rollout: bool = True
    max_surge: int = 1
    max_unavailable: int = 0
    bad: int = 0
    fault: str = "5xx"
    baseline: float = 5.0  # seconds of load before the rollout
    tail: float = 5.0  # seconds of load after the last pod is gone
    steady: float = 10.0  # seconds of load without a rollout
    pause: float = 3.0  # between deletions of the rollout (each one's failures apart)
    broken_node: int | None = None  # this node's route to the Service fails broken_share
    broken_share: float = 0.0  # of the new connections (kernel: REJECT, userspace: reset)
    description: str = ""

    @property
    def broken_nodes(self) -> tuple[str, ...]:
        """The nodes whose route to the Service is broken (ground truth, by node name)."""
        return () if self.broken_node is None else (f"node-{self.broken_node}",)

    @property
    def planned_seconds(self) -> float:
        """A generous estimate of a run's length: pods starting, the baseline, the rollout
        (deletions spaced by the pause, each pod may take its whole grace period, the
        slowest node's propagation), the tail, the direct probe."""
        if not self.rollout:
            return 10 + self.baseline + self.steady
        settle = self.propagation.delay.high + self.propagation.min_sync
        rollout = self.replicas * (self.pause + 1) + self.pod.grace + 2 + settle
        return 10 + self.baseline + rollout + self.tail


MAX_RUN_SECONDS = 300.0  # a hard bound on any run, whatever the parameters

_NEW = LoadSpec(rate=150.0, clients=8, connection="new")
_KEEP = LoadSpec(rate=150.0, clients=8, connection="keepalive")

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "race",
            "race",
            PodSpec(shutdown="naive"),
            _NEW,
            description="naive shutdown, no preStop: nodes keep routing new connections "
            "to pods that stopped listening",
        ),
        Scenario(
            "race-fixed",
            None,
            PodSpec(shutdown="graceful", prestop=3.0, grace=30.0),
            _NEW,
            description="preStop sleep longer than propagation + graceful shutdown",
        ),
        Scenario(
            "bad-backend",
            "backend",
            PodSpec(),
            _NEW,
            replicas=8,
            rollout=False,
            bad=1,
            description="1 of 8 pods passes readiness but fails every request",
        ),
        Scenario(
            "keepalive",
            "reuse",
            PodSpec(shutdown="naive", prestop=3.0),
            _KEEP,
            description="keep-alive clients, naive shutdown after a preStop that closes the "
            "race: the connections clients hold break when their pod exits",
        ),
        Scenario(
            "keepalive-fixed",
            None,
            PodSpec(shutdown="graceful", prestop=3.0, grace=30.0),
            _KEEP,
            description="graceful shutdown: from SIGTERM every response says Connection: "
            "close, so clients move their connections before the pod exits (a maximum "
            "connection age, --max-connection-age 1, fixes it from the client side)",
        ),
        Scenario(
            "sigkill",
            "race",
            PodSpec(shutdown="graceful", prestop=2.0, grace=3.0, slow_share=0.2, slow_seconds=4.0),
            replace(_NEW, clients=32),
            description="preStop + the longest request exceed the grace period: SIGKILL "
            "(exit 137) mid-request",
        ),
        Scenario(
            "broken-node",
            "infra",
            PodSpec(),
            _NEW,
            rollout=False,
            broken_node=1,
            broken_share=0.3,
            description="node-1's route to the Service rejects 30 % of the new connections: "
            "its clients fail, the other node's do not, whichever pod they reach",
        ),
    )
}


def break_nodes(scenario: Scenario, datapath: Datapath) -> None:
    """Apply the scenario's node fault to the datapath (before it starts)."""
    if scenario.broken_node is not None:
        datapath.break_node(scenario.broken_node, scenario.broken_share)


def as_simulation(scenario: Scenario) -> SimParams:
    """The ``svcdoctor simulate`` parameters of a scenario: the same pods, rollout, clients,
    rate, latency and propagation (each change applied after the lab's delay, in order,
    batched by ``min_sync``, to a ruleset of one Service), to compare the two. The lab's
    slow requests (``slow_share``) have no counterpart: compare scenarios without them."""
    from svcdoctor.simulate import Propagation as SimPropagation
    from svcdoctor.simulate import SimParams

    lab = scenario.propagation
    return SimParams(
        nodes=scenario.nodes,
        replicas=scenario.replicas,
        max_surge=scenario.max_surge,
        max_unavailable=scenario.max_unavailable,
        rollout=scenario.rollout,
        rate=scenario.load.rate,
        clients=scenario.load.clients,
        connection=scenario.load.connection,
        max_connection_age=scenario.load.max_connection_age,
        retries=scenario.load.retries,
        duration=120.0,
        prestop=scenario.pod.prestop,
        grace=scenario.pod.grace,
        shutdown=scenario.pod.shutdown,
        latency=scenario.pod.latency,
        bad_backends=scenario.bad,
        fault=scenario.fault,
        propagation=SimPropagation(
            override=lab.delay,
            min_sync=lab.min_sync,
            services=1,
            endpoints=scenario.replicas + scenario.max_surge,
        ),
    )
