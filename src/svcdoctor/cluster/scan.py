"""``scan``: lint's rules, and the live-only ones, over a snapshot of a cluster."""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass, replace
from typing import Any

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.cluster.inventory import build_live_inventory, server_version
from svcdoctor.cluster.snapshot import Snapshot
from svcdoctor.report import lint_to_dict


@dataclass(frozen=True, slots=True)
class ScanReport:
    """The findings of one scan and what they were computed from."""

    result: LintResult
    context: str
    version: str  # the server's gitVersion
    namespace: str | None  # None: all namespaces
    notes: tuple[str, ...]
    settings: Settings

    @property
    def header(self) -> str:
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        return f"cluster {self.context} (Kubernetes {self.version}), {where}"

    def to_dict(self) -> dict[str, Any]:
        """lint's JSON document plus ``cluster``: context, version, namespace, notes."""
        body = lint_to_dict(self.result)
        body["cluster"] = {
            "context": self.context,
            "version": self.version,
            "kube_version": self.settings.kube_version_text,
            "namespace": self.namespace,
            "notes": list(self.notes),
        }
        return body

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def scan_snapshot(
    snapshot: Snapshot, settings: Settings, *, server_decides: bool = True
) -> ScanReport:
    """Run every active rule on the snapshot. ``server_decides``: the server's version
    replaces the settings' Kubernetes version (``--kube-version`` not given)."""
    inventory, notes = build_live_inventory(snapshot)
    version = server_version(snapshot.version)
    if server_decides and version is not None:
        settings = replace(settings, kube_version=version)
    elif version is None:
        notes = (*notes, f"server version {snapshot.version!r} not understood")
    collecting = gc.isenabled()
    gc.disable()  # the inventory is a large acyclic graph: collection passes are pure cost
    try:
        result = run_checks(inventory, settings)
    finally:
        if collecting:
            gc.enable()
    return ScanReport(
        result=result,
        context=snapshot.context,
        version=str(snapshot.version.get("gitVersion") or settings.kube_version_text),
        namespace=snapshot.namespace,
        notes=notes,
        settings=settings,
    )
