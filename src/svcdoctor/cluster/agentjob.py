"""The in-cluster agent as Kubernetes objects: a ConfigMap holding ``agent.py``, a Job that
runs it (and, for per-node checks, one Job per node), optionally a NetworkPolicy bounding
its traffic, and their clean-up. No Pod is created directly: the roles grant Jobs only.

The builders are pure: from an ``AgentSpec`` to the dicts svcdoctor sends (and prints
without ``--yes``); ``check_args`` runs the agent's own argument check locally, so that a
run the agent would refuse creates nothing. ``deployed`` is the I/O: it creates the Job,
then the NetworkPolicy, the ConfigMap and the per-node Jobs already owned by it, and
deletes everything that carries the run's label when its block ends, however it ends
(normally, an error, Ctrl-C or SIGTERM); the deletion itself is not interrupted by a second
Ctrl-C.

Everything carries ``app.kubernetes.io/managed-by=svcdoctor`` and ``svcdoctor.io/run=<id>``,
runs as a non-root user with a read-only root filesystem and no capabilities, asks for small
resources, and is bounded in time (``activeDeadlineSeconds``: the start-up allowance, the
agent's own bound and a slack; the Job also ``ttlSecondsAfterFinished``). The ConfigMap,
the per-node Jobs and the NetworkPolicy are created owned by the Job, so the cluster's
garbage collector removes them with it should svcdoctor itself be killed.
"""

from __future__ import annotations

import json
import math
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from svcdoctor.cluster import agent
from svcdoctor.cluster.reader import ClusterError, ClusterReader
from svcdoctor.errors import SvcdoctorError

if TYPE_CHECKING:
    from svcdoctor.cluster.api import ApiReader

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "svcdoctor"
RUN_LABEL = "svcdoctor.io/run"
COMPONENT = "app.kubernetes.io/component"
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
# The official python:3.12-slim multi-arch index, by digest (a tag can move; --image
# overrides it). Source: public Dockerfiles pinning docker.io/library/python:3.12-slim in
# 2026-10 ("amd64 child verified against the canonical index: sha256:78387bc3…"); not
# re-resolved from this project's machines (no registry access): re-check with `docker
# buildx imagetools inspect python:3.12-slim` when bumping.
DEFAULT_IMAGE = (
    "python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea"
)
MOUNT = "/svcdoctor"
AGENT_KEY = "agent.py"
NOBODY = 65534  # the uid/gid the agent runs as (python images default to root)
TTL_SECONDS = 600  # a finished Job (and what it owns) goes this long after it ends
START_SECONDS = 120.0  # for the agent's pods to start (image pull) and send a first request
SLACK_SECONDS = 60  # beyond start-up and the agent's own bound, before the deadline kills it
IDLE_SECONDS = 5.0  # a followed log this quiet: is the pod still running?
GRACE_SECONDS = 10  # the agent lets in-flight requests end (≤ its --timeout) on SIGTERM
# the kinds deleted at the end, in this order (the Jobs' pods and NetworkPolicy go with their
# Job: garbage collection, propagation Background), and the kinds listed to see what is left
DELETED_KINDS = ("jobs", "configmaps")
KINDS = ("jobs", "pods", "configmaps")
# DNS, which --network-policy allows besides the target pods: CoreDNS's pods keep kube-dns's
# label (github.com/coredns/deployment kubernetes/coredns.yaml.sed: k8s-app: kube-dns); the
# namespace label is set by the API server since 1.22 (kubernetes.io/docs/concepts/
# services-networking/network-policies/#targeting-a-namespace-by-its-name)
DNS_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}
DNS_PORT = 53


def new_run_id() -> str:
    """A short random id, valid in names and label values."""
    return secrets.token_hex(4)


@dataclass(frozen=True, slots=True)
class Egress:
    """``--network-policy``: all the agent's pods may send, besides DNS: TCP to ``ports`` of
    the pods matching ``pod_labels`` (the Service's selector) in the agent's namespace."""

    pod_labels: tuple[tuple[str, str], ...]
    ports: tuple[int, ...]


