"""Every proxy's endpoint list over time: when each router (a node's kube-proxy, an
ingress-nginx replica, a cloud load balancer) starts and stops routing to each pod, and the
pick of a backend for a new connection from the list a router holds at that moment."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from svcdoctor.model.scenario import Event
from svcdoctor.simulate.arrays import Floats, Ints
from svcdoctor.simulate.params import SimParams
from svcdoctor.simulate.rollout import BEFORE, DRAINED, NEVER, Pods, gated

PICK_ROUNDS = 8  # rejection rounds before the exact (slower) pick for what is left
EXACT_CHUNK = 65_536


@dataclass(frozen=True, slots=True)
class Routes:
    """``add[j, r]``/``remove[j, r]``: from when to when router ``r`` routes to pod ``j``."""

    add: Floats
    remove: Floats

    def routed(self, pods: Ints, routers: Ints, t: Floats) -> np.ndarray:
        return np.asarray((self.add[pods, routers] <= t) & (t < self.remove[pods, routers]))

    def view_sizes(self, t: Floats) -> Ints:
        """How many pods every router routes to at each time in ``t``: shape
        ``(len(t), routers)`` (routed: ``add <= t < remove``)."""
        added, removed = np.sort(self.add, axis=0), np.sort(self.remove, axis=0)
        out = np.empty((len(t), self.add.shape[1]), dtype=np.int64)
        for r in range(self.add.shape[1]):
            out[:, r] = np.searchsorted(added[:, r], t, side="right")
            out[:, r] -= np.searchsorted(removed[:, r], t, side="right")
        return out

    def pick(self, routers: Ints, t: Floats, rng: np.random.Generator) -> Ints:
        """A backend drawn uniformly from each router's list at each time (one iptables
        ``statistic --mode random`` cascade per connection); -1 where the list is empty."""
        count = self.add.shape[0]
        out = np.full(len(t), -1, dtype=np.int64)
        todo = np.arange(len(t))
        for _ in range(PICK_ROUNDS):
            candidate = rng.integers(0, count, len(todo))
            hit = self.routed(candidate, routers[todo], t[todo])
            out[todo[hit]] = candidate[hit]
            todo = todo[~hit]
            if len(todo) == 0:
                return out
        for lo in range(0, len(todo), EXACT_CHUNK):
            part = todo[lo : lo + EXACT_CHUNK]
            r, tt = routers[part], t[part]
            member = (self.add[:, r] <= tt) & (tt < self.remove[:, r])
            sizes = member.sum(axis=0)
            k = np.floor(rng.random(len(part)) * sizes).astype(np.int64)
            chosen = np.argmax(np.cumsum(member, axis=0) > k, axis=0)
            out[part] = np.where(sizes > 0, chosen, -1)
        return out


def router_rates(p: SimParams) -> Floats:
    """Requests per second through each router."""
    cluster = p.rate * (1 - p.ingress_share - p.lb_share)
    clients_on = np.bincount(np.arange(p.client_count) % p.nodes, minlength=p.nodes)
    parts = [cluster * clients_on / p.client_count]
    if p.ingress_routers:
        parts.append(np.full(p.ingress_routers, p.rate * p.ingress_share / p.ingress_routers))
    if p.lb_share > 0:
        parts.append(np.array([p.rate * p.lb_share]))
    return np.concatenate(parts)


def event_rates(p: SimParams) -> Floats:
    """Requests per second through each router once the event started: in a drain the
    drained node's clients call from the other nodes."""
    rates = router_rates(p)
    if p.rollout and p.event is Event.DRAIN:  # as ``engine.client_nodes`` moves them
        clients = np.arange(p.client_count)
        on = clients[clients % p.nodes == DRAINED]
        moved = np.bincount(1 + on % (p.nodes - 1), minlength=p.nodes)[: p.nodes]
        rates[: p.nodes] += rates[DRAINED] / max(len(on), 1) * moved
        rates[DRAINED] = 0.0
    return rates


