"""The one shutdown remedy: facts about a workload and its race → a ``ShutdownPlan``.

lint (``checks``), ``diagnose``, ``simulate recommend`` and ``fix`` all call ``plan_shutdown``;
none of them does preStop/grace arithmetic of its own. Lint's default assumptions (how long
endpoint removal takes to propagate, the longest legitimate request, the margin added to
grace periods) are defined here once.

The plan, for a race window ``W`` (its upper bound when it is an estimate) and the longest
request ``L``:

- preStop sleep ``P``: ``W`` for an assumed window (lint's ``--propagation-seconds``), ``W``
  plus a margin for a measured or simulated one (``PRESTOP_MARGIN``: the larger of 2 s and
  half the window, whole seconds); never below the sleep the object already has; nothing
  when the app drains by itself for at least ``W``;
- the hook: the native ``sleep`` action from Kubernetes 1.30 (beta, on by default; GA 1.34),
  and also when the version is unknown (with a note); ``exec sh -c "sleep P"`` before 1.30;
  none possible before 1.30 in an image without a shell;
- grace ``G = P + D + L + margin`` (whole seconds; ``D`` the app's own drain when known),
  never lowered below what the object has (the default 30 s when it sets none) unless
  ``allow_lower_grace``;
- probes: when readiness and liveness are the same check, liveness becomes a check of the
  listener only (``plan_probes``);

and for connection reuse (cause 3) ``plan_connections`` turns the transport, the exposure,
the idle timeouts of both ends and what the server already bounds into the steps to take.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from svcdoctor.model.finding import ObjectRef
from svcdoctor.model.hops import (
    AGIC_DRAINING_TIMEOUT,
    ALB_GATE_LABEL,
    ALB_TG_ATTRIBUTES,
    ISTIO_PROXY_CONFIG,
    LINKERD_WAIT,
    NLB_TG_ATTRIBUTES,
    Hop,
    HopKind,
    Implementation,
)
from svcdoctor.model.patch import Handler, PreStopHook
from svcdoctor.model.workload import DEFAULT_GRACE_SECONDS, Probe

# Lint's assumptions when nothing was measured (``--propagation-seconds`` and friends).
DEFAULT_PROPAGATION_SECONDS = 5.0
DEFAULT_MAX_REQUEST_SECONDS = 10.0
DEFAULT_MARGIN_SECONDS = 5.0
NATIVE_SLEEP_VERSION = (1, 30)  # lifecycle.preStop.sleep: beta and on by default (GA 1.34)
MIN_PRESTOP_MARGIN = 2.0  # seconds added to a measured window, at least
PRESTOP_MARGIN_SHARE = 0.5  # …or this share of it, whichever is larger

RACE_RULES = ("SVD101", "SVD103", "SVD110")  # the preStop delay
HOP_RULE = "SVD110"  # the preStop covers the cluster's propagation, not a slower hop's
GRACE_RULE = "SVD102"  # the grace period
NO_SHELL_RULE = "SVD104"
PROBE_RULE = "SVD202"  # readiness and liveness are the same check
STICKY_RULE = "SVD301"  # HTTP/2 behind a connection balancer

# Connection reuse: a bound on connection age long enough not to cost much (reconnects are
# rare) and short enough that new replicas get traffic within a minute; the idle timeout of
# the end that must outlive the other is raised past it by IDLE_MARGIN.
DEFAULT_MAX_CONNECTION_AGE = 30.0
IDLE_MARGIN = 5.0


class WindowSource(StrEnum):
    """Where the race window comes from."""

    ASSUMED = "assumed"  # lint's default or --propagation-seconds
    DIAGNOSED = "diagnosed"  # measured from evidence (an estimate with an interval)
    SIMULATED = "simulated"  # from the cluster-scale model


class HookKind(StrEnum):
    """How the preStop delay is expressed."""

    SLEEP = "sleep"  # lifecycle.preStop.sleep (Kubernetes >= 1.30)
    EXEC = "exec"  # exec: [sh, -c, "sleep N"]
    NONE = "none"  # no delay needed (the app drains by itself, or the window is 0)
    IMPOSSIBLE = "impossible"  # no native sleep and no shell in the image


@dataclass(frozen=True, slots=True)
class ShutdownFacts:
    """What is known about one serving container and its race.

    ``window_seconds``: the race window (for an estimate, its upper bound: the plan must
    cover the window, not its point estimate). ``longest_request_seconds``: the longest
    legitimate request. ``drain_seconds``: how long the app keeps serving after SIGTERM by
    itself (0: it stops at once; ``None``: it drains for a time it did not tell, trusted to
    cover the window). ``current_prestop_seconds`` / ``current_grace_seconds``:
    what the object has (``None``: no sleep / grace not set, 30 s applies).
    ``has_shell``: whether the image has ``sh`` (``None``: unknown). ``readiness`` /
    ``liveness``: the container's probes (``None``: none, or not known to the caller)."""

    window_seconds: float = DEFAULT_PROPAGATION_SECONDS
    source: WindowSource = WindowSource.ASSUMED
    longest_request_seconds: float = DEFAULT_MAX_REQUEST_SECONDS
    margin_seconds: float = DEFAULT_MARGIN_SECONDS
    drain_seconds: float | None = 0.0
    kube_version: tuple[int, int] | None = None
    current_prestop_seconds: float | None = None
    current_grace_seconds: int | None = None
    has_shell: bool | None = None
    allow_lower_grace: bool = False
    readiness: Probe | None = None
    liveness: Probe | None = None
    # The path (``model.path``): a hop slower than the window above sets the preStop
    # (``hop_window_seconds``, named ``window_hop``); the pod's own proxy must keep working
    # through the app's shutdown (``sidecar_drain_seconds``: how long it does now).
    hop_window_seconds: float | None = None
    window_hop: str = ""
    sidecar_drain_seconds: float | None = None