def egress_to(service: Mapping[str, Any], ports: Iterable[int]) -> Egress:
    """``--network-policy``'s egress: the Service's selected pods on ``ports`` (the pods'
    own); ``AgentArgsError`` for a Service without a selector (its endpoints are not pods a
    policy can select)."""
    selector = (service.get("spec") or {}).get("selector") or {}
    if not selector:
        name = (service.get("metadata") or {}).get("name")
        raise AgentArgsError(
            f"--network-policy: service {name} has no selector to allow traffic to"
        )
    pods = tuple(sorted((str(k), str(v)) for k, v in selector.items()))
    return Egress(pods, tuple(sorted(ports)))


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One run of the agent: where, with which arguments, on which nodes."""

    namespace: str
    purpose: str  # "probe" | "rollout" (in names and the component label)
    args: tuple[str, ...]  # the agent's arguments for the Job
    bound_seconds: float  # how long the agent may run by its own arguments
    run_id: str = field(default_factory=new_run_id)
    image: str = DEFAULT_IMAGE
    node_args: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (node, args) per-node Jobs
    egress: Egress | None = None  # a NetworkPolicy bounding the agent's traffic (None: none)
    node: str | None = None  # the node of the main Job's pod (None: where it is scheduled)

    @property
    def name(self) -> str:
        """The name of the Job and the ConfigMap."""
        return f"svcdoctor-{self.purpose}-{self.run_id}"

    @property
    def selector(self) -> str:
        """The label selector of everything this run creates."""
        return f"{MANAGED_BY}={MANAGER},{RUN_LABEL}={self.run_id}"

    @property
    def deadline_seconds(self) -> int:
        """``activeDeadlineSeconds``: it counts from the pod's start, image pull included,
        so the start-up allowance comes before the agent's own bound and the slack."""
        return math.ceil(START_SECONDS + self.bound_seconds) + SLACK_SECONDS


class AgentArgsError(SvcdoctorError):
    """The agent would refuse its arguments (one line, exit 2); found before anything is
    created."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a run, after ``deployed`` deleted what it had created:
    ``cleanup`` is that deletion's result, ``bundle`` the evidence written (if any)."""

    def __init__(self, cleanup: Cleanup, bundle: str | None = None) -> None:
        super().__init__("interrupted")
        self.cleanup = cleanup
        self.bundle = bundle


def _without_grpc_check(args: Sequence[str]) -> list[str]:
    """``args`` with ``--protocol grpc`` as ``tcp``: grpcio is the agent image's business,
    not this machine's, and nothing else in the agent's check depends on the protocol."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--protocol=grpc":
            out[i] = "--protocol=tcp"
        elif arg == "--protocol" and i + 1 < len(out) and out[i + 1] == "grpc":
            out[i + 1] = "tcp"
    return out


def check_args(spec: AgentSpec) -> None:
    """Run the agent's own argument check (``agent.parse_args``, pure) on the Job's and
    each node's arguments; ``AgentArgsError`` with the agent's one-line message."""
    for args in (spec.args, *(a for _, a in spec.node_args)):
        try:
            agent.parse_args(_without_grpc_check(args), environ={"HOSTNAME": spec.name})
        except agent.UsageError as exc:
            raise AgentArgsError(f"the agent would refuse its arguments: {exc}") from None


def agent_source() -> str:
    """The agent program, as shipped in the package."""
    return files("svcdoctor.cluster").joinpath("agent.py").read_text(encoding="utf-8")


def labels(spec: AgentSpec) -> dict[str, str]:
    """The labels of everything a run creates: managed-by svcdoctor, the run's id, the
    component (``probe-agent`` or ``rollout-agent``) and the agent's name."""
    return {
        MANAGED_BY: MANAGER,
        RUN_LABEL: spec.run_id,
        COMPONENT: f"{spec.purpose}-agent",
        "app.kubernetes.io/name": "svcdoctor-agent",
    }


def configmap(spec: AgentSpec, source: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ConfigMap holding the agent's ``source`` (mounted read-only by its pods); with
    ``owner`` (``owned_by`` of the created Job) it is the Job's from its creation on."""
    meta: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace, "labels": labels(spec)}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {AGENT_KEY: source}}


def _container(spec: AgentSpec, args: Sequence[str]) -> dict[str, Any]:
    return {
        "name": "agent",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-I", f"{MOUNT}/{AGENT_KEY}", *args],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "HOSTNAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "resources": {
            "requests": {"cpu": "50m", "memory": "32Mi"},
            "limits": {"cpu": "1", "memory": "128Mi"},
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NOBODY,
            "runAsGroup": NOBODY,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "agent", "mountPath": MOUNT, "readOnly": True}],
    }


