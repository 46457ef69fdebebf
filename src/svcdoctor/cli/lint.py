"""``svcdoctor lint``: static checks of manifests for the four causes."""

from __future__ import annotations

import os
import sys
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import click

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.cli._checking import check_options, exit_for, load_settings, render
from svcdoctor.manifests import DEFAULT_MAX_FILE_MB, build_inventory, load

EXAMPLE = "shop.yaml"


def lint_paths(paths: list[str], settings: Settings, max_file_mb: float) -> LintResult:
    """Read the inputs and run the checks (the library entry point of ``lint``)."""
    stdin = sys.stdin.buffer if sys.stdin is not None else None  # None when fd 0 is closed
    loaded = load(paths, stdin=stdin, max_file_mb=max_file_mb)
    return run_checks(build_inventory(loaded), settings)


@click.command()
@click.argument("paths", nargs=-1, type=str)
@click.option("--example", is_flag=True, help="Lint the example manifests shipped with svcdoctor.")
@check_options(("text", "json", "sarif", "github"))
@click.option(
    "--max-file-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=f"Refuse larger input files.  [default: {DEFAULT_MAX_FILE_MB:g}]",
)
def lint(
    paths: tuple[str, ...],
    example: bool,
    fmt: str,
    exit_zero: bool,
    config_path: Path | None,
    no_fixes: bool,
    **opts: Any,
) -> None:
    """Check Kubernetes manifests for configurations that cause intermittent failures.

    PATHS are files, directories (searched for *.yaml, *.yml, *.json) or - for stdin
    (e.g. `helm template … | svcdoctor lint -`). Exit codes: 0 clean, 1 findings at or
    above --fail-on, 2 usage or input errors.
    """
    if not paths and not example:
        raise click.UsageError("give PATHS to lint (or - for stdin, or --example)")
    settings, fail_on, max_file_mb = load_settings(config_path, opts)
    with as_file(files("svcdoctor.examples") / EXAMPLE) as example_path:
        targets = list(paths) + ([_shown(example_path)] if example else [])
        result = lint_paths(targets, settings, max_file_mb)
    render(result, fmt, no_fixes)
    exit_for(result, fail_on, exit_zero)


def _shown(path: Path) -> str:
    """A path relative to the working directory when it is below it."""
    try:
        return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)
