"""A fix as the text every renderer prints: its patch as YAML between its comments."""

from __future__ import annotations

import json
from typing import Any

import yaml

from svcdoctor.model.diagnosis import FixStep
from svcdoctor.model.patch import Fix, Patch, PodPatch


def yaml_text(body: Any) -> str:
    """Plain data as block YAML, keys in their order, no trailing newline."""
    text: str = yaml.dump(body, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False)
    return text.rstrip()


def patch_text(patch: Patch) -> str:
    """A patch as YAML; one that sets only a container's ``command``/``args`` as those
    lines (JSON lists, as the container has them)."""
    if isinstance(patch, PodPatch) and patch.argv_only:
        fields = [("command", patch.command), ("args", patch.args)]
        return "\n".join(f"{key}: {json.dumps(list(v))}" for key, v in fields if v)
    return yaml_text(patch.data())


def fix_text(fix: Fix | None) -> str | None:
    """The fix's text (``None`` for none)."""
    if fix is None:
        return None
    prior = patch_text(fix.prior) + "\n---\n" if fix.prior is not None else ""
    body = patch_text(fix.patch) if fix.patch is not None else ""
    return fix.lead + prior + body + fix.note


def step_text(step: FixStep) -> str:
    """A diagnosis' fix step as one text: the sentence, then its patch (if any) as YAML
    indented under it."""
    if step.patch is None:
        return step.text
    body = "\n".join(f"  {line}" for line in patch_text(step.patch).splitlines())
    return f"{step.text}:\n{body}"


__all__ = ["fix_text", "patch_text", "step_text", "yaml_text"]
