"""``svcdoctor fix``: apply lint's safe fixes to the manifests (a diff, in place, or as
kustomize patches); the rest are printed as manual steps."""

from __future__ import annotations

import difflib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from svcdoctor.cli._checking import load_settings, remedy_options
from svcdoctor.cli._params import OutputDir, filename_option, option
from svcdoctor.cli.config import NUMBER_TYPES, rule_id
from svcdoctor.cli.lint import _config, _namespace, empty_reason, lint_paths, notes
from svcdoctor.errors import CommandError
from svcdoctor.fix import (
    CannotRewrite,
    Plan,
    Step,
    Target,
    make_plan,
    read_diagnosis,
    rewrite_each,
    write_patch_dir,
)
from svcdoctor.fix.plan import HELM_TEMPLATE, ObjectFix
from svcdoctor.manifests import STDIN


@click.command()
@click.argument("paths", nargs=-1, type=str)
@filename_option("A file or directory to fix")
@option(
    "--rule",
    "rules",
    multiple=True,
    metavar="IDS",
    help="Fix only these rules (ids or names, comma-separated; repeatable).",
    default_text="every rule",
)
@click.option("--diff", "mode", flag_value="diff", default=True, help="Print a unified diff.")
@click.option("--write", "mode", flag_value="write", help="Rewrite the files in place.")
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

    PATHS (or -f PATH) are files or directories, read as lint reads them. By default a
    unified diff is printed (apply it with `git apply` or `patch -p1`); --write rewrites
    the files keeping comments, quoting and layout (only the changed lines move);
    --patch-dir writes kustomize patches. Other fixes are printed as manual steps.
    Exit codes: 0 nothing to fix, 1 changes shown or written, 2 usage or input errors.
    """
    paths = (*paths, *filenames)
    if not paths:
        raise click.UsageError("give PATHS to fix (files or directories)")
    if STDIN in paths:
        raise click.UsageError("fix rewrites files: stdin (-) cannot be fixed; lint it instead")
    if patch_dir is not None and mode == "write":
        raise click.UsageError("--write and --patch-dir exclude each other")
    wanted = [rule_id(r.strip(), "--rule") for item in rules for r in item.split(",") if r.strip()]
    if from_diagnosis is not None:
        measured = read_diagnosis(from_diagnosis)
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
    file = _config(config_path).values
    result, loaded = lint_paths(
        list(paths),
        settings,
        max_file_mb,
        exclude=(*file.get("exclude", ()), *exclude),
        namespace=_namespace(namespace, file),
    )
    bad_input = False
    for f in result.findings:
        if f.cause is None and f.rule != HELM_TEMPLATE:
            bad_input = True
            click.echo(f"{f.location.file}:{f.location.line}: {f.rule} {f.message}", err=True)
    empty = not loaded.documents and not result.input_errors
    for note in notes(loaded, empty=empty):
        click.echo(f"note: {note}", err=True)
    if empty:
        raise CommandError(empty_reason(paths, loaded))
    plan = make_plan(result, loaded, wanted or None)
    if patch_dir is not None:
        changed = _patch_dir(patch_dir, plan)
    else:
        changed = _rewrite(plan, write=mode == "write")
    _report(plan, changed, mode if patch_dir is None else "patch-dir", settings.kube_version)
    if bad_input:
        sys.exit(2)
    sys.exit(1 if changed else 0)


def _rewrite(plan: Plan, *, write: bool) -> int:
    """Show or write each file's changes; the number of files changed."""
    try:
        import ruamel.yaml  # noqa: F401
    except ImportError:
        raise CommandError(
            "svcdoctor fix needs ruamel.yaml to rewrite files: pip install 'svcdoctor[fix]' "
            "(or use --patch-dir)"
        ) from None
    changed = 0
    for name, fixes in sorted(plan.by_file().items()):
        if name in plan.refused:
            continue
        if name.lower().endswith(".json"):
            _refuse(plan, name, fixes, "JSON is not rewritten in place: use --patch-dir")
            continue
        try:
            with open(name, "rb") as fh:
                before = fh.read()
            after, failed = rewrite_each(before, [(_target(f), f.patch) for f in fixes])
        except CannotRewrite as exc:
            _refuse(plan, name, fixes, f"cannot round-trip it: {exc}")
            continue
        for target, reason in failed:
            lost = [f for f in fixes if _target(f) == target]
            where = f"{name}:{target.line} {target.kind} {target.name}"
            _refuse(plan, where, lost, f"cannot round-trip it: {reason}", file=name)
        done = [f for f in fixes if _target(f) not in {t for t, _ in failed}]
        if after == before:
            continue
        changed += 1
        if write:
            _replace(name, after)
            rules = sorted({r for f in done for r in f.rules})
            click.echo(f"fixed {name} ({', '.join(rules)})")
        else:
            shown = name.replace(os.sep, "/")
            diff = difflib.unified_diff(
                before.decode("utf-8-sig").splitlines(keepends=True),
                after.decode("utf-8-sig").splitlines(keepends=True),
                fromfile=f"a/{shown}",
                tofile=f"b/{shown}",
            )
            for line in diff:
                click.echo(
                    line if line.endswith("\n") else line + "\n\\ No newline at end of file\n",
                    nl=False,
                )
    return changed


def _target(f: ObjectFix) -> Target:
    return Target(f.ref.kind, f.ref.name, f.namespace, f.line)


def _refuse(
    plan: Plan, name: str, fixes: list[ObjectFix], reason: str, file: str | None = None
) -> None:
    """Leave ``name`` (a file, or an object of ``file``) as it is: its fixes become manual
    steps with the reason."""
    plan.refused[name] = reason
    plan.fixes = [f for f in plan.fixes if (f.file != name if file is None else f not in fixes)]
    plan.manual.extend(Step(finding, None, reason) for f in fixes for finding in f.findings)


def _replace(name: str, data: bytes) -> None:
    """Write atomically, keeping the file's mode."""
    folder = os.path.dirname(os.path.abspath(name))
    fd, tmp = tempfile.mkstemp(prefix=".svcdoctor-fix-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        shutil.copymode(name, tmp)
        os.replace(tmp, name)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
        for line in (f.fix or "").splitlines():
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
