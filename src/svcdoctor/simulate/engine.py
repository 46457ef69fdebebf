"""One simulated window, vectorised with numpy: every request of every client, routed by the
proxy it goes through, served or failed, with the mechanism that failed it.

Mechanisms map to the four causes of problem.md:

* race: ``stale_endpoint`` (a new connection to a pod that stopped accepting, which the
  router still lists), ``no_endpoints``, ``in_flight`` (a request cut mid-flight: a naive
  exit, the pod's mesh sidecar stopping, or a load balancer's deregistration delay
  ending), ``sigkill`` (the grace period ran out mid-request);
* reuse: ``stale_connection`` (a keep-alive request on a connection whose pod exited);
* backend: ``bad_backend``; infra: ``conntrack`` (a full table drops the SYN).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from svcdoctor.model import RETRY_BACKOFF, Cause
from svcdoctor.model.scenario import ConnectionMode, Event, FaultMode, ShutdownMode
from svcdoctor.simulate.arrays import Floats, Ints
from svcdoctor.simulate.params import SimParams
from svcdoctor.simulate.rollout import DRAINED, Pods, build_pods
from svcdoctor.simulate.routes import Routes, build_routes, router_rates


class Mechanism(StrEnum):
    """How a simulated request ended (``OK``: served); a request's code is its index in
    ``MECHANISMS``."""

    OK = "ok"
    STALE_ENDPOINT = "stale_endpoint"
    NO_ENDPOINTS = "no_endpoints"
    IN_FLIGHT = "in_flight"
    SIGKILL = "sigkill"
    STALE_CONNECTION = "stale_connection"
    BAD_BACKEND = "bad_backend"
    CONNTRACK = "conntrack"


MECHANISMS = tuple(Mechanism)
(OK, STALE_ENDPOINT, NO_ENDPOINTS, IN_FLIGHT, SIGKILL, STALE_CONNECTION, BAD, CONNTRACK) = range(8)
FAILURES = MECHANISMS[1:]
CAUSE_OF = {
    Mechanism.STALE_ENDPOINT: Cause.RACE,
    Mechanism.NO_ENDPOINTS: Cause.RACE,
    Mechanism.IN_FLIGHT: Cause.RACE,
    Mechanism.SIGKILL: Cause.RACE,
    Mechanism.STALE_CONNECTION: Cause.REUSE,
    Mechanism.BAD_BACKEND: Cause.BACKEND,
    Mechanism.CONNTRACK: Cause.INFRA,
}
TEARDOWN = 1.0  # seconds from a pod's exit until its IP stops answering (refused → timeout)
CONNECT_RTT = 0.001  # how long a refused connection takes
BACKOFF = RETRY_BACKOFF  # first retry delay, doubling


@dataclass(frozen=True, slots=True)
class Traffic:
    """Per request, in start order. ``mechanism`` is the final attempt's (0: served)."""

    ts: Floats
    latency: Floats  # seconds, the last attempt's, including retries' waits
    client: Ints
    node: Ints
    router: Ints
    backend: Ints  # pod index; -1 when no pod was reached
    conn: Ints  # connection id
    mechanism: np.ndarray  # int8, an index into MECHANISMS
    attempts: np.ndarray  # int8


@dataclass(frozen=True, slots=True)
class Run:
    params: SimParams
    seed: int
    pods: Pods
    routes: Routes
    traffic: Traffic
    exits: Floats  # when each deleted pod's process ended
    killed: np.ndarray  # bool: SIGKILLed


def simulate_run(p: SimParams, seed: int) -> Run:
    """One window of traffic (and one rollout, unless ``p.rollout`` is off)."""
    p.validate()
    rng = np.random.default_rng(seed)
    pods = build_pods(p, rng)
    routes = build_routes(p, pods, rng)
    n = int(rng.poisson(p.rate * p.duration))
    ts = np.sort(rng.uniform(0.0, p.duration, n))
    client = rng.integers(0, p.client_count, n)
    node = client_nodes(p, client, ts)
    router = _routers(p, node, rng)
    latency = p.latency.sample(rng, n)
    if p.connection is ConnectionMode.NEW:
        backend, mech = _connect(p, pods, routes, router, ts, rng)
        conn = np.arange(n)
    else:
        backend, mech, conn = _keepalive(p, pods, routes, ts, latency, client, router, rng)
    exits, killed = _serve(p, pods, ts, latency, backend, mech)
    _cut(p, pods, ts, latency, router, backend, mech)
    latency = np.where(mech == STALE_ENDPOINT, _refused_latency(p, ts, backend, exits), latency)
    latency = np.where(mech == CONNTRACK, p.timeout, latency)  # the SYN was dropped
    latency = np.where(mech == NO_ENDPOINTS, CONNECT_RTT, latency)  # kube-proxy REJECTs
    attempts = np.ones(n, dtype=np.int8)
    if p.retries:
        _retry(p, pods, routes, exits, killed, ts, latency, router, backend, mech, attempts, rng)
    traffic = Traffic(ts, latency, client, node, router, backend, conn, mech, attempts)
    return Run(p, seed, pods, routes, traffic, exits, killed)


