"""Facts about workloads and their pod templates, as the checks need them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from svcdoctor.model.finding import Location, ObjectRef

# Kinds whose pods run until deleted and can back a Service.
SERVING_KINDS = frozenset(
    {
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "ReplicationController",
        "Pod",
        "Rollout",
        # OpenKruise's CloneSet (apps.kruise.io/v1alpha1): replicas, selector and a pod
        # template as a Deployment's (https://openkruise.io/docs/user-manuals/cloneset);
        # its Advanced StatefulSet is kind StatefulSet already
        "CloneSet",
    }
)
HELM_HOOK = "helm.sh/hook"  # a chart's hook: a Pod or Job Helm runs once at a release step
# Kinds whose pods run to completion: noted, never Service-backed.
BATCH_KINDS = frozenset({"Job", "CronJob"})
WORKLOAD_KINDS = SERVING_KINDS | BATCH_KINDS

DEFAULT_GRACE_SECONDS = 30
MIN_SHUTDOWN_WINDOW = 2  # seconds the kubelet always leaves between SIGTERM and SIGKILL


def shutdown_timeline(prestop: float, grace: float) -> tuple[float, float]:
    """Seconds from a pod's deletion to SIGTERM and to SIGKILL, as the kubelet runs them:
    the preStop hook (cut at the grace period), then SIGTERM with what is left of the grace
    period (whole seconds spent in the hook are subtracted), never less than
    MIN_SHUTDOWN_WINDOW (``killContainer`` in kuberuntime_container.go)."""
    hook = min(prestop, grace) if grace > 0 else 0.0
    return hook, hook + max(grace - math.floor(hook), MIN_SHUTDOWN_WINDOW)


# A check of more than the process: a readiness endpoint, an aggregate that includes the
# app's dependencies by default (Spring Boot's /actuator/health with its DataSource and Redis
# indicators: https://docs.spring.io/spring-boot/reference/actuator/endpoints.html#actuator.endpoints.health.auto-configured-health-indicators;
# Quarkus' /q/health, liveness and readiness together: https://quarkus.io/guides/smallrye-health),
# or a path that names what it checks.
_DEEP_PATH = re.compile(
    r"ready|readiness|^/actuator/health/?$|^/q/health/?$|\b(db|database|deps|dependencies|"
    r"deep|full|upstreams?)\b",
    re.IGNORECASE,
)
# What checks only that the server answers: the health conventions whose handlers answer
# 200 by themselves (Go's /healthz, /livez, /ping; /ok; a demo's /hello; Hazelcast's
# /hazelcast/health/node-state, this member's own lifecycle state:
# https://docs.hazelcast.com/hazelcast/5.5/maintain-cluster/rest-api#health-check), the root
# page, static files, an API's schema and docs page (FastAPI's /openapi.json and /docs, made
# from the routes at start: mcpo; judge480).
_PROCESS_PATH = re.compile(
    r"^/*(?:[^?#]*/)?(healthz?|livez?|liveness|alive|ping|heartbeat|hc|health[-_]?check|status|ok|hello|node-state|"
    r"up|metrics|version|openapi\.json|swagger\.json|docs|index\.html?|[^/?#]*\.(?:html?|txt|css|js|png|ico|svg))?/*(?:[?#].*)?$",
    re.IGNORECASE,
)
# kubebuilder's scaffold: the manager's --health-probe-bind-address=:8081 serves /healthz
# and /readyz with controller-runtime's healthz.Ping, an in-process check (cmd/main.go's
# mgr.AddReadyzCheck("readyz", healthz.Ping))
_MANAGER_PINGS = frozenset({("8081", "/readyz"), ("8081", "/healthz")})
# a query that asks the handler for its health (go-demo-7's `/demo/hello?health=true`) or its
# version (SABnzbd's `/api?mode=version`, answered without the API key; judge303)
_HEALTH_QUERY = re.compile(
    r"[?&](?:[\w-]+=)?(healthz?|ping|alive|liveness|version)\b", re.IGNORECASE
)
_URL_PATH = re.compile(r"https?://[^/\s'\"]+(/[^\s'\"]*)?")


@dataclass(frozen=True, slots=True)
class ContainerPort:
    number: int
    name: str | None = None
    protocol: str = "TCP"
    host: bool = False  # hostPort set: two pods of it cannot run on one node


@dataclass(frozen=True, slots=True)
class Probe:
    """A probe or hook handler reduced to what identifies it.

    ``handler`` is ``httpGet``, ``tcpSocket``, ``exec``, ``grpc`` or ``sleep``; ``target`` is
    a canonical tuple of the fields that define *what* is checked (path, port, command…),
    timing fields excluded, so two probes are the same check iff their targets are equal.
    """

    handler: str
    target: tuple[str, ...]
    line: int
    command: tuple[str, ...] = ()
    port: int | str | None = None

    @property
    def header_names(self) -> tuple[str, ...]:
        """The names of an ``httpGet`` probe's ``httpHeaders``, lower-case (the target's
        ``name=value`` items after scheme, host, port and path)."""
        if self.handler != "httpGet":
            return ()
        return tuple(h.partition("=")[0].lower() for h in self.target[5:])

    @property
    def may_check_dependencies(self) -> bool:
        """Whether the probe may check more than its own process (what a replica shares with
        the others): an HTTP path, or a URL an ``exec`` fetches, that is no plain health
        convention (``_PROCESS_PATH``) or names readiness or a dependency (``_DEEP_PATH``); a
        gRPC check of a named service. A ``tcpSocket`` check, a gRPC server's overall status
        and any other command check the server alone, as far as the manifest shows."""
        if self.handler == "grpc":
            return bool(self.target[2:] and self.target[2])
        if self.handler == "httpGet" and self.target[3:5] in _MANAGER_PINGS:
            return False
        if self.handler == "httpGet":
            path = self.target[4]
        elif self.handler == "exec" and (url := _URL_PATH.search(" ".join(self.command))):
            path = url.group(1) or "/"
        else:
            return False
        if _DEEP_PATH.search(path):
            return True
        return not (_PROCESS_PATH.match(path) or _HEALTH_QUERY.search(path))


@dataclass(frozen=True, slots=True)
class PreStop:
    """A preStop hook; ``sleep_seconds`` is known for native sleep and ``sleep`` commands."""

    handler: str
    line: int
    sleep_seconds: float | None = None
    command: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Mount:
    """A ``volumeMounts`` entry: the volume's name, where it is mounted, and ``readOnly``."""

    volume: str
    path: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    line: int
    image: str = ""
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    ports: tuple[ContainerPort, ...] = ()
    readiness: Probe | None = None
    liveness: Probe | None = None
    startup: Probe | None = None
    prestop: PreStop | None = None
    # ``env`` entries with a literal ``value`` (``valueFrom`` ones are not known from files)
    env: tuple[tuple[str, str], ...] = ()
    # the names of ``env`` entries set from elsewhere (``valueFrom``), and whether ``envFrom``
    # brings in variables: what the files do not say
    env_refs: frozenset[str] = frozenset()
    env_from: bool = False
    mounts: tuple[Mount, ...] = ()
    local_image: bool = False  # imagePullPolicy Never: only on nodes it was loaded onto
    # the seconds its app keeps serving after SIGTERM as its mounted configuration sets them,
    # what says so and the source (``manifests.configs``: CoreDNS's health lameduck)
    config_drain: tuple[float, str, str] | None = None

    @property
    def probes(self) -> tuple[Probe, ...]:
        """Its readiness, liveness and startup probes, those it sets."""
        return tuple(p for p in (self.readiness, self.liveness, self.startup) if p is not None)

    @property
    def probe_headers(self) -> frozenset[str]:
        """The header names its probes send (``Probe.header_names``)."""
        return frozenset(h for p in self.probes for h in p.header_names)

    @property
    def env_names(self) -> frozenset[str]:
        """The environment variables it sets, by value or from a reference."""
        return frozenset(name for name, _ in self.env) | self.env_refs


