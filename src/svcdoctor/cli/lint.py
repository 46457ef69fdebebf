"""``svcdoctor lint``: static checks of manifests for the four causes."""

from __future__ import annotations

import os
import sys
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.cli.config import (
    Config,
    ConfigError,
    find_config,
    kube_version,
    read_config,
    rule_id,
    severity,
)
from svcdoctor.manifests import DEFAULT_MAX_FILE_MB, build_inventory, load
from svcdoctor.model import Severity
from svcdoctor.report import render_github, render_json, render_sarif, render_text

EXAMPLE = "shop.yaml"
FAIL_ON = ("info", "warning", "error")


def _ids(values: tuple[str, ...], flag: str) -> list[str]:
    return [rule_id(v, flag) for item in values for v in item.split(",") if v.strip()]


def _settings(config: Config, opts: dict[str, Any]) -> tuple[Settings, Severity, float]:
    """Merge file values and flags (flags win) into the checks' settings."""
    file = config.values
    where = config.source or "flags"

    def number(key: str, default: float) -> float:
        flag = opts[key.replace("-", "_")]
        return float(flag) if flag is not None else float(file.get(key, default))

    severities = dict(file.get("severity", {}))
    for item in opts["severity"]:
        rule, sep, level = item.partition("=")
        if not sep:
            raise ConfigError(f"--severity {item!r}: expected RULE=LEVEL, e.g. SVD302=warning")
        severities[rule_id(rule, "--severity")] = severity(level, f"--severity {rule}")
    flag_enabled = _ids(opts["enable"], "--enable")
    enabled = flag_enabled or file.get("enable")
    # --enable RULE runs RULE even if the config file disables it.
    disabled = (set(file.get("disable", [])) - set(flag_enabled)) | set(
        _ids(opts["disable"], "--disable")
    )
    version = (
        kube_version(opts["kube_version"], "--kube-version")
        if opts["kube_version"]
        else file.get("kube-version")
    )
    fail_on = (
        severity(opts["fail_on"], "--fail-on")
        if opts["fail_on"]
        else file.get("fail-on", Severity.WARNING)
    )
    del where
    settings = Settings(
        propagation_seconds=number("propagation-seconds", 5.0),
        max_request_seconds=number("max-request-seconds", 10.0),
        margin_seconds=number("margin-seconds", 5.0),
        kube_version=version,
        disabled=frozenset(disabled),
        enabled=frozenset(enabled) if enabled else None,
        severities=severities,
    )
    return settings, fail_on, number("max-file-mb", DEFAULT_MAX_FILE_MB)


def lint_paths(paths: list[str], settings: Settings, max_file_mb: float) -> LintResult:
    """Read the inputs and run the checks (the library entry point of ``lint``)."""
    stdin = sys.stdin.buffer if sys.stdin is not None else None  # None when fd 0 is closed
    loaded = load(paths, stdin=stdin, max_file_mb=max_file_mb)
    return run_checks(build_inventory(loaded), settings)


@click.command()
@click.argument("paths", nargs=-1, type=str)
@click.option("--example", is_flag=True, help="Lint the example manifests shipped with svcdoctor.")
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif", "github"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    default=None,
    help="Lowest severity that makes the exit code 1.  [default: warning]",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even with findings (input errors: 2).")
@click.option(
    "--enable",
    multiple=True,
    metavar="RULES",
    help="Run only these rules (ids or names, comma-separated).",
)
@click.option("--disable", multiple=True, metavar="RULES", help="Do not run these rules.")
@click.option(
    "--severity",
    multiple=True,
    metavar="RULE=LEVEL",
    help="Override a rule's severity, e.g. SVD302=warning.",
)
@click.option(
    "--propagation-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="Time endpoint removal takes to reach every node and LB.  [default: 5]",
)
@click.option(
    "--max-request-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="Longest legitimate request.  [default: 10]",
)
@click.option(
    "--margin-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="Slack added to computed grace periods.  [default: 5]",
)
@click.option(
    "--kube-version",
    default=None,
    metavar="X.Y",
    help="Target cluster version (chooses native preStop sleep from 1.30).",
)
@click.option(
    "--max-file-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=f"Refuse larger input files.  [default: {DEFAULT_MAX_FILE_MB:g}]",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Config file (default: nearest .svcdoctor.toml or pyproject.toml with [tool.svcdoctor]).",
)
@click.option("--no-fixes", is_flag=True, help="Text output: do not print the fixes.")
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
    try:
        found = config_path or find_config(Path.cwd())
        config = read_config(found) if found else Config()
        settings, fail_on, max_file_mb = _settings(config, opts)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    with as_file(files("svcdoctor.examples") / EXAMPLE) as example_path:
        targets = list(paths) + ([_shown(example_path)] if example else [])
        result = lint_paths(targets, settings, max_file_mb)
    _render(result, fmt, no_fixes)
    if result.input_errors:
        sys.exit(2)
    if not exit_zero and any(f.severity.rank >= fail_on.rank for f in result.findings):
        sys.exit(1)


def _shown(path: Path) -> str:
    """A path relative to the working directory when it is below it."""
    try:
        return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)


def _render(result: LintResult, fmt: str, no_fixes: bool) -> None:
    if fmt == "text":
        render_text(result, Console(highlight=False), show_fixes=not no_fixes)
    elif fmt == "json":
        click.echo(render_json(result))
    elif fmt == "sarif":
        click.echo(render_sarif(result))
    else:
        click.echo(render_github(result))
