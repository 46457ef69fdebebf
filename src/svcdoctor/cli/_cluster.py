"""Options every live-cluster command shares, named as kubectl names them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from svcdoctor.cli._params import Duration, option
from svcdoctor.errors import CommandError

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> NoReturn:
    """A cluster or input problem: one line on stderr, exit 2 (see ``_errors``)."""
    raise CommandError(message, 2)


_POSITIVE = Duration(0, 86_400 * 7, low_open=True)


def parse_duration(text: str, flag: str) -> float:
    """Seconds from ``90``, ``90s``, ``2m``, ``1h30m``, ``500ms`` (kubectl's style); finite,
    > 0 and at most a week."""
    try:
        return float(_POSITIVE.convert(text, None, None))
    except click.BadParameter as exc:
        raise click.BadParameter(exc.message, param_hint=flag) from None


def duration_option(*names: str, **kwargs: Any) -> Callable[[F], F]:
    """An option taking a positive duration (see ``parse_duration``), as seconds."""
    kwargs.setdefault("type", _POSITIVE)
    return option(*names, **kwargs)


# the options of the commands that run the agent (probe, rollout-test)
port_option = option(
    "--port", metavar="NAME|NUMBER", help="Service port.", default_text="the first"
)
path_option = option("--path", default="/", help="HTTP path of the requests.")


def image_option(text: str) -> Callable[[F], F]:
    """``--image``: the agent's image, described by ``text``."""
    return option("--image", help=text, default_text="python:3.12-slim")


def cluster_options(all_namespaces: bool = True) -> Callable[[F], F]:
    """``--kubeconfig``, ``--context``, ``-n/--namespace``, ``-A/--all-namespaces`` and
    ``--request-timeout``; the command receives them as ``cluster`` (a dict for
    ``svcdoctor.cluster.api.connect``)."""

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
            option(
                "--context",
                metavar="NAME",
                help="kubeconfig context to use",
                default_text="the kubeconfig's current-context",
            ),
            option(
                "-n",
                "--namespace",
                metavar="NS",
                help="namespace",
                default_text="the context's",
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
                click.option(
                    "-A", "--all-namespaces", is_flag=True, help="every namespace (default: one)"
                )
            )
        wrapped: Any = wrapper
        for decorator in reversed(options):
            wrapped = decorator(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate
