"""What the commands that run the rules share (``lint`` on files, ``scan`` on a cluster):
the rule options, config file merging, rendering and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from svcdoctor.checks import LintResult, Settings
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import option, output_option
from svcdoctor.cli.config import (
    NUMBER_TYPES,
    Config,
    ConfigError,
    drain_flag,
    find_config,
    kube_version,
    read_config,
    rule_id,
    severity,
)
from svcdoctor.manifests import DEFAULT_MAX_FILE_MB
from svcdoctor.model import Severity, remedy
from svcdoctor.report import render_github, render_json, render_sarif, render_text

F = TypeVar("F", bound=Callable[..., Any])
FAIL_ON = ("info", "warning", "error")


def check_options(formats: tuple[str, ...]) -> Callable[[F], F]:
    """``-o/--output`` (one of ``formats``), ``--fail-on``, ``--exit-zero``, the rule
    selection and parameters, ``--config`` and ``--no-fixes``; the command receives
    ``fmt``, ``exit_zero``, ``config_path``, ``no_fixes`` and the rest in ``**opts``."""
    options = [
        output_option(formats),
        option(
            "--fail-on",
            type=click.Choice(FAIL_ON),
            default=None,
            help="Lowest severity that makes the exit code 1.",
            default_text="warning",
        ),
        click.option(
            "--exit-zero", is_flag=True, help="Exit 0 even with findings (input errors: 2)."
        ),
        option(
            "--enable",
            multiple=True,
            metavar="RULES",
            help="Run only these rules (ids or names, comma-separated).",
            default_text="every rule",
        ),
        option(
            "--disable",
            multiple=True,
            metavar="RULES",
            help="Do not run these rules.",
            default_text="none",
        ),
        option(
            "--severity",
            multiple=True,
            metavar="RULE=LEVEL",
            help="Override a rule's severity, e.g. SVD302=warning.",
            default_text="each rule's own",
        ),
        *_remedy_option_list(),
        click.option("--no-fixes", is_flag=True, help="Text output: do not print the fixes."),
    ]

    return _apply(options)


def remedy_options() -> Callable[[F], F]:
    """The options that set the remedy's facts and the checks' config, shared by ``lint``,
    ``fix`` and ``diagnose``: propagation, longest request, margin, Kubernetes version,
    drains, config."""
    return _apply(_remedy_option_list())


# The remedy's numbers: option name, help, lint's default
_NUMBERS = (
    (
        "propagation-seconds",
        "Time endpoint removal takes to reach every node and LB.",
        remedy.DEFAULT_PROPAGATION_SECONDS,
    ),
    ("max-request-seconds", "Longest legitimate request.", remedy.DEFAULT_MAX_REQUEST_SECONDS),
    ("margin-seconds", "Slack added to computed grace periods.", remedy.DEFAULT_MARGIN_SECONDS),
)


def _remedy_option_list() -> list[Callable[[F], F]]:
    return [
        *(
            option(
                f"--{name}",
                type=NUMBER_TYPES[name],
                default=None,
                help=text,
                default_text=f"{default:g}",
            )
            for name, text, default in _NUMBERS
        ),
        option(
            "--kubernetes-version",
            "kube_version",
            aliases=("--kube-version",),
            default=None,
            metavar="X.Y",
            help="Target cluster version (chooses native preStop sleep from 1.30).",
            default_text="unknown: the native sleep, with a note",
        ),
        option(
            "--drains",
            multiple=True,
            metavar="PATTERN",
            help="An app that keeps serving after SIGTERM by itself: an image glob "
            "(ghcr.io/org/app*) or KIND/NAME (deployment/payments-*), with =SECONDS when "
            "known (deployment/payments-*=15: preStop and grace count them; without, no "
            "preStop is asked); repeatable, added to the config file's drains.",
            default_text="none",
        ),
        option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Config file.",
            default_text="the nearest .svcdoctor.toml, or pyproject.toml with [tool.svcdoctor]",
        ),
    ]


def _apply(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    def decorate(command: F) -> F:
        for decorator in reversed(options):
            command = decorator(command)
        return command

    return decorate


def _ids(values: tuple[str, ...], flag: str) -> list[str]:
    return [rule_id(v, flag) for item in values for v in item.split(",") if v.strip()]


def merge_settings(config: Config, opts: dict[str, Any]) -> tuple[Settings, Severity, float]:
    """Merge file values and flags (flags win) into the checks' settings, the ``--fail-on``
    severity and the file size limit."""
    file = config.values

    def number(key: str, default: float) -> float:
        # flags and file values both went through NUMBER_TYPES: finite and in range
        flag = opts.get(key.replace("-", "_"))
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
        kube_version(opts["kube_version"], "--kubernetes-version")
        if opts["kube_version"]
        else file.get("kubernetes-version")
    )
    fail_on = (
        severity(opts["fail_on"], "--fail-on")
        if opts["fail_on"]
        else file.get("fail-on", Severity.WARNING)
    )
    drain_table: dict[str, float | None] = dict(file.get("drains", {}))
    for text in opts.get("drains") or ():
        pattern, seconds = drain_flag(text, "--drains")
        drain_table.pop(pattern, None)  # the flag's seconds (or none) win, listed last
        drain_table[pattern] = seconds
    settings = Settings(
        propagation_seconds=number("propagation-seconds", remedy.DEFAULT_PROPAGATION_SECONDS),
        max_request_seconds=number("max-request-seconds", remedy.DEFAULT_MAX_REQUEST_SECONDS),
        margin_seconds=number("margin-seconds", remedy.DEFAULT_MARGIN_SECONDS),
        kube_version=version,
        disabled=frozenset(disabled),
        enabled=frozenset(enabled) if enabled else None,
        severities=severities,
        drains=tuple(drain_table),
        drain_seconds={k: v for k, v in drain_table.items() if v is not None},
        hop_seconds=dict(file.get("hops", {})),
    )
    return settings, fail_on, number("max-file-mb", DEFAULT_MAX_FILE_MB)


def config_prometheus(config_path: Path | None) -> str | None:
    """The ``prometheus`` URL of ``--config`` or the nearest config file (``None``: unset)."""
    try:
        found = config_path or find_config(Path.cwd())
        url = read_config(found).values.get("prometheus") if found else None
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    return str(url) if url else None


def load_settings(
    config_path: Path | None, opts: dict[str, Any]
) -> tuple[Settings, Severity, float]:
    """The settings of this run: ``--config`` or the nearest config file, then the flags.
    A configuration problem is a usage error (exit 2)."""
    try:
        found = config_path or find_config(Path.cwd())
        config = read_config(found) if found else Config()
        return merge_settings(config, opts)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def check_settings(config_path: Path | None, opts: dict[str, Any]) -> Settings:
    """The rules' and the remedy's settings of a command with :func:`remedy_options` only
    (``diagnose``): ``--config`` or the nearest config file, then those flags; every rule."""
    no_flags: dict[str, Any] = {"severity": (), "enable": (), "disable": (), "fail_on": None}
    return load_settings(config_path, no_flags | opts)[0]


def render(result: LintResult, fmt: str, no_fixes: bool) -> None:
    if fmt == "text":
        render_text(result, stdout_console(), show_fixes=not no_fixes)
    elif fmt == "json":
        click.echo(render_json(result))
    elif fmt == "sarif":
        click.echo(render_sarif(result))
    else:
        click.echo(render_github(result))


def exit_for(result: LintResult, fail_on: Severity, exit_zero: bool) -> None:
    """Exit 2 on input errors, 1 when a finding reaches ``fail_on`` (unless ``exit_zero``)."""
    if result.input_errors:
        sys.exit(2)
    if not exit_zero and any(f.severity.rank >= fail_on.rank for f in result.findings):
        sys.exit(1)
