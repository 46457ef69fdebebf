"""``svcdoctor fix``: apply lint's safe fixes to the manifests (a diff, in place, or as
kustomize patches); the rest are printed as manual steps."""

from __future__ import annotations

import io
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from svcdoctor.cli._checking import load_settings, remedy_options
from svcdoctor.cli._params import OutputDir, filename_option, option
from svcdoctor.cli.config import NUMBER_TYPES, rule_id
from svcdoctor.cli.lint import _config, _namespace, notes
from svcdoctor.errors import CommandError
from svcdoctor.fix import (
    CannotRewrite,
    Plan,
    Target,
    make_plan,
    read_diagnosis,
    rewrite_each,
    write_patch_dir,
    written_here,
)
from svcdoctor.fix.jsonfile import is_json, rewrite_json
from svcdoctor.fix.output import diff_text, replace_file
from svcdoctor.fix.plan import HELM_TEMPLATE, ObjectFix, lint_inputs
from svcdoctor.manifests import STDIN
from svcdoctor.report.fixes import fix_text

# How the findings of standard input name their file (the reader's name for it)
STDIN_FILE = "stdin"
STDIN_LABEL = "<stdin>"


@click.command()
@click.argument("paths", nargs=-1, type=str)
@filename_option("A file, directory or - (stdin) to fix")
@option(
    "--rule",
    "rules",
    multiple=True,
    metavar="IDS",
    help="Fix only these rules (ids or names, comma-separated; repeatable).",
    default_text="every rule",
)
@click.option("--diff", "mode", flag_value="diff", default=True, help="Print a unified diff.")
@click.option(
    "--write",
    "mode",
    flag_value="write",
    help="Rewrite the files in place (stdin: print all of it, fixed, on stdout).",
)
@option(
    "--patch-dir",
    type=OutputDir(),
    default=None,
    help="Write one strategic-merge patch per object and a kustomization.yaml here "
    "instead of touching the files.",
    default_text="none: --diff",
)
@option(
    "--from-diagnosis",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Take the race window measured by `svcdoctor diagnose -o json` (preStop, "
    "longest request, grace margin).",
    default_text="none",
)
@remedy_options()
@option(
    "--max-file-mb",
    type=NUMBER_TYPES["max-file-mb"],
    default=None,
    help="Refuse larger input files.",
    default_text="32",
)
@option(
    "-n",
    "--namespace",
    default=None,
    metavar="NS",
    help="Namespace of objects that name none.",
    default_text="default",
)
@option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Do not read matching files or directories (as lint takes it).",
    default_text="none",
)
def fix(
    paths: tuple[str, ...],
    filenames: tuple[str, ...],
    rules: tuple[str, ...],
    mode: str,
    patch_dir: Path | None,
    from_diagnosis: Path | None,
    config_path: Path | None,
    namespace: str | None,
    exclude: tuple[str, ...],
    **opts: Any,
) -> None:
    """Apply lint's safe fixes: preStop sleep, grace period, exec in shell wrappers,
    rollout strategy.

    PATHS (or -f PATH) are files or directories, read as lint reads them, or - alone for
    stdin. By default a unified diff is printed (apply it with `git apply` or `patch -p1`);
    --write rewrites the files keeping comments, quoting and layout (only the changed lines
    move), or with - prints the whole input, fixed, on stdout (`helm template … | svcdoctor
    fix --write - | kubectl apply -f -`); --patch-dir writes kustomize patches and a
    kustomization.yaml that `kubectl kustomize DIR` builds. Other fixes are printed as
    manual steps. Exit codes: 0 nothing to fix, 1 changes shown or written, 2 usage or
    input errors.
    """
    paths = (*paths, *filenames)
    if not paths:
        raise click.UsageError("give PATHS to fix (files or directories, or - for stdin)")
    if patch_dir is not None and mode == "write":
        raise click.UsageError("--write and --patch-dir exclude each other")
    from_stdin = STDIN in paths
    if from_stdin and set(paths) != {STDIN}:
        raise click.UsageError("- (stdin) is fixed on its own: give no other PATHS with it")
    if from_stdin and patch_dir is not None:
        raise click.UsageError(
            "--patch-dir lists the fixed files in a kustomization, and stdin is no file: "
            "save it to a file first, or use --write - to print the fixed manifests"
        )
    wanted = [rule_id(r.strip(), "--rule") for item in rules for r in item.split(",") if r.strip()]
    given = None  # the diagnosis' plan, applied as given unless the user set its numbers
    if from_diagnosis is not None:
        measured = read_diagnosis(from_diagnosis)
        numbers = ("propagation_seconds", "max_request_seconds", "margin_seconds")
        given = measured.plan if all(opts.get(k) is None for k in numbers) else None
        for key, value in (
            ("propagation_seconds", measured.propagation_seconds),
            ("max_request_seconds", measured.max_request_seconds),
            ("margin_seconds", measured.margin_seconds),
        ):
            if opts.get(key) is None and value is not None:
                opts[key] = value
        click.echo(
            f"note: diagnosed race window {measured.window_seconds:g} s: preStop "
            f"{opts['propagation_seconds']:g} s"
            + (
                f", requests up to {opts['max_request_seconds']:g} s"
                if opts.get("max_request_seconds") is not None
                else ""
            ),
            err=True,
        )
    opts.update(severity=(), enable=tuple(wanted), disable=(), fail_on=None)
    settings, _, max_file_mb = load_settings(config_path, opts)
    if given is not None:
        settings = replace(settings, plan=given)
    file = _config(config_path).values
    source: bytes | None = None
    if from_stdin:
        stream = sys.stdin.buffer if sys.stdin is not None else None  # None: fd 0 closed
        source = stream.read(int(max_file_mb * 1024 * 1024) + 1) if stream is not None else b""
    result, loaded = lint_inputs(
        [STDIN] if from_stdin else list(paths),
        settings,
        max_file_mb,
        stdin=io.BytesIO(source) if source is not None else None,
        exclude=(*file.get("exclude", ()), *exclude),
        namespace=_namespace(namespace, file),
        skip=written_here(patch_dir) if patch_dir is not None else set(),
    )
    bad_input = False
    for f in result.findings:
        if f.cause is None and f.rule != HELM_TEMPLATE:
            bad_input = True
            click.echo(f"{f.location.file}:{f.location.line}: {f.rule} {f.message}", err=True)
    empty = not loaded.documents and not result.findings
    for note in notes(loaded, empty=empty):
        click.echo(f"note: {note}", err=True)
    if empty:
        where = (
            ("stdin was empty" if not loaded.skipped else "stdin held none")
            if from_stdin
            else f"{loaded.files} file{'s' * (loaded.files != 1)} read, none holds one"
        )
        raise CommandError(f"no Kubernetes objects to fix ({where})")
    plan = make_plan(result, loaded, wanted or None)
    if patch_dir is not None:
        changed = _patch_dir(patch_dir, plan)
    else:
        changed = _rewrite(plan, write=mode == "write", stdin=source)
    _report(plan, changed, mode if patch_dir is None else "patch-dir", settings.kube_version)
    if bad_input:
        sys.exit(2)
    sys.exit(1 if changed else 0)