def _pod_spec(spec: AgentSpec, args: Sequence[str], node: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NOBODY,
            "runAsGroup": NOBODY,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(spec, args)],
        "volumes": [{"name": "agent", "configMap": {"name": spec.name, "defaultMode": 0o444}}],
    }
    if node is not None:
        body["nodeName"] = node
        body["tolerations"] = [{"operator": "Exists"}]  # a probe per node, tainted ones too
    return body


def _job(
    spec: AgentSpec, name: str, args: Sequence[str], extra: dict[str, str], node: str | None
) -> dict[str, Any]:
    meta_labels = labels(spec) | extra
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": meta_labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": spec.deadline_seconds,
            "ttlSecondsAfterFinished": TTL_SECONDS,
            "template": {
                "metadata": {"labels": meta_labels},
                "spec": _pod_spec(spec, args, node),
            },
        },
    }


def job(spec: AgentSpec) -> dict[str, Any]:
    """The Job running the agent with ``spec.args``: one pod, never retried, bounded by
    ``deadline_seconds`` and removed ``TTL_SECONDS`` after it ends."""
    return _job(spec, spec.name, spec.args, {}, spec.node)


def node_job_name(spec: AgentSpec, index: int) -> str:
    """The name of the per-node Job ``index`` (its pods carry it as ``job-name``)."""
    return f"{spec.name}-node-{index}"


def node_jobs(spec: AgentSpec) -> list[dict[str, Any]]:
    """One Job per node (its pod's ``nodeName`` set), for the per-node probe: Jobs, not bare
    Pods, so that the roles need not grant creating pods."""
    return [
        _job(spec, node_job_name(spec, i), args, {"svcdoctor.io/node": node[:63]}, node)
        for i, (node, args) in enumerate(spec.node_args)
    ]


