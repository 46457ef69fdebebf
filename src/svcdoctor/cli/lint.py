"""``svcdoctor lint``: static checks of manifests for the four causes."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import click

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.cli._checking import check_options, exit_for, load_settings, render
from svcdoctor.cli._params import filename_option, option
from svcdoctor.cli.config import (
    NUMBER_TYPES,
    Config,
    ConfigError,
    find_config,
    namespace,
    read_config,
)
from svcdoctor.manifests import DEFAULT_MAX_FILE_MB, LoadResult, build_inventory, load
from svcdoctor.model.inventory import DEFAULT_NAMESPACE

EXAMPLE = "shop.yaml"


def lint_paths(
    paths: list[str],
    settings: Settings,
    max_file_mb: float,
    *,
    exclude: tuple[str, ...] = (),
    namespace: str | None = None,
) -> tuple[LintResult, LoadResult]:
    """Read the inputs and run the checks (the library entry point of ``lint``); also
    returns what reading found, for the notes."""
    stdin = sys.stdin.buffer if sys.stdin is not None else None  # None when fd 0 is closed
    loaded = load(paths, stdin=stdin, max_file_mb=max_file_mb, exclude=exclude)
    return run_checks(build_inventory(loaded, namespace), settings), loaded


@click.command()
@click.argument("paths", nargs=-1, type=str)
@filename_option("A file, directory or - (stdin) to lint, added to PATHS")
@click.option("--example", is_flag=True, help="Lint the example manifests shipped with svcdoctor.")
@check_options(("text", "json", "sarif", "github"))
@option(
    "--max-file-mb",
    type=NUMBER_TYPES["max-file-mb"],
    default=None,
    help="Refuse larger input files.",
    default_text=f"{DEFAULT_MAX_FILE_MB:g}",
)
@option(
    "-n",
    "--namespace",
    default=None,
    metavar="NS",
    help="Namespace of objects that name none (where they will be applied).",
    default_text=DEFAULT_NAMESPACE,
)
@option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Do not read matching files or directories (gitignore-like: 'dashboards', "
    "'*.json', 'deploy/legacy/'); repeatable, added to the config file's exclude.",
    default_text="none",
)
@click.option(
    "--test-inputs",
    is_flag=True,
    help="Also report findings on unit tests' inputs (Go's testdata/, testutils/, "
    "test-data/ outside an e2e/ folder; a test-named file a Go unit test reads), which a "
    "test reads and never applies, and single-replica notes (SVD204) on tests' manifests.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Exit 0 when the input holds no Kubernetes object (default: exit 2, so that an "
    "upstream failure in a pipe does not pass).",
)
def lint(
    paths: tuple[str, ...],
    filenames: tuple[str, ...],
    example: bool,
    fmt: str,
    exit_zero: bool,
    config_path: Path | None,
    no_fixes: bool,
    namespace: str | None,
    exclude: tuple[str, ...],
    allow_empty: bool,
    test_inputs: bool,
    **opts: Any,
) -> None:
    """Check Kubernetes manifests for configurations that cause intermittent failures.

    PATHS (or -f PATH) are files, directories (searched for *.yaml, *.yml, *.json; the
    templates/ of Helm charts are left out) or - for stdin (e.g. `helm template … |
    svcdoctor lint -`). Exit
    codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input errors, or no
    Kubernetes object in the input (unless --allow-empty).
    """
    paths = (*paths, *filenames)
    if not paths and not example:
        raise click.UsageError("give PATHS to lint (or - for stdin, or --example)")
    settings, fail_on, max_file_mb = load_settings(config_path, opts)
    settings = replace(settings, test_inputs=test_inputs)
    file = _config(config_path).values
    with as_file(files("svcdoctor.examples") / EXAMPLE) as example_path:
        targets = list(paths) + ([_shown(example_path)] if example else [])
        result, loaded = lint_paths(
            targets,
            settings,
            max_file_mb,
            exclude=(*file.get("exclude", ()), *exclude),
            namespace=_namespace(namespace, file),
        )
    render(result, fmt, no_fixes)
    empty = not loaded.documents and not result.findings
    refused = empty and not (allow_empty or file.get("allow-empty", False))
    for note in notes(loaded, empty=refused):
        click.echo(f"note: {note}", err=True)
    if refused:
        click.echo(f"svcdoctor lint: error: {empty_reason(paths, loaded)}", err=True)
        sys.exit(2)
    exit_for(result, fail_on, exit_zero)


def notes(loaded: LoadResult, *, empty: bool = False) -> list[str]:
    """One line per thing the reader left out on purpose (``empty``: the run is refused
    for holding no object, which says it already)."""
    out: list[str] = []
    if loaded.helm_templates:
        count = sum(loaded.helm_templates.values())
        charts = sorted(loaded.helm_templates)
        shown = ", ".join(charts[:3]) + (f" and {len(charts) - 3} more" if len(charts) > 3 else "")
        out.append(
            f"skipped {_plural(count, 'file')} in the templates/ (or other folders) of "
            f"{_plural(len(charts), 'Helm chart')} ({shown}): Go templates, not manifests; "
            f"lint the rendered chart: helm template RELEASE {charts[0]} | svcdoctor lint -"
        )
    if loaded.go_templates:
        count = sum(len(files) for files in loaded.go_templates.values())
        packages = sorted(loaded.go_templates)
        shown = ", ".join(packages[:2]) + (" …" if len(packages) > 2 else "")
        out.append(
            f"skipped {_plural(count, 'Go template')} of Go code ({shown}): a program "
            "fills them in at run time, not manifests"
        )
    if loaded.empty_files and loaded.documents and not empty:
        n = loaded.empty_files
        out.append(
            f"skipped {_plural(n, 'file')} holding no Kubernetes object "
            "(values files, dashboards, data)"
        )
    if loaded.vendored:
        shown = ", ".join(loaded.vendored[:2]) + (" …" if len(loaded.vendored) > 2 else "")
        out.append(
            f"skipped {_plural(len(loaded.vendored), 'folder')} of vendored dependencies "
            f"({shown}): other projects' files; name one to lint it"
        )
    if loaded.followed:
        shown = ", ".join(loaded.followed[:2]) + (" …" if len(loaded.followed) > 2 else "")
        out.append(
            f"also read {_plural(len(loaded.followed), 'path')} outside the inputs that their "
            f"kustomizations build ({shown})"
        )
    if loaded.hidden and loaded.documents:
        shown = ", ".join(loaded.hidden[:2]) + (" …" if len(loaded.hidden) > 2 else "")
        out.append(
            f"skipped {_plural(len(loaded.hidden), 'hidden folder')} holding manifests "
            f"({shown}): name one to lint it"
        )
    if loaded.dangling:
        link, target = loaded.dangling[0]
        out.append(
            f"skipped {_plural(len(loaded.dangling), 'symbolic link')} to a missing file "
            f"({link} -> {target}{' …' if len(loaded.dangling) > 1 else ''})"
        )
    if loaded.assertions:
        out.append(
            f"skipped {_plural(loaded.assertions, 'test assertion file')} (kuttl's "
            "NN-assert.yaml, NN-errors.yaml, `kyverno test` inputs): fields a test compares, "
            "not objects it applies"
        )
    if loaded.excluded:
        out.append(f"left out {_plural(loaded.excluded, 'path')} matching exclude patterns")
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def empty_reason(paths: tuple[str, ...], loaded: LoadResult) -> str:
    """The one-line message for an input without any Kubernetes object."""
    if paths == ("-",):
        where = "stdin was empty" if not loaded.skipped else "stdin held no Kubernetes object"
        return (
            f"no Kubernetes objects to check ({where}: did the command before the pipe "
            "fail?); pass --allow-empty to accept an empty input"
        )
    read = f"{_plural(loaded.files, 'file')} read"
    return (
        f"no Kubernetes objects to check ({read}, none holds one); "
        "pass --allow-empty to accept an empty input"
    )


def _config(config_path: Path | None) -> Config:
    try:
        found = config_path or find_config(Path.cwd())
        return read_config(found) if found else Config()
    except ConfigError as exc:  # already reported by load_settings; kept for safety
        raise click.UsageError(str(exc)) from None


def _namespace(flag: str | None, file: dict[str, Any]) -> str | None:
    """The namespace the user gave objects without one (None: not given)."""
    if flag is None:
        given = file.get("namespace")
        return None if given is None else str(given)
    try:
        return namespace(flag, "--namespace")
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def _shown(path: Path) -> str:
    """A path relative to the working directory when it is below it."""
    try:
        return os.path.relpath(path) if path.is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)