def _rewrite(plan: Plan, *, write: bool, stdin: bytes | None = None) -> int:
    """Show or write each file's changes; the number of files changed. With ``stdin``
    (its bytes) the one input is standard input: --write prints it, fixed or not."""
    try:
        import ruamel.yaml  # noqa: F401
    except ImportError:
        raise CommandError(
            "svcdoctor fix needs ruamel.yaml to rewrite files: pip install 'svcdoctor[fix]' "
            "(or use --patch-dir)"
        ) from None
    changed = 0
    output = stdin
    for name, fixes in sorted(plan.by_file().items()):
        if name in plan.refused:
            continue
        try:
            if stdin is not None and name == STDIN_FILE:
                before = stdin
            else:
                with open(name, "rb") as fh:
                    before = fh.read()
            edit = rewrite_json if is_json(before) else rewrite_each
            after, failed = edit(before, [(_target(f), f.patch) for f in fixes])
        except CannotRewrite as exc:
            plan.refuse(name, fixes, f"cannot round-trip it: {exc}")
            continue
        for target, reason in failed:
            lost = [f for f in fixes if _target(f) == target]
            where = f"{name}:{target.line} {target.kind} {target.name}"
            plan.refuse(where, lost, f"cannot round-trip it: {reason}", file=name)
        done = [f for f in fixes if _target(f) not in {t for t, _ in failed}]
        if after == before:
            continue
        changed += 1
        rules = sorted({r for f in done for r in f.rules})
        if write and stdin is not None and name == STDIN_FILE:
            output = after
            click.echo(f"fixed {STDIN_LABEL} ({', '.join(rules)})", err=True)
        elif write:
            replace_file(name, after)
            click.echo(f"fixed {name} ({', '.join(rules)})")
        else:
            shown = STDIN_LABEL if stdin is not None and name == STDIN_FILE else None
            click.echo(diff_text(name, before, after, shown), nl=False)
    if write and output is not None:
        click.echo(output, nl=False)  # bytes: as read, to the binary stream
    return changed


def _target(f: ObjectFix) -> Target:
    return Target(f.ref.kind, f.ref.name, f.namespace, f.line)


def _patch_dir(folder: Path, plan: Plan) -> int:
    if not plan.fixes:
        return 0
    written = write_patch_dir(folder, plan.fixes)
    for path in written:
        click.echo(f"wrote {path}")
    return len(written)


def _report(plan: Plan, changed: int, mode: str, kube_version: tuple[int, int] | None) -> None:
    for name, reason in sorted(plan.refused.items()):
        click.echo(f"svcdoctor fix: skipped {name}: {reason}", err=True)
    for step in plan.manual:
        f = step.finding
        click.echo(
            f"manual: {f.location.file}:{f.location.line} {f.object or ''} {f.rule} "
            f"{f.name} ({step.reason}):",
            err=True,
        )
        for line in (fix_text(f.fix) or "").splitlines():
            click.echo(f"    {line}", err=True)
    fixed = sum(len(f.findings) for f in plan.fixes)
    if kube_version is None and any("sleep" in str(f.patch) for f in plan.fixes):
        click.echo(
            "note: fixes use the native preStop sleep (Kubernetes >= 1.30); pass "
            "--kubernetes-version for older clusters (exec sleep)",
            err=True,
        )
    what = {"diff": "to change", "write": "changed", "patch-dir": "patch files written"}[mode]
    files = len({f.file for f in plan.fixes})
    click.echo(
        f"{fixed} finding{'s' * (fixed != 1)} fixed in {len(plan.fixes)} object"
        f"{'s' * (len(plan.fixes) != 1)} of {files} file{'s' * (files != 1)} ({what}: "
        f"{changed}); {len(plan.manual)} manual step{'s' * (len(plan.manual) != 1)}; "
        f"{len(plan.refused)} skipped (files or objects left as they are)",
        err=True,
    )


__all__ = ["fix"]
