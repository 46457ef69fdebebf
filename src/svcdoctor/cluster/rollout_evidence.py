"""``rollout-test``'s evidence bundle: the agent's rows and the watched streams first,
collect's snapshot of the Service beside them, and the bundle's diagnosis."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from svcdoctor.cluster.agentjob import shielded
from svcdoctor.cluster.api import ApiReader
from svcdoctor.cluster.collect import (
    BUNDLE_NAMES,
    MARKER,
    Request,
    collect,
    manifest,
    stream,
    write_atomic,
)
from svcdoctor.cluster.edge import Edge
from svcdoctor.cluster.rollout_plan import Plan
from svcdoctor.cluster.window import keep_events_of, watched_pods
from svcdoctor.diagnose import Settings, diagnose
from svcdoctor.errors import SvcdoctorError
from svcdoctor.evidence.reader import read_evidence
from svcdoctor.evidence.redact import Redactor, redaction_note
from svcdoctor.model import REQUEST_COLUMNS, Diagnosis


def canonical(row: Mapping[str, Any]) -> dict[str, Any]:
    """An agent row with only the canonical request-log columns."""
    return {k: row.get(k) for k in REQUEST_COLUMNS if k in row}


@dataclass
class Evidence:
    """The bundle in ``plan.out``, written in two steps: ``first`` the agent's rows and the
    watched streams (and a manifest), ``complete`` collect's snapshot of the Service beside
    them and the final manifest. Each step leaves a bundle ``diagnose`` reads."""

    plan: Plan
    service: str
    started: float
    edge: Edge | None = None  # where the load entered
    written: list[str] = field(default_factory=list)
    redactor: Redactor = field(init=False)

    def __post_init__(self) -> None:
        self.redactor = Redactor(self.plan.redact)

    def first(
        self,
        pod_records: Sequence[dict[str, Any]],
        slice_records: Sequence[dict[str, Any]],
        rows: Sequence[Mapping[str, Any]],
        agent_pod: str | None,
        notes: Sequence[str],
    ) -> None:
        out = self.plan.out
        out.mkdir(parents=True, exist_ok=True)
        for old in out.iterdir():  # an earlier bundle (check_out allowed only that)
            if old.is_file() and (old.name == "collect.json" or BUNDLE_NAMES.match(old.name)):
                old.unlink()
        client = f"client-{agent_pod or 'svcdoctor-agent'}.jsonl"
        body = "".join(json.dumps(canonical(r), separators=(",", ":")) + "\n" for r in rows)
        for name, text in ((client, body), ("endpointslices.json", stream(slice_records)),
                           ("pods.json", stream(pod_records))):  # fmt: skip
            write_atomic(out / name, self.redactor.file(out / name, text))
            self.written.append(name)
        pending = "the Service's snapshot (events, owners, logs) was not collected"
        self._manifest({"complete": False}, [*notes, pending])

    def complete(self, api: ApiReader, notes: list[str], incomplete: Sequence[str] = ()) -> Path:
        """Add collect's files (not those ``first`` wrote) and write the final manifest
        (with ``incomplete``'s reasons); a failed or interrupted collect is a note."""
        out = self.plan.out
        since = time.time() - self.started + 60.0
        result: dict[str, Any] = {}
        scratch = Path(tempfile.mkdtemp(prefix=".collect-", dir=out))
        try:
            request = Request(self.plan.namespace, self.service, scratch, since)
            result = collect(api, request, redactor=self.redactor)
            if left_out := keep_events_of(scratch / "events.json", watched_pods(out / "pods.json")):
                notes.append(f"{left_out} events about pods this test did not see left out")
            with shielded():
                for path in sorted(scratch.iterdir()):
                    if path.name != "collect.json" and path.name not in self.written:
                        path.replace(out / path.name)
                        self.redactor.moved(path, out / path.name)
                        self.written.append(path.name)
        except SvcdoctorError as exc:
            notes.append(f"collecting the Service's snapshot failed: {exc}")
        except KeyboardInterrupt:
            notes.append("interrupted while collecting the Service's snapshot: not included")
        finally:
            with shielded():
                shutil.rmtree(scratch, ignore_errors=True)
                context = {
                    k: v
                    for k, v in result.items()
                    if k not in (MARKER, "bundle", "files", "span", "notes")
                }
                reasons = [f"incomplete: {r}" for r in incomplete]
                context["missing"] = [*result.get("missing", []), *incomplete]
                context["complete"] = bool(result.get("complete")) and not context["missing"]
                notes.append(redaction_note(self.redactor.totals(out / n for n in self.written)))
                self._manifest(context, [*result.get("notes", []), *notes, *reasons])
        return out

    def _manifest(self, context: dict[str, Any], notes: Sequence[str]) -> None:
        out = self.plan.out
        names = sorted(p.name for p in out.iterdir() if p.is_file() and p.name in self.written)
        all_notes = list(notes)
        try:
            found = read_evidence([str(out / n) for n in names])
            sources, problems = list(found.sources), list(found.problems)
        except SvcdoctorError as exc:
            sources, problems = [], []
            all_notes.append(f"diagnose finds nothing usable: {exc}")
        context = {**context, "service": f"{self.plan.namespace}/{self.service}"}
        context["watch_seconds"] = round(time.time() - self.started, 3)
        context["rollout_test"] = {
            "workload": f"{self.plan.namespace}/{self.plan.workload}",
            "rate": self.plan.rate,
            "path": self.edge and self.edge.route(f"{self.plan.namespace}/{self.service}"),
        }
        context["notes"] = all_notes
        context["redacted"] = self.redactor.totals(out / n for n in names)
        write_atomic(
            out / "collect.json",
            json.dumps(manifest(out, sources, problems, context), indent=2) + "\n",
        )


def diagnose_bundle(bundle: Path) -> tuple[Diagnosis | None, str | None]:
    try:
        found = read_evidence([str(bundle)])
    except SvcdoctorError as exc:
        return None, str(exc)
    return diagnose(found, Settings()), None