def client_nodes(p: SimParams, client: Ints, ts: Floats) -> Ints:
    """The node each request leaves from: its client's (clients are spread over the nodes
    in turn). A drain evicts the drained node's clients too: from its start they call from
    the other nodes."""
    node = client % p.nodes
    if p.rollout and p.event is Event.DRAIN:
        moved = (node == DRAINED) & (ts >= p.rollout_at)
        node[moved] = 1 + client[moved] % (p.nodes - 1)
    return np.asarray(node)


def _routers(p: SimParams, node: Ints, rng: np.random.Generator) -> Ints:
    """The proxy each request goes through: its client's node, or ingress, or the LB."""
    router = node.copy()
    u = rng.random(len(node))
    via_ingress = u < p.ingress_share
    if p.ingress_routers:
        router[via_ingress] = p.nodes + rng.integers(0, p.ingress_routers, int(via_ingress.sum()))
    if p.lb_share > 0:
        router[(u >= p.ingress_share) & (u < p.ingress_share + p.lb_share)] = p.routers - 1
    return router


def conntrack_entries(p: SimParams) -> Floats:
    """Per node, the conntrack entries its new connections need: new connections per second
    x how long each stays (TIME_WAIT). A node's rate is that of the clients on it (clients
    sit on the first nodes when there are fewer clients than nodes)."""
    per_node = (
        router_rates(p)[: p.nodes] if p.connection is ConnectionMode.NEW else np.zeros(p.nodes)
    )
    return np.asarray((per_node + p.node_conn_rate) * p.conntrack_timewait)


def conntrack_drop(p: SimParams) -> Floats:
    """Per node, the share of new connections a full conntrack table drops: the entries
    needed (``conntrack_entries``) against nf_conntrack_max."""
    entries = conntrack_entries(p)
    drop = 1 - p.conntrack_max / np.maximum(entries, 1e-12)
    return np.asarray(np.maximum(drop, 0.0))


def _connect(
    p: SimParams,
    pods: Pods,
    routes: Routes,
    router: Ints,
    ts: Floats,
    rng: np.random.Generator,
) -> tuple[Ints, np.ndarray]:
    """New connections at ``ts``: the backend each router picks, and what failed the
    connect (0: connected). A dropped SYN never reaches a backend."""
    backend = routes.pick(router, ts, rng)
    mech = np.zeros(len(ts), dtype=np.int8)
    mech[backend < 0] = NO_ENDPOINTS
    reached = backend >= 0
    refused = np.zeros(len(ts), dtype=bool)
    refused[reached] = ts[reached] >= pods.term[backend[reached]]
    mech[refused] = STALE_ENDPOINT
    drop = conntrack_drop(p)
    if drop.any():
        on_node = router < p.nodes
        dropped = on_node & (rng.random(len(ts)) < drop[np.minimum(router, p.nodes - 1)])
        mech[dropped] = CONNTRACK
        backend[dropped] = -1
    return backend, mech