def _next_sync(arrival: Floats, phase: Floats, period: float) -> Floats:
    """The first sync at or after ``arrival`` of a proxy syncing every ``period`` seconds
    from ``phase`` (a busy cluster: other Services' changes keep every proxy syncing)."""
    if period <= 0:
        return arrival
    return phase + np.ceil((arrival - phase) / period) * period


def programmed(p: SimParams, base: Floats, phases: Floats, rng: np.random.Generator) -> Floats:
    """For changes made at ``base`` (one per pod), when every router applies each: shape
    ``(len(base), routers)``."""
    prop = p.propagation
    k = len(base)
    controller = base[:, None] + prop.controller.sample(rng, (k, 1))
    nodes = np.arange(p.nodes)
    if prop.override is not None:
        arrival = base[:, None] + prop.override.sample(rng, (k, p.nodes))
        at_nodes = _next_sync(arrival, phases[nodes], prop.min_sync)
    else:
        arrival = controller + prop.watch.sample(rng, (k, p.nodes))
        at_nodes = _next_sync(arrival, phases[nodes], prop.sync_period) + prop.apply
    parts = [at_nodes]
    if p.ingress_routers:
        ingress = np.arange(p.nodes, p.nodes + p.ingress_routers)
        arrival = controller + prop.watch.sample(rng, (k, p.ingress_routers))
        parts.append(_next_sync(arrival, phases[ingress], prop.ingress_sync))
    if p.lb_share > 0:
        parts.append(controller + prop.lb.sample(rng, (k, 1)))
    return np.concatenate(parts, axis=1)


def sync_phases(p: SimParams, rng: np.random.Generator) -> Floats:
    """Each router's sync clock: a random phase within its period."""
    prop = p.propagation
    node_period = prop.min_sync if prop.override is not None else prop.sync_period
    periods = np.concatenate(
        [
            np.full(p.nodes, node_period),
            np.full(p.ingress_routers, prop.ingress_sync),
            np.zeros(p.routers - p.nodes - p.ingress_routers),
        ]
    )
    return np.asarray(rng.random(p.routers) * periods)


def build_routes(p: SimParams, pods: Pods, rng: np.random.Generator) -> Routes:
    """Old pods are routed from the start; new pods once each router learns they are Ready;
    deleted pods until each router learns of the deletion (the endpoint-removal race)."""
    phases = sync_phases(p, rng)
    add = np.full((pods.count, p.routers), BEFORE)
    remove = np.full((pods.count, p.routers), NEVER)
    new = np.flatnonzero(~pods.old)
    if len(new):
        add[new] = programmed(p, pods.ready[new], phases, rng)
        if gated(p):  # the gate turned true when the LB had registered the pod
            add[new, p.routers - 1] = pods.ready[new]
    gone = np.flatnonzero(np.isfinite(pods.deleted))
    if len(gone):
        remove[gone] = programmed(p, pods.deleted[gone], phases, rng)
        if p.lb_share > 0:  # the deregistration delay's end removes the target for good
            lb, cutoff = p.routers - 1, pods.deleted[gone] + p.lb_deregistration
            remove[gone, lb] = np.minimum(remove[gone, lb], cutoff)
    _in_order(p, pods, add, remove, new, gone)
    return Routes(add, remove)


def _in_order(p: SimParams, pods: Pods, add: Floats, remove: Floats, new: Ints, gone: Ints) -> None:
    """A watch delivers an EndpointSlice's changes in order and a proxy applies them in
    order: no change takes effect at a router before an earlier one (so a deletion right
    after a new pod's Ready waits for that Ready to arrive). Not for the LB, whose
    registrations are independent API calls."""
    watched = p.nodes + p.ingress_routers
    changes = np.concatenate([pods.ready[new], pods.deleted[gone]])
    if len(changes) < 2:
        return
    times = np.concatenate([add[new, :watched], remove[gone, :watched]])
    order = np.argsort(changes, kind="stable")
    times[order] = np.maximum.accumulate(times[order], axis=0)
    add[new, :watched] = times[: len(new)]
    remove[gone, :watched] = times[len(new) :]