class ProbeChange(StrEnum):
    """What the plan does about a readiness probe that is the same check as liveness."""

    NONE = "none"  # they differ, or one is missing
    LIVENESS_TCP = "liveness-tcp"  # keep readiness; liveness only checks the listener
    MANUAL = "manual"  # no cheaper check to give liveness: the app needs its own endpoint


@dataclass(frozen=True, slots=True)
class ProbeSplit:
    """The probe part of the plan: ``liveness`` is the new ``livenessProbe`` handler (the
    old handler set to ``None``, which deletes it in a strategic merge), when there is one."""

    change: ProbeChange
    liveness: dict[str, object] | None = None
    port: int | str | None = None


NO_SPLIT = ProbeSplit(ProbeChange.NONE)


@dataclass(frozen=True, slots=True)
class ShutdownPlan:
    """The shutdown settings to have. ``prestop_seconds`` 0 with ``HookKind.NONE``: no
    preStop needed. ``rules``: the lint rules whose findings the plan's changes answer
    (empty: the object already has the plan)."""

    prestop_seconds: int
    hook: HookKind
    grace_seconds: int
    rules: tuple[str, ...]
    window_seconds: float
    source: WindowSource
    version_known: bool
    needed_grace_seconds: int  # preStop + drain + longest request + margin, before any floor
    grace_cuts_requests: bool = False  # the current grace ends before preStop + drain + L
    probes: ProbeSplit = NO_SPLIT
    window_hop: str = ""  # the hop whose leg set the preStop ("": the cluster's propagation)

    @property
    def hook_body(self) -> dict[str, object] | None:
        """The ``lifecycle.preStop`` mapping, or ``None`` when there is none to set."""
        return planned_hook(self).data()

    @property
    def rule_text(self) -> str:
        return "/".join(self.rules)


def seconds(value: float) -> int:
    """Whole seconds, rounded up (the API takes integers)."""
    return max(0, math.ceil(value - 1e-9))


def native_sleep(version: tuple[int, int] | None) -> bool | None:
    """Whether ``lifecycle.preStop.sleep`` is available; ``None`` when the version is
    unknown."""
    return None if version is None else version >= NATIVE_SLEEP_VERSION


