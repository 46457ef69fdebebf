"""The scenario's options, shared by ``lab run`` and ``simulate``: one spelling and one help
text per option; each command gives its own bounds (a lab runs on this machine, a simulation
models thousands of nodes) and how it shows the default."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from svcdoctor.cli._params import Option
from svcdoctor.model.scenario import BAD_FAULTS, ConnectionMode, FaultMode, ShutdownMode, modes

F = TypeVar("F", bound=Callable[..., Any])
DAY = 86_400.0
SHUTDOWNS = click.Choice(modes(ShutdownMode))
CONNECTIONS = click.Choice(modes(ConnectionMode))
LAB_CONNECTIONS = click.Choice(modes(ConnectionMode, ConnectionMode.NEW, ConnectionMode.KEEPALIVE))
FAULTS = click.Choice(modes(FaultMode, *BAD_FAULTS))

# each option is spelled as its name: "max_surge" is --max-surge
_HELP: dict[str, str] = {
    "nodes": "Nodes (one kube-proxy each).",
    "replicas": "Pods of the Deployment.",
    "max_surge": "Pods created above the replicas during the rollout: a number or a percentage.",
    "max_unavailable": "Pods below the replicas during the rollout: a number or a percentage.",
    "rate": "Requests per second, all clients together.",
    "clients": "Clients sending the requests (calling pods).",
    "connection": "How clients connect: a new connection per request, ",
    "max_connection_age": "Clients reconnect after this long.",
    "retries": "Client retries of a failed request.",
    "prestop": "preStop sleep, seconds.",
    "grace": "terminationGracePeriodSeconds.",
    "shutdown": "At SIGTERM: naive exits at once, graceful drains in-flight requests first.",
    "latency": "Request latency.",
    "bad_backends": "Pods that pass readiness but fail real requests.",
    "fault": "How a bad pod fails real requests (it still passes readiness).",
    "propagation": "Deletion → proxy stops routing, all included (e.g. the window `svcdoctor "
    "diagnose` measured).",
    "min_sync_period": "kube-proxy's --iptables-min-sync-period.",
}
_HELP_OF_CONNECTION = {
    2: "or keep-alive.",
    3: "keep-alive, or HTTP/2 (one long-lived connection each).",
}


def scenario_options(
    types: Mapping[str, click.ParamType[Any]],
    attrs: Mapping[str, Mapping[str, Any]] | None = None,
    cls: type[click.Option] = Option,
) -> Callable[[F], F]:
    """The options named in ``types`` (their value types: the command's bounds), in the
    order given; ``attrs`` adds to an option's (``default_text``, ``default``, ``help`` to
    say more, ``aliases``)."""
    attrs = attrs or {}

    def decorate(f: F) -> F:
        for name in reversed(list(types)):
            text = _HELP[name]
            kind = types[name]
            if name == "connection" and isinstance(kind, click.Choice):
                text += _HELP_OF_CONNECTION[len(kind.choices)]
            extra = dict(attrs.get(name, {}))
            if "help" in extra:
                text = f"{text} {extra.pop('help')}"
            if name == "min_sync_period":
                extra.setdefault("aliases", ("--min-sync",))
            if extra.get("default") is not None:
                extra.setdefault("show_default", True)
            extra.setdefault("cls", cls)
            f = click.option("--" + name.replace("_", "-"), type=kind, help=text, **extra)(f)
        return f

    return decorate
