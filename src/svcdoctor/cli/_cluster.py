"""Options every live-cluster command shares, named as kubectl names them."""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> NoReturn:
    """A cluster or input problem: one line on stderr, exit 2."""
    click.echo(f"svcdoctor: error: {message}", err=True)
    sys.exit(2)


_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(text: str, flag: str) -> float:
    """Seconds from ``90``, ``90s``, ``2m``, ``1h30m`` (kubectl's style); finite and > 0."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        match = _DURATION.match(value)
        if not value or match is None or not any(match.groups()):
            raise click.BadParameter(
                f"{text!r} is not a duration: use seconds (90) or 90s, 2m, 1h", param_hint=flag
            ) from None
        h, m, s = (float(g) if g else 0.0 for g in match.groups())
        seconds = h * 3600 + m * 60 + s
    if not math.isfinite(seconds) or seconds <= 0:
        raise click.BadParameter(f"{text!r} must be a positive, finite duration", param_hint=flag)
    return seconds


def duration_option(*names: str, **kwargs: Any) -> Callable[[F], F]:
    """A click option taking a duration (see ``parse_duration``), as seconds."""

    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
        return None if value is None else parse_duration(value, names[0])

    return click.option(*names, callback=convert, metavar="DURATION", **kwargs)


def cluster_options(all_namespaces: bool = True) -> Callable[[F], F]:
    """``--kubeconfig``, ``--context``, ``-n/--namespace``, ``-A/--all-namespaces`` and
    ``--request-timeout``; the command receives them as ``cluster`` (a dict for
    ``svcdoctor.cluster.connect``)."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kw: Any) -> Any:
            kw["cluster"] = {
                "kubeconfig": kw.pop("kubeconfig"),
                "context": kw.pop("context"),
                "namespace": kw.pop("namespace"),
                "all_namespaces": kw.pop("all_namespaces", False),
                "timeout": kw.pop("request_timeout"),
            }
            return command(*args, **kw)

        options = [
            click.option(
                "--kubeconfig",
                metavar="PATH",
                help="kubeconfig file (default: $KUBECONFIG, several merged like kubectl, "
                "else ~/.kube/config, else the in-cluster service account)",
            ),
            click.option("--context", metavar="NAME", help="kubeconfig context to use"),
            click.option(
                "-n", "--namespace", metavar="NS", help="namespace (default: the context's)"
            ),
            duration_option(
                "--request-timeout",
                default="10s",
                show_default=True,
                help="bound on connecting to and each request to the API server",
            ),
        ]
        if all_namespaces:
            options.append(
                click.option("-A", "--all-namespaces", is_flag=True, help="every namespace")
            )
        wrapped: Any = wrapper
        for option in reversed(options):
            wrapped = option(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate
