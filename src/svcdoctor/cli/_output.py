"""Where the commands print: a rich console that wraps only on a terminal."""

from __future__ import annotations

import os
import sys

from rich.console import Console

# off a terminal (a pipe, a file, CI logs) lines are never wrapped: the commands they hold
# must stay copy-pasteable; tables get this many columns before they fold a cell
PIPE_WIDTH = 200


def stdout_console(
    *, stderr: bool = False, highlight: bool = False, markup: bool = True
) -> Console:
    """A console on stdout (or stderr); off a terminal it does not wrap long lines.
    ``markup=False``: what is printed is plain text (``[tool.svcdoctor]`` stays as it is)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream is not None and stream.isatty():
        return Console(stderr=stderr, highlight=highlight, markup=markup)
    width = None if os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(stderr=stderr, highlight=highlight, markup=markup, soft_wrap=True, width=width)
