"""Lint-precision benchmark: findings per rule over the whole corpus, and noise indicators.

Lints ``../shared/corpus/manifests`` in this process as ``svcdoctor lint CORPUS`` does
(``run_checks(build_inventory(load([corpus])), Settings())``), then prints:

* the number of findings per rule and per severity;
* the noise indicators of issue 14, each as a count and a share of the findings of the
  rules it concerns, computed here from the inventory and *not* with the rules' own helpers,
  so that a rule that starts firing on these shapes again shows up in the numbers:

  - ``idle_workload``: serving-check findings (SVD101/102/103/201/204) on workloads whose
    containers all serve nothing (``sleep infinity``, ``sleep 3650d``, ``tail -f /dev/null``,
    ``while true; do sleep 30; done``, …), as told by ``idle_argv`` below; an SVD204 finding
    (on a Service) counts when every workload the Service selects is idle;
  - ``idle_container``: the same findings on a container that serves nothing in a pod
    whose other containers do (a debug or client sidecar);
  - ``job_or_operator_selector``: SVD207 findings whose Service selects on labels that the
    Job controller (``job-name``, ``batch.kubernetes.io/job-name``, ``controller-uid``) or an
    operator (``cnpg.io/``, ``spilo-role``, ``strimzi.io/``, ``common.k8s.elastic.co/``,
    ``postgres-operator.crunchydata.com/``) puts on pods;
  - ``headless_only``: SVD204/101/201 findings tied to headless Services (``clusterIP:
    None``) only: the Service of an SVD204 finding is headless, or every Service selecting
    the workload of an SVD101/201 finding is; split per rule, since SVD204 has no business
    there while SVD101/201 may;
  - ``numeric_target_port``: SVD205 findings on a Service port whose ``targetPort`` is a
    number (split by severity: the issue allows them at ``info``).

It reports and never gates: exit 0, or 2 when the corpus is missing. ``--json`` prints the
same figures as one JSON object. ``tests/checks/test_lint_precision.py`` runs ``measure``
and holds the figures to bounds.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePath
from typing import Any, TypeVar

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.manifests import build_inventory, load
from svcdoctor.model import Container, Finding, Inventory, ObjectRef, Service, Workload

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/manifests"
SEVERITIES = ("error", "warning", "info")
SERVING_RULES = ("SVD101", "SVD102", "SVD103", "SVD201", "SVD204")
HEADLESS_RULES = ("SVD204", "SVD101", "SVD201")
JOB_KEYS = frozenset(
    {
        "job-name",
        "batch.kubernetes.io/job-name",
        "controller-uid",
        "batch.kubernetes.io/controller-uid",
    }
)
OPERATOR_PREFIXES = (
    "cnpg.io/",
    "spilo-role",
    "common.k8s.elastic.co/",
    "strimzi.io/",
    "postgres-operator.crunchydata.com/",
)


# --- what serves nothing (an independent, deliberately small detector) -----------------

SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh", "ksh", "mksh"})
INIT_WRAPPERS = frozenset({"tini", "dumb-init", "catatonit", "busybox", "env", "nohup"})
# words that only shape a loop or a list around the real commands
SHELL_SYNTAX = frozenset(
    {"while", "until", "do", "done", "if", "then", "else", "fi", "{", "}", "(", ")", "exec"}
)
# commands that neither listen nor block: allowed around a blocking idle command
FILLER = frozenset({"true", ":", "wait", "trap", "echo", "printf", "date", "set"})
S = TypeVar("S", Workload, Service)
_SEPARATORS = re.compile(r"&&|\|\||;|&|\||\n")


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def idle_script(text: str) -> bool:
    """Whether a command line or ``-c`` script only idles: every part is ``sleep …``,
    ``tail -f /dev/null`` or filler (``true``, ``wait``, ``trap …``, ``echo …``, loop
    keywords), and at least one part is ``sleep`` or ``tail -f /dev/null``."""
    blocking = False
    for raw in _SEPARATORS.split(text):
        part = raw.strip()
        if not part or part.startswith("#"):
            continue
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        while words and words[0] in SHELL_SYNTAX:
            words.pop(0)
        if not words:
            continue
        program = _base(words[0])
        sleeps = program == "sleep" and len(words) >= 2
        tails = program == "tail" and "/dev/null" in words and bool({"-f", "-F"} & set(words))
        if sleeps or tails:
            blocking = True
        elif program not in FILLER:
            return False
    return blocking


def idle_argv(argv: Sequence[str]) -> bool:
    """Whether ``command + args`` only idles, directly or through ``SHELL -c SCRIPT``
    (``tini --``/``dumb-init``/``busybox`` in front are looked through). No command at all
    is not idle: the image's entrypoint is unknown."""
    words = list(argv)
    while words and _base(words[0]) in INIT_WRAPPERS:
        words.pop(0)
        while words and words[0].startswith("-"):
            words.pop(0)
    if not words:
        return False
    if _base(words[0]) not in SHELLS:
        return idle_script(shlex.join(words))
    for i, word in enumerate(words[1:], start=1):
        if not word.startswith("-"):
            return False  # runs a script file
        if not word.startswith("--") and "c" in word[1:]:
            return i + 1 < len(words) and idle_script(words[i + 1])
    return False


