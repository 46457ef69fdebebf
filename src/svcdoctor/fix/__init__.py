"""``svcdoctor fix``: apply lint's safe fixes (strategic-merge-patch-shaped ones) to the
manifests, as a diff, in place (``ruamel.yaml`` round-trip, byte-identical outside the
changed nodes) or as kustomize patches."""

from svcdoctor.fix.patch import Step, apply, combine, decide, effective
from svcdoctor.fix.patchdir import (
    KUSTOMIZATION,
    PatchDirError,
    kustomize_resources,
    patch_body,
    write_patch_dir,
    written_here,
)
from svcdoctor.fix.plan import Measured, ObjectFix, Plan, make_plan, read_diagnosis
from svcdoctor.fix.rewrite import CannotRewrite, Target, rewrite, rewrite_each

__all__ = [
    "KUSTOMIZATION",
    "CannotRewrite",
    "Measured",
    "ObjectFix",
    "PatchDirError",
    "Plan",
    "Step",
    "Target",
    "apply",
    "combine",
    "decide",
    "effective",
    "kustomize_resources",
    "make_plan",
    "patch_body",
    "read_diagnosis",
    "rewrite",
    "rewrite_each",
    "write_patch_dir",
    "written_here",
]
