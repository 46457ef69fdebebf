"""``--patch-dir``: one strategic-merge patch file per object and a ``kustomization.yaml``
that applies them, for users who do not own the base files."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from svcdoctor.fix.plan import ObjectFix

KUSTOMIZATION = "kustomization.yaml"
_UNSAFE = re.compile(r"[^a-z0-9.-]+")


def patch_body(fix: ObjectFix) -> dict[str, Any]:
    """The patch as kustomize reads it: apiVersion, kind and metadata name the object."""
    meta: dict[str, Any] = {"name": fix.ref.name}
    if fix.namespace:
        meta["namespace"] = fix.namespace
    return {"apiVersion": fix.api_version, "kind": fix.ref.kind, "metadata": meta, **fix.patch}


def write_patch_dir(folder: Path, fixes: list[ObjectFix]) -> list[Path]:
    """Write the patches and the kustomization (its ``resources`` are the patched files,
    relative to ``folder``); returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
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
        path = folder / name
        path.write_text(
            f"# svcdoctor fix: {', '.join(fix.rules)} for {fix.ref} ({fix.file}:{fix.line})\n"
            + yaml.safe_dump(body, sort_keys=False, default_flow_style=False),
            encoding="utf-8",
        )
        written.append(path)
        target: dict[str, Any] = {"kind": fix.ref.kind, "name": fix.ref.name}
        if fix.namespace:
            target["namespace"] = fix.namespace
        entries.append({"path": name, "target": target})
    resources = sorted({_relative(f.file, folder) for f in fixes})
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
        "patches": entries,
    }
    path = folder / KUSTOMIZATION
    path.write_text(
        "# written by svcdoctor fix --patch-dir; resources outside this folder need\n"
        "#   kubectl kustomize --load-restrictor LoadRestrictionsNone DIR\n"
        "# or list your own base here instead\n"
        + yaml.safe_dump(kustomization, sort_keys=False, default_flow_style=False),
        encoding="utf-8",
    )
    written.append(path)
    return written


def _relative(file: str, folder: Path) -> str:
    try:
        return Path(os.path.relpath(Path(file).absolute(), folder.absolute())).as_posix()
    except ValueError:  # another drive
        return Path(file).absolute().as_posix()


__all__ = ["KUSTOMIZATION", "patch_body", "write_patch_dir"]