def _keepalive(
    p: SimParams,
    pods: Pods,
    routes: Routes,
    ts: Floats,
    latency: Floats,
    client: Ints,
    router: Ints,
    rng: np.random.Generator,
) -> tuple[Ints, np.ndarray, Ints]:
    """Connections held across requests. Each client holds one connection at a time; all
    clients advance together, one connection per step, until every request is placed.

    A connection ends when the client retires it (``max_connection_age``), when its pod
    signals the end (graceful: ``Connection: close``/GOAWAY from SIGTERM on), or when its
    pod exits under it (naive): the HTTP/1.1 request sent on it next fails
    (``stale_connection``); HTTP/2 sees the close at once and reconnects. A failed connect
    or a ``reset``/``hang`` fault ends the connection after that request."""
    n = len(ts)
    order = np.lexsort((ts, client))
    span = p.duration + 1.0
    key = client[order] * span + ts[order]  # sorted: client first, then time
    first = np.searchsorted(client[order], np.arange(p.client_count))
    last = np.append(first[1:], n)
    pos, end = first[first < last], last[first < last]
    t_s, lat_s = ts[order], latency[order]
    backend_s = np.full(n, -1, dtype=np.int64)
    mech_s = np.zeros(n, dtype=np.int8)
    conn_s = np.zeros(n, dtype=np.int64)
    naive_h1 = p.shutdown is ShutdownMode.NAIVE and p.connection is ConnectionMode.KEEPALIVE
    next_conn = 0
    while len(pos):
        i = pos
        who = order[i]
        picked, connect = _connect(p, pods, routes, router[who], t_s[i], rng)
        mech_s[i] = connect
        backend_s[i] = picked
        fails = connect != OK
        if p.fault is FaultMode.RESET or (
            p.fault is FaultMode.HANG and p.connection is ConnectionMode.KEEPALIVE
        ):
            # a reset ends the connection; an HTTP/1.1 client that timed out drops it, but
            # a hung HTTP/2 stream leaves the connection (and its client) on the pod
            fails |= (picked >= 0) & pods.bad[np.maximum(picked, 0)]
        stop = i + 1
        ok = ~fails
        if ok.any():
            j, c = picked[ok], client[who[ok]]
            brk = pods.term[j]
            until = np.minimum(brk, p.duration + 0.5)
            idx_b = np.searchsorted(key, c * span + until)
            stop_ok = np.minimum(idx_b, end[ok])
            idx_a = np.full(len(j), np.iinfo(np.int64).max)
            if p.max_connection_age is not None:
                retire = t_s[i[ok]] + p.max_connection_age
                idx_a = np.searchsorted(key, c * span + np.minimum(retire, p.duration + 0.5))
                stop_ok = np.minimum(stop_ok, idx_a)
            if naive_h1:
                # the pod exited under a connection still held (not retired by its age
                # first): the next request on it fails unless the previous one was in
                # flight (the client saw the break)
                held = (idx_b <= stop_ok) & (idx_b < idx_a) & (idx_b < end[ok]) & np.isfinite(brk)
                prev = np.maximum(idx_b - 1, 0)
                saw = t_s[prev] + lat_s[prev] > brk
                stale = held & ~saw
                mech_s[idx_b[stale]] = STALE_CONNECTION
                stop_ok = np.where(stale, idx_b + 1, stop_ok)
            stop[ok] = np.maximum(stop_ok, i[ok] + 1)
            lengths = stop[ok] - i[ok]
            rows = np.repeat(i[ok], lengths) + _ramp(lengths)
            backend_s[rows] = np.repeat(j, lengths)
            conn_s[rows] = np.repeat(next_conn + np.arange(len(j)), lengths)
        conn_s[i[fails]] = next_conn + int(ok.sum()) + np.arange(int(fails.sum()))
        next_conn += len(i)
        keep = stop < end
        pos, end = stop[keep], end[keep]
    backend, mech, conn = (np.empty_like(a) for a in (backend_s, mech_s, conn_s))
    backend[order], mech[order], conn[order] = backend_s, mech_s, conn_s
    return backend, mech, conn


def _ramp(lengths: Ints) -> Ints:
    """0, 1, …, n-1 for each n in ``lengths``, concatenated."""
    starts = np.cumsum(lengths) - lengths
    return np.asarray(np.arange(int(lengths.sum())) - np.repeat(starts, lengths))


def _serve(
    p: SimParams, pods: Pods, ts: Floats, latency: Floats, backend: Ints, mech: np.ndarray
) -> tuple[Floats, np.ndarray]:
    """What the pods do with the requests they got: bad pods fail them; a naive pod exits
    at SIGTERM mid-request; a graceful one finishes in-flight requests, unless SIGKILL comes
    first. Returns each pod's exit time and whether it was killed."""
    served = (mech == OK) & (backend >= 0)
    j = np.where(served, backend, 0)
    if p.bad_backends:
        bad = served & pods.bad[j]
        mech[bad] = BAD
        if p.fault is FaultMode.HANG:
            latency[bad] = p.timeout
        served &= ~bad
    end = ts + latency
    if p.shutdown is ShutdownMode.NAIVE:
        exits = pods.term.copy()
        killed = np.zeros(pods.count, dtype=bool)
        cut = served & (end > exits[j]) & (ts < exits[j])
        mech[cut] = IN_FLIGHT
        latency[cut] = exits[j[cut]] - ts[cut]
        return exits, killed
    last_end = np.full(pods.count, -np.inf)
    np.maximum.at(last_end, j[served], end[served])
    killed = last_end > pods.kill
    exits = np.where(killed, pods.kill, np.maximum(pods.term, last_end))
    exits[~np.isfinite(pods.deleted)] = np.inf
    cut = served & killed[j] & (end > pods.kill[j]) & (ts < pods.kill[j])
    mech[cut] = SIGKILL
    latency[cut] = pods.kill[j[cut]] - ts[cut]
    return exits, killed