@dataclass(frozen=True, slots=True)
class PodTemplate:
    labels: dict[str, str]
    annotations: dict[str, str]
    containers: tuple[Container, ...]
    line: int
    grace_seconds: int | None = None
    grace_line: int | None = None  # line of terminationGracePeriodSeconds, when written
    spread: bool = False  # topologySpreadConstraints or pod anti-affinity present
    # ``volumes``: name -> source (``emptyDir``, ``hostPath``, ``persistentVolumeClaim``…)
    volumes: dict[str, str] = field(default_factory=dict)
    read_only_volumes: frozenset[str] = frozenset()  # sources with `readOnly: true` (a disk)
    # claim volumes whose PersistentVolumeClaim in the inputs pods of several nodes can hold
    shared_volumes: frozenset[str] = frozenset()
    share_process_namespace: bool = False  # the pause container is PID 1, not the app
    # why the pods keep their data in themselves by a config they mount (Dex's in-memory
    # storage in a ConfigMap, ``manifests.configs``); "" when no config says so
    config_state: str = ""
    idle: str = ""  # why its servers listen nowhere, as configured (Argo CD's Dex unset)
    # why two of its pods cannot run on one node (host ports, a required anti-affinity on the
    # hostname), so a surge pod needs a spare node; "" when they can
    apart: str = ""
    runs_once: bool = False  # restartPolicy Never or OnFailure: its containers run to an end
    # volumes a container mounts with `mountPropagation: Bidirectional`: mount points for the
    # mounts it makes at run time (a sandbox's layers), not data
    mount_points: frozenset[str] = frozenset()

    @property
    def effective_grace_seconds(self) -> int:
        return DEFAULT_GRACE_SECONDS if self.grace_seconds is None else self.grace_seconds


