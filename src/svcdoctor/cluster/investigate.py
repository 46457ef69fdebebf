"""``svcdoctor investigate``: the five steps of ``problem.md`` against a live cluster, by
composing the parts through their Python APIs (never the CLI): the live checks
(``cluster.scan``), the evidence bundle (``cluster.collect``, redacted by
``evidence.redact``), the diagnosis (``diagnose``), the metrics when a query is given, and,
only with consent, the direct probe (``cluster.probe``) and the rollout under load
(``cluster.rollout``). ``cluster.checklist`` turns what they measured into the checklist.

The output directory holds ``evidence/`` (the collect bundle), ``rollout-test/`` (its
bundle, with ``--rollout``), ``diagnosis.json`` (what ``fix --from-diagnosis`` reads) and
``investigation.json`` (the checklist); the CLI adds ``report.html``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from svcdoctor.checks import Settings as CheckSettings
from svcdoctor.cluster import probe as probing
from svcdoctor.cluster import rollout as rollouts
from svcdoctor.cluster.agentjob import AgentArgsError
from svcdoctor.cluster.api import ApiReader
from svcdoctor.cluster.checklist import Parts, investigation
from svcdoctor.cluster.collect import (
    BundleError,
    ServiceNotFound,
    check_out,
    write_atomic,
)
from svcdoctor.cluster.collect import Request as CollectRequest
from svcdoctor.cluster.collect import collect as collect_bundle
from svcdoctor.cluster.inventory import build_live_inventory
from svcdoctor.cluster.reader import ClusterError, ClusterReader
from svcdoctor.cluster.scan import scan_snapshot
from svcdoctor.cluster.snapshot import read_snapshot
from svcdoctor.diagnose import Settings, diagnose
from svcdoctor.diagnose.breakdown import build_breakdown
from svcdoctor.errors import SvcdoctorError
from svcdoctor.evidence.reader import read_evidence
from svcdoctor.evidence.redact import Redactor
from svcdoctor.model import Diagnosis
from svcdoctor.model.investigation import Investigation, Skipped, StepId
from svcdoctor.report.diagnosis import render_json
from svcdoctor.report.investigation import investigation_json

EVIDENCE_DIR = "evidence"  # collect's bundle
ROLLOUT_DIR = "rollout-test"  # rollout-test's bundle
DIAGNOSIS_FILE = "diagnosis.json"  # as rollout-test names it (cli/rollout_test.py)
INVESTIGATION_FILE = "investigation.json"
REPORT_FILE = "report.html"
_OURS = frozenset({EVIDENCE_DIR, ROLLOUT_DIR, DIAGNOSIS_FILE, INVESTIGATION_FILE, REPORT_FILE})

Progress = Callable[[str], None]
Metrics = Callable[[], Diagnosis]


@dataclass(frozen=True, slots=True)
class Request(CollectRequest):
    """What to investigate and how far to go: what collect gathers (``out``: the
    investigation's directory, the bundle its ``evidence/``), and the steps past it.
    ``command``: the words that run svcdoctor (``svcdoctor`` or ``kubectl svcdoctor``) and
    ``connection``: the flags that reach the same cluster, for the commands of the skipped
    steps."""

    yes: bool = False
    per_node: bool = False
    rollout: bool = False
    rate: float = 50.0
    duration: float = 120.0
    redact: bool = True
    command: tuple[str, ...] = ("svcdoctor",)
    connection: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.service}"

    def svcdoctor(self, *args: str) -> str:
        """A command line of svcdoctor against the same cluster and namespace."""
        words = [*self.command, *args, "-n", self.namespace, *self.connection]
        return shlex.join(words)


def check_dir(out: Path) -> None:
    """``--out`` must be new, empty or an earlier investigation (its parts are replaced);
    anything else is refused (``BundleError``), as collect refuses a foreign directory."""
    if not out.exists():
        return
    if not out.is_dir():
        raise BundleError(f"--out {out}: exists and is not a directory")
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    # an earlier investigation: its results, or (interrupted) its evidence bundle alone
    earlier = {INVESTIGATION_FILE, EVIDENCE_DIR} & set(names)
    if names and (not earlier or set(names) - _OURS):
        shown = ", ".join([n for n in names if n not in _OURS][:3] or names[:3])
        raise BundleError(
            f"--out {out}: holds files that are not an investigation ({shown}); "
            "give a new or empty directory, or an earlier investigation's"
        )
    for name in (EVIDENCE_DIR, ROLLOUT_DIR):
        if (out / name).exists():
            check_out(out / name)  # an earlier bundle, or refused


def skipped_steps(request: Request, workloads: Sequence[str]) -> tuple[Skipped, ...]:
    """The active steps not run, each with the exact command that runs it."""
    if request.yes:
        if request.rollout or not workloads:
            return ()
        return (_rollout_skip(request, workloads[0], "--rollout"),)
    probe = ["probe", request.service, "--yes", *(["--per-node"] if request.per_node else [])]
    found = [
        Skipped(
            StepId.BYPASS,
            "direct probe of every endpoint (and the Service"
            + (", from each node" if request.per_node else "")
            + "): creates a Job in the namespace",
            request.svcdoctor(*probe),
        )
    ]
    if workloads:
        found.insert(0, _rollout_skip(request, workloads[0], "--yes --rollout"))
    return tuple(found)


def _rollout_skip(request: Request, workload: str, needs: str) -> Skipped:
    args = ["rollout-test", workload, "--service", request.service, "--yes"]
    return Skipped(
        StepId.LIFECYCLE,
        f"restart {workload} under load and watch the rollout: a real rollout",
        request.svcdoctor(*args),
        needs,
    )


def workloads_of(service: dict[str, Any], objects: Sequence[dict[str, Any]]) -> list[str]:
    """``deployment/NAME`` (or ``statefulset/NAME``) of each workload the Service selects."""
    selector = (service.get("spec") or {}).get("selector") or {}
    found = []
    for obj in objects:
        template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
        if selector and rollouts.selects(selector, template.get("labels") or {}):
            kind = str(obj.get("kind") or "Deployment").lower()
            found.append(f"{kind}/{(obj.get('metadata') or {}).get('name')}")
    return sorted(found)


class _Clock:
    """Progress lines prefixed with the time since the start."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.started = progress, time.monotonic()

    def begin(self, step: str) -> None:
        self(f"== {step}")

    def __call__(self, message: str) -> None:
        self.progress(f"[{time.monotonic() - self.started:5.1f} s] {message}")


def investigate(
    reader: ClusterReader,
    api: ApiReader,
    request: Request,
    checks: CheckSettings,
    progress: Progress = lambda _: None,
    metrics: Metrics | None = None,
) -> Investigation:
    """Run the investigation and write its files under ``request.out``. Raises
    ``ServiceNotFound`` for an unknown Service and ``BundleError`` for an unusable
    ``--out`` (before anything is read or written); a part that fails on the way (a
    forbidden read, a probe refused) is recorded in the checklist, not raised."""
    ns, name = request.namespace, request.service
    check_dir(request.out)
    clock = _Clock(progress)
    service = reader.get("services", ns, name)
    if service is None:
        raise ServiceNotFound(f"service {ns}/{name} not found in context {reader.context}")
    errors: dict[str, str] = {}

    clock.begin("live checks (scan)")
    scan = inventory = None
    objects: list[dict[str, Any]] = []
    try:
        snapshot = read_snapshot(reader, ns, None, [name], clock)
        objects = [*snapshot.deployments, *snapshot.statefulsets]
        scan = scan_snapshot(snapshot, checks)
        inventory = build_live_inventory(snapshot)[0]
    except ClusterError as exc:
        errors["scan"] = str(exc)
    workloads = workloads_of(service, objects)
    # an earlier run's results go first, so that an interrupted rerun never leaves them
    # beside evidence they were not drawn from (check_dir made sure the folder is one)
    for old in (INVESTIGATION_FILE, DIAGNOSIS_FILE, REPORT_FILE):
        (request.out / old).unlink(missing_ok=True)
    stale = request.out / ROLLOUT_DIR
    if stale.exists() and not (request.yes and request.rollout):
        shutil.rmtree(stale)

    clock.begin("evidence (collect)")
    request.out.mkdir(parents=True, exist_ok=True)
    bundle = request.out / EVIDENCE_DIR
    manifest = collect_bundle(
        reader,
        CollectRequest(ns, name, bundle, request.since, request.watch, request.client_logs),
        clock,
        Redactor(request.redact),
    )
    clock.begin("diagnosis")
    evidence = diagnosis = breakdown = None
    try:
        evidence = read_evidence([str(bundle)])
        diagnosis = diagnose(evidence, Settings(checks=checks))
        breakdown = diagnosis.breakdown or build_breakdown(evidence, diagnosis)
    except SvcdoctorError as exc:
        errors["diagnosis"] = str(exc)
    measured = None
    if metrics is not None:
        clock.begin("metrics (Prometheus)")
        try:
            measured = metrics()
        except SvcdoctorError as exc:
            errors["metrics"] = str(exc)

    probe = rollout = None
    if request.yes:
        clock.begin("direct probe")
        try:
            options = probing.Options(ns, name, per_node=request.per_node)
            probe = probing.run(api, probing.plan(api, options), clock)
        except (ClusterError, rollouts.Refused, AgentArgsError) as exc:
            errors["probe"] = str(exc)
        if request.rollout:
            rollout, errors = _rollout(api, request, workloads, clock, errors)
    clock.begin("checklist")
    parts = Parts(
        service=request.ref,
        context=str(manifest.get("context") or reader.context),
        server_version=str(manifest.get("server_version") or ""),
        scan=scan,
        inventory=inventory,
        bundle=manifest,
        evidence=evidence,
        diagnosis=diagnosis,
        breakdown=breakdown,
        metrics=measured,
        probe=probe,
        rollout=rollout,
        errors=errors,
        skipped=skipped_steps(request, workloads),
        watch=request.watch,
        out=str(request.out),
        rerun=request.svcdoctor("investigate", name, "--yes", "--rollout", "--out", "DIR"),
        fix_command=shlex.join([*request.command, "fix", "YOUR-MANIFESTS", "--from-diagnosis"]),
    )
    result = investigation(parts)
    return _write(request.out, result)


def _rollout(
    api: ApiReader,
    request: Request,
    workloads: Sequence[str],
    clock: _Clock,
    errors: dict[str, str],
) -> tuple[rollouts.RolloutTest | None, dict[str, str]]:
    if not workloads:
        return None, {
            **errors,
            "rollout": f"no Deployment or StatefulSet selected by {request.ref}",
        }
    if len(workloads) > 1:
        clock(f"{len(workloads)} workloads behind the Service: restarting {workloads[0]}")
    clock.begin(f"rollout-test {workloads[0]}")
    out = request.out / ROLLOUT_DIR
    kind, name = rollouts.parse_workload(workloads[0])
    plan = rollouts.Plan(
        request.namespace, kind, name, out, request.service, request.rate, request.duration,
        redact=request.redact,
    )  # fmt: skip
    try:
        return rollouts.run(api, plan, clock), errors
    except (ClusterError, rollouts.Refused, AgentArgsError, BundleError) as exc:
        return None, {**errors, "rollout": str(exc)}


def _write(out: Path, result: Investigation) -> Investigation:
    """``diagnosis.json`` (the verdict's diagnosis, as ``diagnose -o json`` prints it) and
    ``investigation.json``."""
    if result.diagnosis is not None:
        write_atomic(out / DIAGNOSIS_FILE, render_json(result.diagnosis) + "\n")
        result = replace(result, diagnosis_file=str(out / DIAGNOSIS_FILE))
    elif (out / DIAGNOSIS_FILE).exists():
        (out / DIAGNOSIS_FILE).unlink()
    write_atomic(out / INVESTIGATION_FILE, json.dumps(investigation_json(result), indent=2) + "\n")
    return result