def idle_container(container: Container) -> bool:
    return idle_argv([*container.command, *container.args])


def idle_workload(workload: Workload) -> bool:
    containers = workload.template.containers
    return bool(containers) and all(idle_container(c) for c in containers)


# --- tying findings to what they are about -----------------------------------------------


class Subjects:
    """Workloads and Services of the inventory by (ref, file), to find a finding's object."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.workloads: dict[tuple[ObjectRef, str], list[Workload]] = {}
        self.services: dict[tuple[ObjectRef, str], list[Service]] = {}
        for w in inventory.workloads:
            self.workloads.setdefault((w.ref, w.location.file), []).append(w)
        for s in inventory.services:
            self.services.setdefault((s.ref, s.location.file), []).append(s)

    def workload(self, f: Finding) -> Workload | None:
        return _at(self.workloads, f)

    def service(self, f: Finding) -> Service | None:
        return _at(self.services, f)


def _at(index: dict[tuple[ObjectRef, str], list[S]], f: Finding) -> S | None:
    """The object of that ref in that file starting last at or before the finding's line
    (one file may hold the same object twice)."""
    if f.object is None:
        return None
    found = index.get((f.object, f.location.file), [])
    before = [o for o in found if o.location.line <= f.location.line]
    if before:
        return max(before, key=lambda o: o.location.line)
    return found[0] if found else None


def on_idle_workload(subjects: Subjects, f: Finding) -> bool:
    if f.rule == "SVD204":
        svc = subjects.service(f)
        selected = subjects.inventory.targeted(svc) if svc else ()
        return bool(selected) and all(idle_workload(w) for w in selected)
    w = subjects.workload(f)
    return w is not None and idle_workload(w)


def on_idle_container(subjects: Subjects, f: Finding) -> bool:
    w = subjects.workload(f) if f.rule != "SVD204" else None
    if w is None or f.container is None or idle_workload(w):
        return False
    return any(c.name == f.container and idle_container(c) for c in w.template.containers)


def job_or_operator_labels(selector: dict[str, str] | None) -> bool:
    """Whether a selector names a label that the Job controller or an operator sets."""
    return any(k in JOB_KEYS or k.startswith(OPERATOR_PREFIXES) for k in selector or {})


def job_or_operator_selector(subjects: Subjects, f: Finding) -> bool:
    svc = subjects.service(f)
    return svc is not None and job_or_operator_labels(svc.selector)


def headless_only(subjects: Subjects, f: Finding) -> bool:
    if f.rule == "SVD204":
        svc = subjects.service(f)
        return svc is not None and svc.headless
    w = subjects.workload(f)
    services = subjects.inventory.services_of(w) if w else ()
    return bool(services) and all(s.headless for s in services)


def numeric_target(subjects: Subjects, f: Finding) -> bool:
    svc = subjects.service(f)
    ports = [p for p in (svc.ports if svc else ()) if p.line == f.location.line]
    return any(isinstance(p.target, int) or str(p.target).isdigit() for p in ports)


# --- the report ----------------------------------------------------------------------------


@dataclass
class Indicator:
    """Findings of ``rules`` that hit a noise shape: ``count`` of ``of`` (``share``)."""

    name: str
    label: str
    rules: list[str]
    count: int
    of: int
    exposure: int  # subjects of the corpus with the shape, flagged or not
    exposure_label: str
    by_rule: dict[str, int] = field(default_factory=dict)
    by_severity: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.count / self.of if self.of else 0.0


@dataclass
class Summary:
    corpus: str
    seconds: float
    files: int
    objects: int
    workloads: int
    services: int
    findings: int
    by_severity: dict[str, int]
    by_rule: dict[str, dict[str, Any]]
    indicators: dict[str, Indicator]


def _selected(inventory: Inventory) -> list[Workload]:
    return [w for w in inventory.workloads if inventory.services_of(w)]


def exposed_idle_workloads(inventory: Inventory) -> int:
    return sum(1 for w in _selected(inventory) if idle_workload(w))


def exposed_idle_containers(inventory: Inventory) -> int:
    return sum(
        1
        for w in _selected(inventory)
        if not idle_workload(w)
        for c in w.template.containers
        if idle_container(c)
    )


def exposed_job_or_operator_selectors(inventory: Inventory) -> int:
    return sum(1 for s in inventory.services if job_or_operator_labels(s.selector))


def exposed_headless(inventory: Inventory) -> int:
    return sum(1 for s in inventory.services if s.headless and inventory.targeted(s))


def exposed_numeric_targets(inventory: Inventory) -> int:
    return sum(
        1
        for s in inventory.services
        if inventory.targeted(s)
        for p in s.ports
        if isinstance(p.target, int) or str(p.target).isdigit()
    )


@dataclass(frozen=True)
class Spec:
    """An indicator: its rules, the test on a finding, and how many subjects of the corpus
    have the shape at all (``exposure``: a zero count means something only if this is not)."""

    name: str
    label: str
    rules: tuple[str, ...]
    hit: Callable[[Subjects, Finding], bool]
    exposure: Callable[[Inventory], int]
    exposure_label: str


INDICATORS = (
    Spec(
        "idle_workload",
        "serving checks on workloads that serve nothing",
        SERVING_RULES,
        on_idle_workload,
        exposed_idle_workloads,
        "idle workloads selected by a Service",
    ),
    Spec(
        "idle_container",
        "serving checks on a container that serves nothing (pod has a serving one)",
        SERVING_RULES,
        on_idle_container,
        exposed_idle_containers,
        "idle containers in Service-selected serving pods",
    ),
    Spec(
        "job_or_operator_selector",
        "SVD207 on a Service selecting Job or operator-injected labels",
        ("SVD207",),
        job_or_operator_selector,
        exposed_job_or_operator_selectors,
        "Services selecting such labels",
    ),
    Spec(
        "headless_only",
        "SVD204/101/201 tied to headless Services only",
        HEADLESS_RULES,
        headless_only,
        exposed_headless,
        "headless Services selecting a workload",
    ),
    Spec(
        "numeric_target_port",
        "SVD205 on a numeric targetPort",
        ("SVD205",),
        numeric_target,
        exposed_numeric_targets,
        "numeric targetPorts of Services selecting a workload",
    ),
)


def indicators(result: LintResult, inventory: Inventory, examples: int = 3) -> dict[str, Indicator]:
    """Every noise indicator over the findings of one lint run."""
    subjects = Subjects(inventory)
    out: dict[str, Indicator] = {}
    for spec in INDICATORS:
        pool = [f for f in result.findings if f.rule in spec.rules]
        hits = [f for f in pool if spec.hit(subjects, f)]
        out[spec.name] = Indicator(
            name=spec.name,
            label=spec.label,
            rules=list(spec.rules),
            count=len(hits),
            of=len(pool),
            exposure=spec.exposure(inventory),
            exposure_label=spec.exposure_label,
            by_rule=dict(Counter(f.rule for f in hits)),
            by_severity=dict(Counter(f.severity.value for f in hits)),
            examples=[_where(f) for f in hits[:examples]],
        )
    return out


def _where(f: Finding) -> str:
    parts = PurePath(f.location.file).parts
    short = "/".join(parts[parts.index("manifests") + 1 :]) if "manifests" in parts else str(f)
    return f"{f.rule} {short}:{f.location.line} {f.object or ''}".rstrip()


def per_rule(findings: Iterable[Finding]) -> dict[str, dict[str, Any]]:
    """rule -> {name, total, error, warning, info}, rules in id order."""
    table: dict[str, dict[str, Any]] = {}
    for f in sorted(findings, key=lambda f: f.rule):
        row = table.setdefault(f.rule, {"name": f.name, "total": 0, **dict.fromkeys(SEVERITIES, 0)})
        row["total"] += 1
        row[f.severity.value] += 1
    return table


def measure(corpus: Path, examples: int = 3, *, test_inputs: bool = False) -> Summary:
    """Lint the corpus once and compute every figure (``test_inputs``: the findings on unit
    tests' inputs too, which lint does not show by default)."""
    start = time.perf_counter()
    inventory = build_inventory(load([str(corpus)]))
    result = run_checks(inventory, Settings(test_inputs=test_inputs))
    seconds = time.perf_counter() - start
    return Summary(
        corpus=str(corpus),
        seconds=seconds,
        files=result.files,
        objects=result.objects,
        workloads=result.workloads,
        services=result.services,
        findings=len(result.findings),
        by_severity=result.counts(),
        by_rule=per_rule(result.findings),
        indicators=indicators(result, inventory, examples),
    )


def render_text(s: Summary) -> str:
    lines = [
        f"corpus: {s.corpus}",
        f"{s.files} files, {s.objects} objects, {s.workloads} workloads, {s.services} "
        f"services; linted in {s.seconds:.1f} s",
        f"{s.findings} findings: " + ", ".join(f"{n} {k}" for k, n in s.by_severity.items()),
        "",
        f"{'rule':<7} {'name':<34} {'total':>6} {'error':>6} {'warning':>8} {'info':>6}",
    ]
    for rule, row in s.by_rule.items():
        lines.append(
            f"{rule:<7} {row['name']:<34} {row['total']:>6} {row['error']:>6} "
            f"{row['warning']:>8} {row['info']:>6}"
        )
    lines += ["", "noise indicators (count / findings of the rules concerned, share):"]
    for ind in s.indicators.values():
        split = ", ".join(f"{r} {n}" for r, n in sorted(ind.by_rule.items()))
        sev = ", ".join(f"{n} {k}" for k, n in sorted(ind.by_severity.items()))
        detail = f"  [{split}; {sev}]" if ind.count else ""
        lines.append(
            f"  {ind.name:<25} {ind.count:>4} / {ind.of:<4} {ind.share:6.1%}  "
            f"{ind.label} ({'/'.join(ind.rules)}){detail}"
        )
        lines.append(f"      {ind.exposure} {ind.exposure_label} in the corpus")
        lines += [f"      e.g. {e}" for e in ind.examples]
    return "\n".join(lines)


def render_json(s: Summary) -> str:
    body = asdict(s)
    for name, ind in s.indicators.items():
        body["indicators"][name]["share"] = round(ind.share, 4)
    body["seconds"] = round(s.seconds, 2)
    return json.dumps(body, indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="manifest directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--examples", type=int, default=3, help="examples per indicator")
    args = parser.parse_args(argv)
    corpus: Path = args.corpus.resolve()
    if not corpus.is_dir():
        print(f"lint_precision: corpus not found: {corpus} (use --corpus PATH)", file=sys.stderr)
        return 2
    summary = measure(corpus, args.examples)
    print(render_json(summary) if args.json else render_text(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
