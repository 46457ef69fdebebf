"""The ``svcdoctor`` command line (also installed as the kubectl plugin ``kubectl-svcdoctor``)."""

from __future__ import annotations

import click

from svcdoctor import __version__
from svcdoctor.cli.collect import collect
from svcdoctor.cli.diagnose import diagnose
from svcdoctor.cli.lab import lab
from svcdoctor.cli.lint import lint
from svcdoctor.cli.rules import rules
from svcdoctor.cli.scan import scan
from svcdoctor.cli.simulate import simulate


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="svcdoctor")
def cli() -> None:
    """Find, explain and fix intermittent failures of calls through Kubernetes Services."""


cli.add_command(lint)
cli.add_command(diagnose)
cli.add_command(lab)
cli.add_command(simulate)
cli.add_command(rules)
cli.add_command(scan)
cli.add_command(collect)


def main() -> None:
    cli(prog_name="svcdoctor")


__all__ = ["cli", "main"]