def prestop_margin(window: float) -> float:
    """Margin added to a measured or simulated window."""
    return max(MIN_PRESTOP_MARGIN, PRESTOP_MARGIN_SHARE * window)


def needed_grace(prestop: float, longest_request: float, margin: float) -> int:
    """Grace period covering the preStop, the longest request and a margin: whole seconds,
    always longer than preStop + longest request (the kubelet's deadline is exclusive)."""
    return max(
        seconds(prestop + longest_request + margin), math.floor(prestop + longest_request) + 1
    )


def cuts_requests(grace: float, before: float, longest_request: float) -> bool:
    """Whether a grace period ends before a request of ``longest_request`` seconds that
    starts ``before`` seconds after the deletion (at the end of preStop and the app's own
    drain) finishes: the kubelet's SIGKILL at the deadline cuts it."""
    return grace <= before + longest_request


def hook_kind(version: tuple[int, int] | None, has_shell: bool | None) -> HookKind:
    """Native ``sleep`` where the cluster has it (or the version is unknown), ``exec`` with a
    shell before 1.30, impossible before 1.30 in an image without a shell."""
    if native_sleep(version) is False:
        return HookKind.IMPOSSIBLE if has_shell is False else HookKind.EXEC
    return HookKind.SLEEP


_PLANNED = {HookKind.SLEEP: Handler.SLEEP, HookKind.EXEC: Handler.SHELL}


def planned_hook(plan: ShutdownPlan) -> PreStopHook:
    """The plan's preStop as a hook to set (``Handler.NONE``: none to set)."""
    return PreStopHook(_PLANNED.get(plan.hook, Handler.NONE), plan.prestop_seconds)


def plan_probes(readiness: Probe | None, liveness: Probe | None) -> ProbeSplit:
    """Split readiness from liveness when they are the same check (same handler and target,
    timing aside) and that check may reach past the process (``Probe.may_check_dependencies``:
    a readiness endpoint, an aggregate health, an app's endpoint): readiness keeps the check
    that decides whether the pod gets traffic, and liveness checks only that the port
    listens (``tcpSocket``), so a dependency every replica shares failing takes pods out of
    the Service instead of restarting them all. An ``exec`` pair (no port) is left to the
    app: readiness needs an endpoint of its own."""
    if readiness is None or liveness is None or readiness.target != liveness.target:
        return NO_SPLIT
    if not readiness.may_check_dependencies:
        return NO_SPLIT  # the same cheap check twice: no dependency to restart every replica
    if readiness.handler in ("httpGet", "grpc") and readiness.port is not None:
        body: dict[str, object] = {"tcpSocket": {"port": readiness.port}, readiness.handler: None}
        return ProbeSplit(ProbeChange.LIVENESS_TCP, body, readiness.port)
    return ProbeSplit(ProbeChange.MANUAL, None, readiness.port)


def _delay(wanted: float, facts: ShutdownFacts) -> tuple[int, HookKind, list[str]]:
    """The preStop seconds for a delay of ``wanted`` before the app's own drain, never below
    the sleep the container has (an app draining for an untold time is trusted to cover the
    window by itself), its hook, and the preStop rules it answers."""
    drain = facts.drain_seconds
    wanted = 0.0 if drain is None else max(wanted - drain, 0.0)
    current = facts.current_prestop_seconds or 0.0
    prestop = max(seconds(wanted), seconds(current))
    rules: list[str] = []
    if prestop == 0:
        return prestop, HookKind.NONE, rules
    kind = hook_kind(facts.kube_version, facts.has_shell)
    if not current:
        rules.append("SVD101")
    elif wanted > current:
        covered = facts.hop_window_seconds is not None and current >= facts.window_seconds
        rules.append(HOP_RULE if covered else "SVD103")
    if kind is HookKind.IMPOSSIBLE:
        rules.append(NO_SHELL_RULE)
    return prestop, kind, rules


def _grace_now(facts: ShutdownFacts) -> int:
    """The grace period the object has (the default 30 s when it sets none)."""
    have = facts.current_grace_seconds
    return have if have is not None else DEFAULT_GRACE_SECONDS