def network_policy(spec: AgentSpec, owner: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``--network-policy``'s NetworkPolicy: the run's pods may reach only the target pods'
    ports (TCP) and DNS; nothing when ``spec.egress`` is None. Traffic through the
    Service's ClusterIP is judged after kube-proxy's DNAT by the common CNIs (Calico,
    Cilium), i.e. as traffic to the target pods; a CNI without NetworkPolicy support ignores
    the policy."""
    if spec.egress is None:
        return None
    meta: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace, "labels": labels(spec)}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    dns = [{"protocol": proto, "port": DNS_PORT} for proto in ("UDP", "TCP")]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta,
        "spec": {
            "podSelector": {"matchLabels": {RUN_LABEL: spec.run_id}},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"podSelector": {"matchLabels": dict(spec.egress.pod_labels)}}],
                    "ports": [{"protocol": "TCP", "port": p} for p in spec.egress.ports],
                },
                {"to": [DNS_PEER], "ports": dns},
            ],
        },
    }


def owned_by(job_obj: dict[str, Any]) -> dict[str, Any]:
    """An ownerReference to the created Job (not its controller: only GC follows it)."""
    meta = job_obj.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "blockOwnerDeletion": False,
    }


def manifests(spec: AgentSpec, source: str) -> list[dict[str, Any]]:
    """Everything a run creates, in the order ``kubectl apply -f`` should create them
    (without the owner references, which need the Job's uid: ``deployed`` creates the Job
    first and the rest owned by it)."""
    policy = network_policy(spec)
    return [*([policy] if policy else []), configmap(spec, source), job(spec), *node_jobs(spec)]


class _Literal(str):
    """A multi-line string YAML prints as a literal block."""


def _literal(dumper: yaml.SafeDumper, text: _Literal) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(text), style="|")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Literal, _literal)


def to_yaml(objects: Sequence[dict[str, Any]]) -> str:
    """The objects as a multi-document YAML (``kubectl apply -f`` reads it); the agent's
    source as a readable literal block."""

    def literal(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: literal(v) for k, v in value.items()}
        if isinstance(value, list):
            return [literal(v) for v in value]
        if isinstance(value, str) and "\n" in value:
            return _Literal(value)
        return value

    return yaml.dump_all(
        [literal(o) for o in objects],
        Dumper=_Dumper,
        sort_keys=False,
        width=100,
        allow_unicode=True,
    )


# ---------------------------------------------------------------- I/O


class Writer(ClusterReader, Protocol):
    """What ``deployed`` and ``cleanup`` need of ``ApiReader``: a reader that creates and
    deletes."""

    def create(
        self, resource_name: str, namespace: str, obj: dict[str, Any], dry_run: bool = False
    ) -> dict[str, Any]: ...

    def delete(self, resource_name: str, namespace: str, name: str) -> bool: ...

    def delete_collection(
        self, resource_name: str, namespace: str, labels: str, propagation: str = "Background"
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Deployed:
    """What a run created: the Job and the per-node Jobs, as the server returned them."""

    spec: AgentSpec
    job: dict[str, Any]
    node_jobs: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Cleanup:
    """The end of a run: whether every deletion was accepted, what was still there after
    waiting (``None``: unknown, the objects could not be listed) and the errors."""

    deleted: bool
    left: tuple[str, ...] | None  # "kind/name" still present when the wait ended
    errors: tuple[str, ...]

    @property
    def clean(self) -> bool:
        """Known to have left nothing."""
        return self.left == ()

    def describe_left(self) -> str | None:
        """What remains, as a note (None: nothing)."""
        if self.left is None:
            return "unknown whether anything remains (listing failed: svcdoctor cleanup)"
        if self.left:
            return f"still present: {', '.join(self.left)} (svcdoctor cleanup removes them)"
        return None


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run like Ctrl-C: through the clean-up


@contextmanager
def shielded() -> Iterator[None]:
    """SIGINT and SIGTERM ignored in the block (from the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def cleanup(api: Writer, namespace: str, selector: str, wait_seconds: float = 30.0) -> Cleanup:
    """Delete every Job and ConfigMap matching ``selector`` in ``namespace`` (the Jobs' pods
    and NetworkPolicies with them) and wait (bounded) until they and the pods are gone; what
    cannot be deleted or listed is reported in ``errors``, not raised (``left`` None when
    listing failed)."""
    errors = []
    for kind in DELETED_KINDS:
        try:
            api.delete_collection(kind, namespace, selector, propagation="Background")
        except ClusterError as exc:
            errors.append(f"deleting {kind}: {exc}")
    until = time.monotonic() + wait_seconds
    try:
        left = remaining(api, namespace, selector)
        while left and time.monotonic() < until:
            time.sleep(0.5)
            left = remaining(api, namespace, selector)
    except ClusterError as exc:
        errors.append(f"listing what is left: {exc}")
        return Cleanup(False, None, tuple(errors))
    return Cleanup(not errors, tuple(left), tuple(errors))


def remaining(api: Writer, namespace: str | None, selector: str) -> list[str]:
    """``kind/name`` of every object matching ``selector`` (namespace None: all); a
    ``ClusterError`` when a kind cannot be listed (never an empty answer instead)."""
    found = []
    for kind in KINDS:
        for obj in api.list(kind, namespace, labels=selector):
            meta = obj.get("metadata") or {}
            where = f"{meta.get('namespace')}/" if namespace is None else ""
            found.append(f"{kind[:-1]}/{where}{meta.get('name')}")
    return found


def _delete_policy(api: Writer, spec: AgentSpec, done: Cleanup) -> Cleanup:
    """``done`` with the run's NetworkPolicy deleted (an error noted when it cannot be)."""
    try:
        api.delete("networkpolicies", spec.namespace, spec.name)
    except ClusterError as exc:
        return replace(
            done, deleted=False, errors=(*done.errors, f"deleting networkpolicies: {exc}")
        )
    return done


@contextmanager
def deployed(
    api: Writer,
    spec: AgentSpec,
    source: str | None = None,
    on_cleanup: Callable[[Cleanup], None] = lambda _: None,
) -> Iterator[Deployed]:
    """Create the run's objects (the Job first, then the NetworkPolicy, the ConfigMap and the
    per-node Jobs owned by it: none is ever without an owner, and the Job's pod, waiting for
    its ConfigMap, starts after its NetworkPolicy exists); at the end of
    the block delete everything with its label (after Ctrl-C, SIGTERM and errors too,
    without being interrupted itself) and hand the result to ``on_cleanup``; Ctrl-C and
    SIGTERM end as ``Interrupted`` with that result. The agent's arguments are checked first
    (``check_args``): nothing is created when it would refuse them."""
    text = agent_source() if source is None else source
    check_args(spec)
    cleaned: list[Cleanup] = []
    has_policy = False
    try:
        with _sigterm_interrupts():
            try:
                created = api.create("jobs", spec.namespace, job(spec))
                owner = owned_by(created)
                policy = network_policy(spec, owner)
                if policy is not None:
                    api.create("networkpolicies", spec.namespace, policy)
                    has_policy = True
                api.create("configmaps", spec.namespace, configmap(spec, text, owner))
                others = []
                for node_job in node_jobs(spec):
                    node_job["metadata"]["ownerReferences"] = [owner]
                    others.append(api.create("jobs", spec.namespace, node_job))
                yield Deployed(spec, created, tuple(others))
            finally:
                with shielded():
                    done = cleanup(api, spec.namespace, spec.selector)
                    if has_policy:  # its Job's garbage collection would too, later
                        done = _delete_policy(api, spec, done)
                    cleaned.append(done)
                    on_cleanup(cleaned[0])
    except KeyboardInterrupt:
        if cleaned:
            raise Interrupted(cleaned[0]) from None
        raise


# ---------------------------------------------------------------- the agent's output


@dataclass(frozen=True, slots=True)
class AgentOutput:
    """The agent's stdout read back: its request rows and its closing line (None when the
    log ended without one: the agent was killed or crashed)."""

    rows: tuple[dict[str, Any], ...]
    done: dict[str, Any] | None
    other: tuple[str, ...]  # lines that are neither (a traceback)


def parse_output(lines: Sequence[str]) -> AgentOutput:
    """Rows, the done line and anything else, from the agent's log lines."""
    rows: list[dict[str, Any]] = []
    done = None
    other = []
    for line in lines:
        text = line.strip()
        if not text:
            continue
        try:
            item = json.loads(text)
        except ValueError:
            other.append(text)
            continue
        if isinstance(item, dict) and item.get("agent") == "done":
            done = item
        elif isinstance(item, dict) and "ts" in item and "outcome" in item:
            rows.append(item)
        else:
            other.append(text)
    return AgentOutput(tuple(rows), done, tuple(other))


class Follower(threading.Thread):
    """Follows one agent pod's log in the background (found by name or by a label
    selector), until the agent's done line, the pod's end or ``until``; ``lines`` is what
    was read so far and ``phase`` the pod's last phase seen."""

    def __init__(
        self,
        api: ApiReader,
        namespace: str,
        until: float,
        pod: str | None = None,
        selector: str | None = None,
    ) -> None:
        super().__init__(daemon=True, name=f"follow-{pod or selector}")
        self.api, self.namespace, self.until = api, namespace, until
        self.pod, self.selector = pod, selector
        self.lines: list[str] = []
        self.phase = "Unknown"
        self.exit_code: int | None = None
        self.error: str | None = None
        self._lock = threading.Lock()

    def output(self) -> AgentOutput:
        with self._lock:
            return parse_output(list(self.lines))

    def rows_so_far(self) -> int:
        with self._lock:
            return sum(1 for line in self.lines if '"outcome"' in line)

    def run(self) -> None:
        try:
            self._follow()
        except ClusterError as exc:
            self.error = str(exc)

    def _find(self) -> dict[str, Any] | None:
        if self.pod is not None:
            found: dict[str, Any] | None = self.api.get("pods", self.namespace, self.pod)
            return found
        pods = self.api.list("pods", self.namespace, labels=self.selector)
        if pods:
            self.pod = str(pods[0]["metadata"]["name"])
            return dict(pods[0])
        return None

    def _state(self, pod: dict[str, Any] | None) -> None:
        if pod is None:
            return
        status = pod.get("status") or {}
        self.phase = str(status.get("phase") or "Unknown")
        for cs in status.get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated")
            if term and term.get("exitCode") is not None:
                self.exit_code = int(term["exitCode"])

    def _follow(self) -> None:
        pod = None
        while time.time() < self.until:  # the pod exists and left Pending
            pod = self._find()
            self._state(pod)
            if pod is not None and self.phase not in ("Pending", "Unknown"):
                break
            time.sleep(0.3)
        else:
            return
        assert self.pod is not None
        while time.time() < self.until:
            # a quiet stream is re-checked: not every server ends it when the container ends
            stream = self.api.follow_logs(self.namespace, self.pod, self.until, idle=IDLE_SECONDS)
            for seen, line in enumerate(stream, 1):
                with self._lock:
                    if seen > len(self.lines):  # a resumed stream starts from the top
                        self.lines.append(line)
                if '"agent": "done"' in line or '"agent":"done"' in line:
                    self._state(self.api.get("pods", self.namespace, self.pod))
                    return
            current = self.api.get("pods", self.namespace, self.pod)
            self._state(current)
            if current is None or self.phase in ("Succeeded", "Failed"):
                if current is not None:  # the whole log, should the stream have broken
                    text = self.api.logs(self.namespace, self.pod)
                    with self._lock:
                        if len(text.splitlines()) > len(self.lines):
                            self.lines = text.splitlines()
                return
            time.sleep(0.5)