def lb_cutoff(p: SimParams, pods: Pods) -> Floats:
    """Per pod, when the load balancer cuts the requests still in flight to it: its
    deregistration delay after the pod's deletion (inf: never deleted)."""
    return np.asarray(pods.deleted + p.lb_deregistration)


def _cut(
    p: SimParams,
    pods: Pods,
    ts: Floats,
    latency: Floats,
    router: Ints,
    backend: Ints,
    mech: np.ndarray,
) -> None:
    """Served requests cut mid-flight by a hop: the pod's sidecar stopping, or the LB
    (requests through it) when its deregistration delay ends (in place)."""
    if p.sidecar_drain is None and p.lb_share == 0:
        return
    served = (mech == OK) & (backend >= 0)
    j = np.where(served, backend, 0)
    stop = np.array(pods.gone[j])
    if p.lb_share > 0:
        via_lb = router == p.routers - 1
        stop[via_lb] = np.minimum(stop[via_lb], lb_cutoff(p, pods)[j[via_lb]])
    cut = served & (ts < stop) & (ts + latency > stop)
    mech[cut] = IN_FLIGHT
    latency[cut] = stop[cut] - ts[cut]


def _refused_latency(p: SimParams, ts: Floats, backend: Ints, exits: Floats) -> Floats:
    """A stale endpoint refuses at once while the pod's address exists; later its SYNs go
    unanswered until the client's timeout."""
    gone = np.where(backend >= 0, exits[np.maximum(backend, 0)] + TEARDOWN, np.inf)
    return np.where(ts < gone, CONNECT_RTT, p.timeout)


def _retry(
    p: SimParams,
    pods: Pods,
    routes: Routes,
    exits: Floats,
    killed: np.ndarray,
    ts: Floats,
    latency: Floats,
    router: Ints,
    backend: Ints,
    mech: np.ndarray,
    attempts: np.ndarray,
    rng: np.random.Generator,
) -> None:
    """Clients retry failed idempotent requests on a new connection, after a doubling
    backoff; each retry is routed and served like a first attempt (in place)."""
    retryable = rng.random(len(ts)) < p.idempotent
    for k in range(p.retries):
        todo = np.flatnonzero((mech != OK) & retryable)
        if len(todo) == 0:
            return
        wait = latency[todo] + BACKOFF * 2**k
        at = ts[todo] + wait
        picked, connect = _connect(p, pods, routes, router[todo], at, rng)
        lat = p.latency.sample(rng, len(todo))
        j = np.maximum(picked, 0)
        outcome = connect.copy()
        served = outcome == OK
        bad = served & pods.bad[j]
        outcome[bad] = BAD
        if p.fault is FaultMode.HANG:
            lat[bad] = p.timeout
        served &= ~bad
        own = exits if p.shutdown is ShutdownMode.NAIVE else np.where(killed, pods.kill, np.inf)
        cut = served & (at < own[j]) & (at + lat > own[j])
        outcome[cut] = IN_FLIGHT if p.shutdown is ShutdownMode.NAIVE else SIGKILL
        stop = np.minimum(own, pods.gone)[j]
        if p.lb_share > 0:
            via_lb = router[todo] == p.routers - 1
            stop[via_lb] = np.minimum(stop[via_lb], lb_cutoff(p, pods)[j[via_lb]])
        hop = served & ~cut & (at < stop) & (at + lat > stop)
        outcome[hop] = IN_FLIGHT
        lat = np.where(outcome == STALE_ENDPOINT, _refused_latency(p, at, picked, exits), lat)
        lat = np.where(outcome == CONNTRACK, p.timeout, lat)
        lat = np.where(outcome == NO_ENDPOINTS, CONNECT_RTT, lat)
        mech[todo] = outcome
        backend[todo] = picked
        latency[todo] = wait + lat
        attempts[todo] += 1