def plan_shutdown(facts: ShutdownFacts) -> ShutdownPlan:
    """The shutdown plan for ``facts`` (pure)."""
    window = max(facts.window_seconds, facts.hop_window_seconds or 0.0, 0.0)
    if facts.source is WindowSource.ASSUMED:
        wanted = window
    else:
        wanted = window + prestop_margin(window) if window > 0 else 0.0
    prestop, kind, rules = _delay(wanted, facts)
    before_requests = prestop + (facts.drain_seconds or 0.0)  # deletion → stops taking requests
    needed = needed_grace(before_requests, facts.longest_request_seconds, facts.margin_seconds)
    if facts.sidecar_drain_seconds:  # the kubelet must not kill the proxy mid-drain
        needed = max(needed, seconds(facts.sidecar_drain_seconds + facts.margin_seconds))
    have = _grace_now(facts)
    floor = 0 if facts.allow_lower_grace else have
    grace = max(needed, floor)
    if grace != have:
        rules.append(GRACE_RULE)
    probes = plan_probes(facts.readiness, facts.liveness)
    if probes.change is not ProbeChange.NONE:
        rules.append(PROBE_RULE)
    return ShutdownPlan(
        prestop_seconds=prestop,
        hook=kind,
        grace_seconds=grace,
        rules=tuple(rules),
        window_seconds=window,
        source=facts.source,
        version_known=facts.kube_version is not None,
        needed_grace_seconds=needed,
        grace_cuts_requests=cuts_requests(have, before_requests, facts.longest_request_seconds),
        probes=probes,
        window_hop=facts.window_hop if window > facts.window_seconds else "",
    )


def meet_plan(plan: ShutdownPlan, facts: ShutdownFacts) -> ShutdownPlan:
    """A given plan (a diagnosis') met with one container's ``facts``, no window planned
    again: its preStop and grace as they are, never below what the container has (its
    sleep, its grace period); no preStop when the app drains by itself for an untold time,
    the rest when it drains for some seconds; the hook the cluster and the image allow;
    the rules its changes answer."""
    prestop, kind, rules = _delay(plan.prestop_seconds, facts)
    have = _grace_now(facts)
    grace = max(plan.grace_seconds, have)
    if grace != have:
        rules.append(GRACE_RULE)
    before_requests = prestop + (facts.drain_seconds or 0.0)
    return ShutdownPlan(
        prestop_seconds=prestop,
        hook=kind,
        grace_seconds=grace,
        rules=tuple(rules),
        window_seconds=plan.window_seconds,
        source=plan.source,
        version_known=facts.kube_version is not None,
        needed_grace_seconds=plan.needed_grace_seconds,
        grace_cuts_requests=cuts_requests(have, before_requests, facts.longest_request_seconds),
        window_hop=plan.window_hop,
    )


def plan_data(plan: ShutdownPlan) -> dict[str, object]:
    """The plan as JSON data (``diagnose -o json``'s race ``details.plan``)."""
    p = plan.probes
    return {
        "prestop_seconds": plan.prestop_seconds,
        "hook": plan.hook.value,
        "grace_seconds": plan.grace_seconds,
        "rules": list(plan.rules),
        "window_seconds": plan.window_seconds,
        "source": plan.source.value,
        "version_known": plan.version_known,
        "needed_grace_seconds": plan.needed_grace_seconds,
        "grace_cuts_requests": plan.grace_cuts_requests,
        "probes": {"change": p.change.value, "liveness": p.liveness, "port": p.port},
        "window_hop": plan.window_hop,
    }


def plan_from_data(data: Mapping[str, Any]) -> ShutdownPlan:
    """The plan from :func:`plan_data`'s data (``prestop_seconds`` and ``grace_seconds``
    required, the rest defaulted); ``ValueError`` when it is not such data."""
    try:
        probes = data.get("probes") or {}
        port = probes.get("port")
        liveness = probes.get("liveness")
        prestop = _whole(data["prestop_seconds"])
        plan = ShutdownPlan(
            prestop_seconds=prestop,
            hook=HookKind(data.get("hook", HookKind.SLEEP if prestop else HookKind.NONE)),
            grace_seconds=_whole(data["grace_seconds"]),
            rules=tuple(str(r) for r in data.get("rules", ())),
            window_seconds=float(data.get("window_seconds", prestop)),
            source=WindowSource(data.get("source", WindowSource.DIAGNOSED)),
            version_known=bool(data.get("version_known", False)),
            needed_grace_seconds=_whole(data.get("needed_grace_seconds", data["grace_seconds"])),
            grace_cuts_requests=bool(data.get("grace_cuts_requests", False)),
            probes=ProbeSplit(
                ProbeChange(probes.get("change", ProbeChange.NONE.value)),
                dict(liveness) if isinstance(liveness, Mapping) else None,
                port if isinstance(port, int | str) and not isinstance(port, bool) else None,
            ),
            window_hop=str(data.get("window_hop", "")),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a shutdown plan: {exc!r}") from None
    if not math.isfinite(plan.window_seconds):
        raise ValueError("not a shutdown plan: window_seconds is not finite")
    return plan


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 86_400:
        raise ValueError(f"not a number of seconds: {value!r}")
    return value


# --- the hops' own settings (``model.path``) -------------------------------------------


class HopChange(StrEnum):
    """A setting of a hop the shutdown plan needs."""

    READINESS_GATE = "readiness-gate"  # the load balancer's pod readiness gate
    DEREGISTRATION = "deregistration-delay"  # the target group's deregistration delay
    SIDECAR_DRAIN = "sidecar-drain"  # the pod's proxy keeps working through the shutdown


@dataclass(frozen=True, slots=True)
class HopSetting:
    """One setting of one hop: set ``key`` of ``target`` to ``value`` (``current``: what it
    is now, ``None`` unset). ``writable``: an annotation of the object itself, which ``fix``
    writes; otherwise a step for the user (a Namespace label, a controller flag).
    ``rule``: the lint rule that asks for it; ``why``: the sentence that says why."""

    change: HopChange
    rule: str
    hop: Hop
    target: ObjectRef
    key: str
    value: str
    current: str | None
    writable: bool
    why: str


# The load balancers whose readiness gate a Namespace label turns on (the AWS Load Balancer
# Controller's webhook); GKE's NEG gate comes with an Ingress' NEGs, not with a label.
AWS_GATED = frozenset(
    {Implementation.AWS_ALB, Implementation.AWS_NLB, Implementation.AWS_TARGET_GROUP}
)

HOP_RULES = {
    HopChange.READINESS_GATE: "SVD111",
    HopChange.DEREGISTRATION: "SVD112",
    HopChange.SIDECAR_DRAIN: "SVD113",
}


def sidecar_drain_needed(plan: ShutdownPlan, facts: ShutdownFacts, hop: Hop) -> int:
    """How long the pod's proxy must keep working after the deletion. Istio's Envoy is
    killed when ``terminationDrainDuration`` ends and Linkerd's proxy refuses new requests
    once ``proxy-wait-before-exit-seconds`` ends (the app's outbound calls too), whatever
    the app does: they must last through the preStop, the app's own drain and the longest
    request. With ``EXIT_ON_ZERO_ACTIVE_CONNECTIONS`` Istio waits ``MINIMUM_DRAIN_DURATION``,
    then exits as soon as no connection is open: that wait must last while new requests
    can still arrive (preStop and the app's drain); the open connections hold it after
    (istio/istio pkg/envoy/agent.go; istio #36631, #44690; linkerd2 #11084)."""
    taking = plan.prestop_seconds + (facts.drain_seconds or 0.0)
    if hop.exit_on_idle:
        return seconds(taking)
    return seconds(taking + facts.longest_request_seconds)


def plan_hops(
    plan: ShutdownPlan,
    facts: ShutdownFacts,
    hops: Iterable[Hop],
    workload: ObjectRef,
    annotations: Mapping[str, str] | None = None,
) -> tuple[HopSetting, ...]:
    """The settings of the hops in front of (and beside) one container that the shutdown
    ``plan`` needs (pure):

    - a load balancer sending to pod IPs: the pods carry its readiness gate (AWS: the
      Namespace label ``elbv2.k8s.aws/pod-readiness-gate-inject: enabled``, so a rollout
      waits for new targets to be healthy and old ones to deregister); its deregistration
      delay at least the longest request (in-flight requests are cut when it ends) and at
      most the grace period (past it the pod is gone: the target drains for nothing);
    - the pod's own proxy, unless it is a native sidecar (stopped after the app) or its
      settings could not be read (``Hop.problems``): see :func:`sidecar_drain_needed`.
      ``annotations``: the pod template's, so that a new ``proxy.istio.io/config`` keeps
      the ProxyConfig fields it has."""
    out: dict[tuple[HopChange, ObjectRef, str], HopSetting] = {}

    def add(
        change: HopChange,
        hop: Hop,
        target: ObjectRef,
        key: str,
        value: str,
        current: str | None,
        writable: bool,
        why: str,
    ) -> None:
        setting = HopSetting(
            change, HOP_RULES[change], hop, target, key, value, current, writable, why
        )
        out.setdefault((change, target, key), setting)

    longest = seconds(facts.longest_request_seconds)
    for hop in hops:
        if hop.kind is HopKind.LOAD_BALANCER and hop.ip_targets and hop.via is not None:
            if hop.readiness_gate is False and hop.implementation in AWS_GATED:
                ns = ObjectRef("Namespace", "", workload.namespace or "default")
                add(
                    HopChange.READINESS_GATE,
                    hop,
                    ns,
                    ALB_GATE_LABEL,
                    "enabled",
                    None,
                    False,
                    f"{hop.label} sends to pod IPs; without its readiness gate a rollout can "
                    "take old pods away before new ones are healthy targets",
                )
            dereg = hop.deregistration
            if dereg is not None and not longest <= dereg.seconds <= plan.grace_seconds:
                want = min(max(longest, 1), plan.grace_seconds)
                too = (
                    "shorter than the longest request"
                    if dereg.seconds < longest
                    else (f"longer than the grace period ({plan.grace_seconds} s)")
                )
                key, value = _tg_setting(hop, want)
                add(
                    HopChange.DEREGISTRATION,
                    hop,
                    hop.via,
                    key,
                    value,
                    f"{dereg.seconds:g}",
                    True,
                    f"{hop.label}'s deregistration delay {dereg.seconds:g} s ({dereg.source}) "
                    f"is {too}",
                )
        if hop.kind is HopKind.SIDECAR and not hop.native and not hop.problems:
            setting = _sidecar_setting(plan, facts, hop, workload, annotations or {})
            if setting is not None:
                out.setdefault((setting.change, workload, setting.key), setting)
    return tuple(out.values())


def _sidecar_setting(
    plan: ShutdownPlan,
    facts: ShutdownFacts,
    hop: Hop,
    workload: ObjectRef,
    annotations: Mapping[str, str],
) -> HopSetting | None:
    """The drain setting of the pod's own proxy when it is too short (``None``: long
    enough). Istio's goes into ``proxy.istio.io/config``, merged with the fields the
    annotation has; Linkerd's is ``proxy-wait-before-exit-seconds``."""
    need = sidecar_drain_needed(plan, facts, hop)
    have = hop.drain.seconds if hop.drain else 0.0
    if have >= need:
        return None
    taking = plan.prestop_seconds + (facts.drain_seconds or 0.0)
    planned = (
        f" (with the {plan.prestop_seconds} s preStop the plan adds)"
        if plan.prestop_seconds and not facts.current_prestop_seconds
        else ""
    )
    if hop.implementation is Implementation.ISTIO_SIDECAR:
        key = ISTIO_PROXY_CONFIG
        field = "MINIMUM_DRAIN_DURATION" if hop.exit_on_idle else "terminationDrainDuration"
        value = merged_proxy_config(annotations.get(key), field, f"{need}s")
    else:
        key, field, value = LINKERD_WAIT, "proxy-wait-before-exit-seconds", str(need)
    if hop.exit_on_idle:
        why = (
            f"the {hop.label} may exit {have:g} s after the deletion ({field} with "
            "EXIT_ON_ZERO_ACTIVE_CONNECTIONS: at the first moment no connection is open), "
            f"while new requests reach the pod for {taking:g} s{planned}"
        )
    else:
        stops = (
            "stops" if hop.implementation is Implementation.ISTIO_SIDECAR else "refuses requests"
        )
        why = (
            f"the {hop.label} {stops} {have:g} s after the deletion ({field}), while the app "
            f"takes requests for {taking:g} s{planned} and finishes them within {need} s"
        )
    return HopSetting(
        HopChange.SIDECAR_DRAIN,
        HOP_RULES[HopChange.SIDECAR_DRAIN],
        hop,
        workload,
        key,
        value,
        f"{have:g}",
        True,
        why,
    )


def merged_proxy_config(current: str | None, field: str, value: str) -> str:
    """A ``proxy.istio.io/config`` annotation with ``field`` set to ``value`` and the other
    ProxyConfig fields of ``current`` kept (``MINIMUM_DRAIN_DURATION`` goes under
    ``proxyMetadata``, beside ``EXIT_ON_ZERO_ACTIVE_CONNECTIONS``). An unreadable
    ``current`` is not merged (its hop has ``problems``: no setting is planned for it)."""
    try:
        data = yaml.safe_load(current) if current else None
    except yaml.YAMLError:
        data = None
    config: dict[str, Any] = dict(data) if isinstance(data, dict) else {}
    if field == "terminationDrainDuration":
        config[field] = value
    else:
        meta = config.get("proxyMetadata")
        config["proxyMetadata"] = {**(meta if isinstance(meta, dict) else {}), field: value}
    if list(config) == [field]:
        return f"{field}: {value}"
    text: str = yaml.safe_dump(config, default_flow_style=True, sort_keys=False, width=1 << 20)
    return text.strip()


def _tg_setting(hop: Hop, delay: int) -> tuple[str, str]:
    """The annotation that sets a load balancer's deregistration delay, and its value: an
    AWS target group's attributes, or Application Gateway's connection-draining timeout
    (connection draining itself turned on beside it)."""
    if hop.implementation is Implementation.AZURE_APPGW:
        return AGIC_DRAINING_TIMEOUT, str(delay)
    key = NLB_TG_ATTRIBUTES if hop.implementation is Implementation.AWS_NLB else ALB_TG_ATTRIBUTES
    return key, f"deregistration_delay.timeout_seconds={delay}"


# --- connection reuse (cause 3) ---------------------------------------------------------


class Transport(StrEnum):
    """How clients hold connections to the backends."""

    HTTP1 = "http1"  # keep-alive pools: a connection per request in flight, reused
    HTTP2 = "http2"  # HTTP/2 or gRPC: every request multiplexed over one connection


class Exposure(StrEnum):
    """Who connects: clients in the cluster (a ClusterIP), or outside ones through a
    LoadBalancer or NodePort (no headless Service, no client sidecar for them)."""

    CLUSTER = "cluster"
    EXTERNAL = "external"


class ConnectionStep(StrEnum):
    """One remedy for connection reuse, in the plan's order of preference."""

    SERVER_IDLE_LONGER = "server-idle-longer"  # the server's keep-alive outlives the caller's
    CLIENT_IDLE_SHORTER = "client-idle-shorter"  # or the caller's ends first
    HEADLESS = "headless-round-robin"  # clients balance over pod IPs (clusterIP: None)
    MAX_AGE = "max-connection-age"  # the server bounds connection age: clients rebalance
    CLIENT_RECONNECT = "client-reconnect"  # clients bound it themselves
    L7_BALANCER = "l7-balancer"  # a proxy or mesh that balances each request
    CLOSE_ON_SIGTERM = "close-on-sigterm"  # Connection: close / GOAWAY while draining


@dataclass(frozen=True, slots=True)
class ConnectionFacts:
    """What is known about how one Service's clients reuse connections.

    ``caller_idle_seconds``: how long the caller (a proxy, load balancer or client pool)
    keeps an idle connection; ``server_idle_seconds``: how long the server does (``None``:
    unknown). ``bounds_age``: the server already sets a maximum connection age.
    ``can_bound_age``: the server can set one (gRPC servers, HTTP servers with a keep-alive
    request or age limit; ``False`` for one the user cannot configure)."""

    transport: Transport = Transport.HTTP2
    exposure: Exposure = Exposure.CLUSTER
    caller_idle_seconds: float | None = None
    server_idle_seconds: float | None = None
    bounds_age: bool = False
    can_bound_age: bool = True
    longest_request_seconds: float = DEFAULT_MAX_REQUEST_SECONDS
    max_age_seconds: float = DEFAULT_MAX_CONNECTION_AGE


@dataclass(frozen=True, slots=True)
class ConnectionPlan:
    """The connection settings to have: ``steps`` in order of preference (any one of the
    balancing steps is enough; the idle steps are alternatives of each other), with their
    numbers. ``rules``: the lint rules the plan answers."""

    steps: tuple[ConnectionStep, ...]
    rules: tuple[str, ...]
    max_age_seconds: int | None = None
    max_age_grace_seconds: int | None = None  # streams in flight finish within it
    server_idle_seconds: int | None = None
    caller_idle_seconds: int | None = None

    @property
    def rule_text(self) -> str:
        return "/".join(self.rules)


def plan_connections(facts: ConnectionFacts) -> ConnectionPlan:
    """The reuse remedy for ``facts`` (pure).

    - Idle timeouts: when the server closes idle connections no later than the caller
      reuses them, the server's must outlive the caller's (``caller + IDLE_MARGIN``), or the
      caller's end first (``server - 1``, at least 1 s).
    - Balancing (HTTP/2, unless the server already bounds connection age): a headless
      Service with client-side round robin for in-cluster clients, a maximum connection age
      (``max_age_seconds``, with a grace for the longest request) when the server can set
      one, clients that reconnect by themselves for outside ones, a layer-7 balancer. SVD301
      is the rule.
    - Always: answer with ``Connection: close`` (HTTP/1.1) or GOAWAY (HTTP/2) after SIGTERM,
      so clients move their connections before the pod exits."""
    steps: list[ConnectionStep] = []
    rules: list[str] = []
    server_idle = caller_idle = None
    have_server, have_caller = facts.server_idle_seconds, facts.caller_idle_seconds
    if have_server is not None and have_caller is not None and have_server <= have_caller:
        server_idle = seconds(have_caller + IDLE_MARGIN)
        caller_idle = max(math.ceil(have_server) - 1, 1)
        steps += [ConnectionStep.SERVER_IDLE_LONGER, ConnectionStep.CLIENT_IDLE_SHORTER]
    age = grace = None
    if facts.transport is Transport.HTTP2 and not facts.bounds_age:
        rules.append(STICKY_RULE)
        if facts.exposure is Exposure.CLUSTER:
            steps.append(ConnectionStep.HEADLESS)
        if facts.can_bound_age:
            steps.append(ConnectionStep.MAX_AGE)
            age = max(seconds(facts.max_age_seconds), 1)
            grace = max(seconds(facts.longest_request_seconds), 1)
        if facts.exposure is Exposure.EXTERNAL or not facts.can_bound_age:
            steps.append(ConnectionStep.CLIENT_RECONNECT)
        steps.append(ConnectionStep.L7_BALANCER)
    steps.append(ConnectionStep.CLOSE_ON_SIGTERM)
    return ConnectionPlan(
        steps=tuple(steps),
        rules=tuple(rules),
        max_age_seconds=age,
        max_age_grace_seconds=grace,
        server_idle_seconds=server_idle,
        caller_idle_seconds=caller_idle,
    )
