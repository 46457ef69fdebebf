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
- grace ``G = P + L + margin`` (whole seconds), never lowered below what the object has
  (the default 30 s when it sets none) unless ``allow_lower_grace``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from svcdoctor.model.workload import DEFAULT_GRACE_SECONDS

# Lint's assumptions when nothing was measured (``--propagation-seconds`` and friends).
DEFAULT_PROPAGATION_SECONDS = 5.0
DEFAULT_MAX_REQUEST_SECONDS = 10.0
DEFAULT_MARGIN_SECONDS = 5.0
NATIVE_SLEEP_VERSION = (1, 30)  # lifecycle.preStop.sleep: beta and on by default (GA 1.34)
MIN_PRESTOP_MARGIN = 2.0  # seconds added to a measured window, at least
PRESTOP_MARGIN_SHARE = 0.5  # …or this share of it, whichever is larger

RACE_RULES = ("SVD101", "SVD103")  # the preStop delay
GRACE_RULE = "SVD102"  # the grace period
NO_SHELL_RULE = "SVD104"


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
    itself (0: it stops at once). ``current_prestop_seconds`` / ``current_grace_seconds``:
    what the object has (``None``: no sleep / grace not set, 30 s applies).
    ``has_shell``: whether the image has ``sh`` (``None``: unknown)."""

    window_seconds: float = DEFAULT_PROPAGATION_SECONDS
    source: WindowSource = WindowSource.ASSUMED
    longest_request_seconds: float = DEFAULT_MAX_REQUEST_SECONDS
    margin_seconds: float = DEFAULT_MARGIN_SECONDS
    drain_seconds: float = 0.0
    kube_version: tuple[int, int] | None = None
    current_prestop_seconds: float | None = None
    current_grace_seconds: int | None = None
    has_shell: bool | None = None
    allow_lower_grace: bool = False


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
    needed_grace_seconds: int  # preStop + longest request + margin, before any floor

    @property
    def hook_body(self) -> dict[str, object] | None:
        """The ``lifecycle.preStop`` mapping, or ``None`` when there is none to set."""
        return hook_body(self.hook, self.prestop_seconds)

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


def hook_kind(version: tuple[int, int] | None, has_shell: bool | None) -> HookKind:
    """Native ``sleep`` where the cluster has it (or the version is unknown), ``exec`` with a
    shell before 1.30, impossible before 1.30 in an image without a shell."""
    if native_sleep(version) is False:
        return HookKind.IMPOSSIBLE if has_shell is False else HookKind.EXEC
    return HookKind.SLEEP


def hook_body(kind: HookKind, prestop: int) -> dict[str, object] | None:
    if kind is HookKind.SLEEP:
        return {"sleep": {"seconds": prestop}}
    if kind is HookKind.EXEC:
        return {"exec": {"command": ["sh", "-c", f"sleep {prestop}"]}}
    return None


def plan_shutdown(facts: ShutdownFacts) -> ShutdownPlan:
    """The shutdown plan for ``facts`` (pure)."""
    window = max(facts.window_seconds, 0.0)
    if facts.source is WindowSource.ASSUMED:
        wanted = window
    else:
        wanted = window + prestop_margin(window) if window > 0 else 0.0
    wanted = max(wanted - facts.drain_seconds, 0.0)
    current = facts.current_prestop_seconds or 0.0
    prestop = max(seconds(wanted), seconds(current))
    rules: list[str] = []
    if prestop > 0:
        kind = hook_kind(facts.kube_version, facts.has_shell)
        rules += ["SVD101"] if not current else (["SVD103"] if prestop > current else [])
        if kind is HookKind.IMPOSSIBLE:
            rules.append(NO_SHELL_RULE)
    else:
        kind = HookKind.NONE
    needed = needed_grace(prestop, facts.longest_request_seconds, facts.margin_seconds)
    have = (
        facts.current_grace_seconds
        if facts.current_grace_seconds is not None
        else DEFAULT_GRACE_SECONDS
    )
    floor = 0 if facts.allow_lower_grace else have
    grace = max(needed, floor)
    if grace != have:
        rules.append(GRACE_RULE)
    return ShutdownPlan(
        prestop_seconds=prestop,
        hook=kind,
        grace_seconds=grace,
        rules=tuple(rules),
        window_seconds=window,
        source=facts.source,
        version_known=facts.kube_version is not None,
        needed_grace_seconds=needed,
    )
