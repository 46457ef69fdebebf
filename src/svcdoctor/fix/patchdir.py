"""``--patch-dir``: one strategic-merge patch file per object and a ``kustomization.yaml``
that applies them, for users who do not own the base files.

The kustomization must build with plain ``kubectl kustomize DIR``, whose default load
restrictor refuses any *file* outside DIR but accepts a *directory* holding a
kustomization anywhere. So each patched file is listed through the nearest kustomization
above it that builds it (``../base``), or, when it lies inside DIR, as a file; a file that
is neither is refused with what to do. Nothing is written outside DIR."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from svcdoctor.errors import SvcdoctorError
from svcdoctor.fix.plan import ObjectFix

KUSTOMIZATION = "kustomization.yaml"
# The names kustomize looks for, in its order
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
HEADER = "# written by svcdoctor fix --patch-dir"
PATCH_HEADER = "# svcdoctor fix: "
_UNSAFE = re.compile(r"[^a-z0-9.-]+")
_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)")


class PatchDirError(SvcdoctorError):
    """Why the patch directory cannot be written so that it builds (one line)."""


def patch_body(fix: ObjectFix) -> dict[str, Any]:
    """The patch as kustomize reads it: apiVersion, kind and metadata name the object."""
    meta: dict[str, Any] = {"name": fix.ref.name}
    if fix.namespace:
        meta["namespace"] = fix.namespace
    rest = dict(fix.patch)
    changed = rest.pop("metadata", None)  # an annotation fix (SVD112): beside the name
    if isinstance(changed, dict):
        meta.update(changed)
    return {"apiVersion": fix.api_version, "kind": fix.ref.kind, "metadata": meta, **rest}


def written_here(folder: Path) -> set[Path]:
    """The files of ``folder`` an earlier ``fix --patch-dir`` wrote (the patches and the
    kustomization, known by their first line): not manifests to read or fix."""
    out: set[Path] = set()
    try:
        entries = list(folder.iterdir()) if folder.is_dir() else []
    except OSError:
        return out
    for path in entries:
        if path.suffix in (".yaml", ".yml") and _first_line(path).startswith(
            (HEADER, PATCH_HEADER)
        ):
            out.add(path.resolve())
    return out


def write_patch_dir(folder: Path, fixes: list[ObjectFix]) -> list[Path]:
    """Write the patches and the kustomization; returns the files written.
    :class:`PatchDirError` (before anything is written) when ``kubectl kustomize DIR``
    could not build it, or DIR holds files of someone else in the way."""
    resources = kustomize_resources(folder, [f.file for f in fixes])
    ours = written_here(folder)
    own = _kustomization(folder)
    if own is not None and own.resolve() not in ours:
        raise PatchDirError(
            f"--patch-dir {folder}: it holds {own.name}, not written by svcdoctor fix: "
            "choose a new folder (then list it in your overlay)"
        )
    files: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    bodies: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for fix in fixes:
        body = patch_body(fix)
        key = (fix.ref.kind, fix.ref.namespace, fix.ref.name)
        if body in bodies.setdefault(key, []):
            continue  # the same object defined twice (base and bundle): one patch
        bodies[key].append(body)
        stem = _UNSAFE.sub("-", "-".join(p for p in key if p).lower()).strip("-") or "object"
        seen[stem] = seen.get(stem, 0) + 1
        name = f"{stem}.yaml" if seen[stem] == 1 else f"{stem}-{seen[stem]}.yaml"
        files[name] = (
            f"{PATCH_HEADER}{', '.join(fix.rules)} for {fix.ref} ({fix.file}:{fix.line})\n"
            + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)
        )
        target: dict[str, Any] = {"kind": fix.ref.kind, "name": fix.ref.name}
        if fix.namespace:
            target["namespace"] = fix.namespace
        entries.append({"path": name, "target": target})
    for name in files:
        path = folder / name
        if path.exists() and path.resolve() not in ours:
            raise PatchDirError(
                f"--patch-dir {folder}: {name} is there, not written by svcdoctor fix: "
                "choose a new folder"
            )
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
        "patches": entries,
    }
    files[KUSTOMIZATION] = (
        f"{HEADER}: build it with `kubectl kustomize DIR`\n"
        "# (or `kubectl apply -k DIR`); run svcdoctor fix again when the base changes\n"
        + yaml.safe_dump(kustomization, sort_keys=False, default_flow_style=False)
    )
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for stale in sorted(ours - {p.resolve() for p in written}):
        stale.unlink()  # a patch of an earlier run that nothing needs now
    return written


def kustomize_resources(folder: Path, files: Iterable[str]) -> list[str]:
    """The ``resources`` of a kustomization in ``folder`` that builds ``files`` under the
    default load restrictor: the nearest kustomization directory above each file that
    builds it, else the file itself when it is inside ``folder``. :class:`PatchDirError`
    for a file that is neither, or a kustomization that holds ``folder`` (a cycle)."""
    root = folder.resolve()
    own = _kustomization(folder)
    skip = {root} if own is not None and _first_line(own).startswith(HEADER) else set()
    reach: dict[Path, _Reach] = {}
    dirs: list[Path] = []
    direct: list[Path] = []
    outside: list[str] = []
    for name in sorted(set(files)):
        path = Path(name).resolve()
        base = _covering(path, skip, reach)
        if base is not None and (base == root or base in root.parents):
            where = "is" if base == root else "is inside"
            raise PatchDirError(
                f"--patch-dir {folder}: it {where} {_shown(base)}, whose kustomization "
                f"builds {name}; an overlay cannot be in its base: choose a folder outside "
                f"{_shown(base)} (e.g. next to it)"
            )
        if base is not None:
            if base not in dirs:
                dirs.append(base)
        elif root in path.parents:
            direct.append(path)
        else:
            outside.append(name)
    if outside:
        first = Path(outside[0]).resolve()
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        raise PatchDirError(
            f"--patch-dir {folder}: kustomize reads no file outside it, and no kustomization "
            f"builds {outside[0]}{more}: list it in {_shown(first.parent / KUSTOMIZATION)} "
            "(`resources: [" + first.name + "]`), --exclude it, or choose a --patch-dir "
            "that contains it"
        )
    # a kustomization another one builds already would add its objects twice
    kept = [d for d in dirs if not any(d in reach[o].dirs for o in dirs if o != d)]
    return [_relative(p, root) for p in (*kept, *direct)]


@dataclass(frozen=True, slots=True)
class _Reach:
    """What building a kustomization directory reads: the files, the kustomization
    directories, and whether it builds under the default load restrictor at all."""

    files: frozenset[Path]
    dirs: frozenset[Path]
    builds: bool


def _covering(path: Path, skip: set[Path], reach: dict[Path, _Reach]) -> Path | None:
    """The nearest directory above ``path`` whose kustomization builds it."""
    for folder in path.parents:
        if folder in skip or _kustomization(folder) is None:
            continue
        found = _reach(folder, reach, ())
        if found.builds and path in found.files:
            return folder
    return None


def _reach(folder: Path, memo: dict[Path, _Reach], stack: tuple[Path, ...]) -> _Reach:
    if folder in memo:
        return memo[folder]
    unbuildable = _Reach(frozenset(), frozenset(), builds=False)
    own = _kustomization(folder)
    if own is None or folder in stack:
        return unbuildable
    try:
        data = yaml.load(own.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        data = None
    if not isinstance(data, dict):
        memo[folder] = unbuildable
        return unbuildable
    files: set[Path] = set()
    dirs: set[Path] = set()
    builds = True
    lists = [data.get(key) for key in ("resources", "bases", "components")]
    entries = [e for got in lists if isinstance(got, list) for e in got]
    for entry in entries:
        if not isinstance(entry, str) or _REMOTE.match(entry):
            continue
        target = (folder / entry).resolve()
        if target.is_dir():
            inner = _reach(target, memo, (*stack, folder))
            builds = builds and inner.builds
            files |= inner.files
            dirs |= {target, *inner.dirs}
        elif target.is_file() and folder in target.parents:
            files.add(target)
        else:
            builds = False  # missing, or a file outside the folder: kustomize refuses it
    memo[folder] = _Reach(frozenset(files), frozenset(dirs), builds)
    return memo[folder]


def _kustomization(folder: Path) -> Path | None:
    for name in KUSTOMIZATION_NAMES:
        path = folder / name
        if path.is_file():
            return path
    return None


def _first_line(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.readline()
    except OSError:
        return ""


def _shown(path: Path) -> str:
    """A path as the user may type it: relative to the working directory when below it."""
    try:
        return path.relative_to(Path.cwd().resolve()).as_posix() or "."
    except ValueError:
        return path.as_posix()


def _relative(path: Path, root: Path) -> str:
    try:
        return Path(os.path.relpath(path, root)).as_posix()
    except ValueError:  # another drive
        return path.as_posix()


__all__ = [
    "HEADER",
    "KUSTOMIZATION",
    "KUSTOMIZATION_NAMES",
    "PATCH_HEADER",
    "PatchDirError",
    "kustomize_resources",
    "patch_body",
    "write_patch_dir",
    "written_here",
]
