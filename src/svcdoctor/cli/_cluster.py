"""Options every live-cluster command shares, named as kubectl names them."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from svcdoctor.cli._params import Duration, Number, option, output_option
from svcdoctor.cli._report import html_option
from svcdoctor.errors import CommandError

if TYPE_CHECKING:
    from rich.console import Console

    from svcdoctor.cluster.agentjob import Cleanup

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


def rate_option(text: str) -> Callable[[F], F]:
    """``--rate``: the requests/s the agent sends (50 unless given), described by ``text``."""
    return option("--rate", type=Number(0, 5000, low_open=True), default=50, help=text)


def image_option(text: str) -> Callable[[F], F]:
    """``--image``: the agent's image, described by ``text`` (default: python:3.12-slim by
    digest, ``svcdoctor.cluster.agentjob.DEFAULT_IMAGE``)."""
    return option(
        "--image",
        help=f"{text} A tag can move: pin a digest.",
        default_text="python:3.12-slim@sha256:78387bc3…",
    )


no_redact_option = click.option(
    "--no-redact", is_flag=True, help="Keep secrets (env values, tokens) in the bundle."
)


def client_logs_option(does: str) -> Callable[[F], F]:
    """``--client-logs SELECTOR``: what the command ``does`` with the logs of the client pods
    the label selector matches (their request rows)."""
    return option(
        "--client-logs",
        metavar="SELECTOR",
        help=f"Also {does} the request rows in the logs of client pods matching this label "
        "selector.",
        default_text="none",
    )


network_policy_option = click.option(
    "--network-policy",
    is_flag=True,
    help="Also create a NetworkPolicy (owned by the agent's Job, deleted with it) letting the "
    "agent reach only the Service's pods on their ports, and DNS; needs create/delete on "
    "networkpolicies.networking.k8s.io.",
)


def agent_run_options(yes: str) -> Callable[[F], F]:
    """The last options of a command that runs the agent: ``--yes`` (described by ``yes``),
    ``--format text|json`` and ``--html``."""

    def decorate(command: F) -> F:
        command = html_option(command)
        command = output_option(("text", "json"))(command)
        return click.option("--yes", is_flag=True, help=yes)(command)

    return decorate


@contextmanager
def agent_run(objects: str, were: str = "were") -> Iterator[None]:
    """How a command that runs the agent ends on a refusal or a cluster problem (one line,
    exit 2) and on Ctrl-C (exit 130, saying whether ``objects`` were deleted and where the
    evidence written so far is)."""
    from svcdoctor.cluster import ClusterError
    from svcdoctor.cluster.agentjob import AgentArgsError, Interrupted
    from svcdoctor.cluster.collect import BundleError
    from svcdoctor.cluster.rollout import Refused

    try:
        yield
    except (ClusterError, Refused, BundleError, AgentArgsError) as exc:
        fail(str(exc))
    except Interrupted as exc:
        left = exc.cleanup.describe_left()
        done = f"deleting {objects}: {left}" if left else f"{objects} {were} deleted"
        where = f"; the bundle so far is in {exc.bundle}" if exc.bundle else ""
        click.echo(f"svcdoctor: interrupted; {done}{where}", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("svcdoctor: interrupted before anything was created", err=True)
        sys.exit(130)


def print_notes(
    console: Console, notes: Iterable[str], cleanup: Cleanup | None, left: str = ""
) -> None:
    """An agent run's notes, then what its clean-up left (after the words ``left``)."""
    remaining = cleanup.describe_left() if cleanup else None
    for note in (*notes, *([left + remaining] if remaining else [])):
        console.print(f"note: {note}", soft_wrap=True)


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


def service_command(command: Callable[..., Any]) -> click.Command:
    """A command about one Service: its ``SERVICE`` argument and the cluster options of one
    namespace (collect, investigate, probe)."""
    with_service = click.argument("service")(cluster_options(all_namespaces=False)(command))
    return click.command()(with_service)