@dataclass(frozen=True, slots=True)
class Workload:
    """A Deployment, StatefulSet, DaemonSet, ReplicaSet, Pod, Job/CronJob or Argo Rollout.

    ``replicas`` is ``None`` when the manifest leaves it unset (the API defaults it to 1);
    ``strategy`` is the update strategy type; ``max_unavailable``/``max_surge`` are as
    written (int or percentage string) or ``None`` when defaulted; ``min_ready_seconds``
    is ``spec.minReadySeconds`` (``None``: unset, 0 applies).
    """

    ref: ObjectRef
    location: Location
    template: PodTemplate
    annotations: dict[str, str] = field(default_factory=dict)
    replicas: int | None = None
    strategy: str | None = None
    max_unavailable: int | str | None = None
    max_surge: int | str | None = None
    owner: ObjectRef | None = None  # the controller in metadata.ownerReferences, if any
    min_ready_seconds: int | None = None
    claim_templates: tuple[str, ...] = ()  # a StatefulSet's volumeClaimTemplates names
    governing: str = ""  # a StatefulSet's serviceName: the Service giving its pods DNS names
    pinned: str = ""  # the comment beside ``replicas:`` that says it must run once
    # ``replicas`` is a placeholder a tool fills in (``<REPLICAS>``): set, but unknown
    replicas_placeholder: bool = False
    # an Argo Rollout's canaryService/previewService, beside a stableService/activeService:
    # the Services of the new pods while it rolls, copies of the stable one
    preview_services: tuple[str, ...] = ()

    @property
    def serving(self) -> bool:
        """Whether its pods can back a Service: a long-running kind, and not a Pod that runs
        once: a Helm hook's (a chart's `helm.sh/hook: test` Pod carries the selector labels
        of what it tests: https://helm.sh/docs/topics/chart_tests/), or one whose
        restartPolicy lets it end (such a test converted to plain YAML, its hook annotation
        dropped: operate-first/apps' openmetadata-test-connection, judge293)."""
        return self.ref.kind in SERVING_KINDS and not (
            self.ref.kind == "Pod" and (HELM_HOOK in self.annotations or self.template.runs_once)
        )
