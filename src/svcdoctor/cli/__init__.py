"""The ``svcdoctor`` command line (also installed as the kubectl plugin ``kubectl-svcdoctor``)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from svcdoctor import __version__
from svcdoctor.cli._errors import handled
from svcdoctor.cli.cleanup import cleanup
from svcdoctor.cli.collect import collect
from svcdoctor.cli.diagnose import diagnose
from svcdoctor.cli.fix import fix
from svcdoctor.cli.investigate import investigate
from svcdoctor.cli.lab import lab
from svcdoctor.cli.lint import lint
from svcdoctor.cli.probe import probe
from svcdoctor.cli.rollout_test import rollout_test
from svcdoctor.cli.rules import rules
from svcdoctor.cli.scan import scan
from svcdoctor.cli.simulate import simulate


class Svcdoctor(click.Group):
    """The top-level group: every known error becomes one line and its exit code here, in
    one place; any other exception one line and exit 1 (``--debug``: the traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        with handled(lambda: bool(ctx.meta.get("svcdoctor.debug"))):
            return super().invoke(ctx)


def _debug(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    ctx.meta["svcdoctor.debug"] = value or bool(os.environ.get("SVCDOCTOR_DEBUG"))
    return value


@click.group(
    cls=Svcdoctor,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "-V", "--version", prog_name="svcdoctor")
@click.option(
    "--debug",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_debug,
    help="Print the traceback of an unexpected error (also SVCDOCTOR_DEBUG=1).",
)
def cli() -> None:
    """Find, explain and fix intermittent failures of calls through Kubernetes Services."""


cli.add_command(lint)
cli.add_command(fix)
cli.add_command(diagnose)
cli.add_command(lab)
cli.add_command(simulate)
cli.add_command(rules)
cli.add_command(scan)
cli.add_command(collect)
cli.add_command(probe)
cli.add_command(rollout_test)
cli.add_command(cleanup)
cli.add_command(investigate)


def prog_name(argv0: str) -> str:
    """``kubectl svcdoctor`` when run as the kubectl plugin, else ``svcdoctor``."""
    return "kubectl svcdoctor" if os.path.basename(argv0).startswith("kubectl-") else "svcdoctor"


def main() -> None:
    cli(prog_name=prog_name(sys.argv[0] if sys.argv else "svcdoctor"))


__all__ = ["cli", "main"]
