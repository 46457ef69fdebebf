"""The readiness probe a fix prints (SVD201, SVD203): on the port the Service sends to, in
that port's protocol.

A pasted probe that never passes takes every pod out of its Service, so the probe follows
the evidence: ``httpGet`` only where the port is HTTP by its name, ``appProtocol``, image or
number; ``scheme: HTTPS`` on TLS (webhook, ``https``) ports; ``grpc`` on gRPC ports; an
``exec`` a database image ships (``pg_isready``) or ``tcpSocket`` on ports that are not HTTP;
``tcpSocket`` where nothing says which protocol the port speaks. Each fix says, in comment
lines, which port it probes and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from svcdoctor.checks._carrying import carries_requests, webhook_calls
from svcdoctor.checks._serving import argv_of, flag_port, serves, uncalled
from svcdoctor.model import Container, Inventory, Probe, Service, ServicePort, Workload
from svcdoctor.model.images import image_name

PLACEHOLDER_PORT = 8080


class Speaks(StrEnum):
    """What a port speaks, as far as the inputs tell."""

    HTTP = "http"
    HTTPS = "https"
    GRPC = "grpc"
    OTHER = "other"  # not HTTP: a database's, a cache's, LDAP's, raw TCP or TLS
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Target:
    """A port to probe: ``port`` as the probe names it (a number, or a name the container
    declares), its ``number`` when known, ``where`` it comes from (comment text), the
    Service ports that send to it."""

    port: int | str
    number: int | None
    where: str
    sent: tuple[tuple[Service, ServicePort], ...] = ()
    udp: bool = False  # UDP or SCTP (``_UNPROBED``): no probe handler checks it


# Protocols no probe handler speaks (httpGet, tcpSocket and grpc are TCP): a tcpSocket probe
# of an SCTP port never passes (kube-loxilb's sctp-lb examples; judge294)
_UNPROBED = frozenset({"UDP", "SCTP"})
# UDP ports that only receive: metrics, logs and flow records sent one way (StatsD 8125,
# syslog 514, NetFlow 2055, IPFIX 4739, sFlow 6343, collectd 25826, CloudWatch's CSM 31000:
# their protocols define no reply)
_ONE_WAY_NAME = re.compile(r"statsd|syslog|netflow|ipfix|sflow|collectd|csm", re.IGNORECASE)
_ONE_WAY_PORTS = frozenset({8125, 514, 2055, 4739, 6343, 25826, 31000})


def bare_image(inventory: Inventory, container: Container) -> bool:
    """Whether the container's image is built here ``FROM scratch``: no program but the
    app's, so no exec probe can run in it."""
    facts = inventory.images.get(container.image)
    return facts is not None and facts.base == "scratch"


def one_way(target: Target) -> bool:
    """Whether the UDP port only receives (``_ONE_WAY_NAME``/``_ONE_WAY_PORTS``)."""
    names = [p.name or "" for _, p in target.sent] + [str(target.port)]
    return any(_ONE_WAY_NAME.search(n) for n in names) or target.number in _ONE_WAY_PORTS


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A readiness probe (``None``: no handler can check the port) and the comment lines
    that say which port and why this handler; ``speaks`` the evidence's verdict."""

    probe: dict[str, Any] | None
    note: str
    speaks: Speaks


# Service appProtocol values (https://kubernetes.io/docs/concepts/services-networking/service/#application-protocol:
# IANA service names, `kubernetes.io/h2c`, `kubernetes.io/ws`, `kubernetes.io/wss`).
_APP_PROTOCOL = {
    "http": Speaks.HTTP,
    "kubernetes.io/h2c": Speaks.HTTP,
    "h2c": Speaks.HTTP,
    "kubernetes.io/ws": Speaks.HTTP,
    "https": Speaks.HTTPS,
    "kubernetes.io/wss": Speaks.HTTPS,
    "grpc": Speaks.GRPC,
}
# Port-name words (Istio's protocol selection by port name, `<protocol>[-<suffix>]`:
# https://istio.io/latest/docs/ops/configuration/traffic-management/protocol-selection/).
_NAME_WORDS = {
    "http": Speaks.HTTP,
    "http2": Speaks.HTTP,
    "h2c": Speaks.HTTP,
    "web": Speaks.HTTP,
    "www": Speaks.HTTP,
    "https": Speaks.HTTPS,
    "grpc": Speaks.GRPC,
    **dict.fromkeys(
        (
            "tcp", "udp", "tls", "redis", "postgres", "postgresql", "pg", "mysql", "mongo",
            "mongodb", "memcache", "memcached", "ldap", "ldaps", "amqp", "amqps", "mqtt",
            "kafka", "zk", "zookeeper", "cql", "smtp", "dns", "nats", "ssh", "sftp", "ftp",
            "imap", "imaps", "pop3", "pop3s", "rtmp", "sip", "syslog",
        ),
        Speaks.OTHER,
    ),
}  # fmt: skip
_WORD = re.compile(r"[-_.]")
# kubebuilder's name for the admission webhook port (config/default/manager_webhook_patch.yaml
# of its scaffold); the API server calls admission webhooks over HTTPS only
# (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#contacting-the-webhook).
# A port named only `webhook` may take Git webhooks in plain HTTP (Argo CD's
# applicationset-controller, manifests/base/applicationset-controller in argoproj/argo-cd).
_TLS_NAMES = frozenset({"webhook-server"})
# Kong's upstream protocol annotation (https://docs.konghq.com/kubernetes-ingress-controller/
# latest/reference/annotations/#konghqcomprotocol): gRPC over TLS is no protocol a kubelet
# probe speaks (its grpc probe is plaintext), so only a tcpSocket probe passes (Kong's
# examples/gateway-grpcroute-via-https.yaml; judge332)
_KONG_PROTOCOL = "konghq.com/protocol"
_KONG_TLS = {"https": Speaks.HTTPS, "grpcs": Speaks.OTHER}
# Well-known ports that are not HTTP (IANA service names and port numbers,
# https://www.iana.org/assignments/service-names-port-numbers): ldap, ldaps, ms-sql-s, mysql,
# postgresql, amqp, redis, memcache, mongodb; ssh, ftp and smtp, which an HTTP image beside
# them does not serve (DigitalOcean's all-protos-nginx example: ssh 22 before http 80;
# judge477).
_OTHER_PORTS = {
    21: "FTP",
    22: "SSH",
    25: "SMTP",
    389: "LDAP",
    636: "LDAPS",
    1433: "SQL Server",
    3306: "MySQL",
    5432: "PostgreSQL",
    5672: "AMQP",
    6379: "Redis",
    11211: "memcached",
    27017: "MongoDB",
    # the servers' own defaults: Kafka's listener (listeners=PLAINTEXT://:9092,
    # https://kafka.apache.org/documentation/#brokerconfigs_listeners), ZooKeeper's
    # clientPort (https://zookeeper.apache.org/doc/current/zookeeperAdmin.html), Cassandra's
    # native transport (cassandra.yaml native_transport_port)
    9092: "Kafka",
    2181: "ZooKeeper",
    9042: "Cassandra",
    # Squid's proxy port answers a plain GET for a path with an error page (4xx): it proxies
    # absolute URLs only (http_port 3128, squid.conf.documented)
    3128: "Squid's forward proxy",
}
# Images that speak one protocol that is not HTTP on every port (their Docker Hub pages:
# https://hub.docker.com/_/redis, _/postgres, _/mysql, _/mariadb, _/mongo, _/memcached,
# https://hub.docker.com/r/valkey/valkey, bitnami/openldap, osixia/openldap; Kafka's broker
# images, https://hub.docker.com/r/apache/kafka, _/cassandra; not ZooKeeper's, whose AdminServer
# serves HTTP on 8080), by the last
# segment of the image name.
_OTHER_IMAGES = {
    "redis": "Redis",
    "valkey": "Redis",
    "keydb": "Redis",
    "postgres": "PostgreSQL",
    "postgresql": "PostgreSQL",
    "postgis": "PostgreSQL",
    "mysql": "MySQL",
    "mariadb": "MySQL",
    "mongo": "MongoDB",
    "mongodb": "MongoDB",
    "memcached": "memcached",
    "openldap": "LDAP",
    "kafka": "Kafka",
    "cp-kafka": "Kafka",
    "cassandra": "Cassandra",
    # DynamoDB Local answers every unsigned request with 400 MissingAuthenticationToken: no
    # path an httpGet probe could pass (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/DynamoDBLocal.UsageNotes.html)
    "dynamodb-local": "the DynamoDB API (signed requests only)",
    # Squid (ubuntu/squid, sameersbn/squid) proxies absolute URLs; a GET for a path gets an
    # error page (squid.conf.documented, http_port)
    "squid": "a forward proxy's absolute-URL requests",
}
# Images that serve plain HTTP as shipped (nginx and httpd on 80: https://hub.docker.com/_/nginx,
# https://hub.docker.com/_/httpd; kennethreitz/httpbin, mccutchen/go-httpbin,
# hashicorp/http-echo and traefik/whoami are HTTP test servers).
_HTTP_IMAGES = frozenset(
    {"nginx", "nginx-unprivileged", "httpd", "httpbin", "go-httpbin", "http-echo", "whoami"}
)
# The readiness endpoints HTTP servers ship, by the last segment of the image name:
# Prometheus' and Alertmanager's /-/ready ("returns 200 when ready to serve traffic":
# https://prometheus.io/docs/prometheus/latest/management_api/,
# https://prometheus.io/docs/alerting/latest/management_api/); Grafana's /api/health
# (https://grafana.com/docs/grafana/latest/developers/http_api/other/); Loki's, Tempo's and
# Mimir's /ready (https://grafana.com/docs/loki/latest/reference/loki-http-api/), each with
# the HTTP port it listens on by default (a port of unknown protocol is taken for it there)
_READY_PATHS = {
    "prometheus": ("/-/ready", 9090),
    "alertmanager": ("/-/ready", 9093),
    "grafana": ("/api/health", 3000),
    "loki": ("/ready", 3100),
    "tempo": ("/ready", 3200),
    "mimir": ("/ready", 8080),
}
# gRPC servers that register no health service (grpc.health.v1): ML Metadata's, whose main()
# registers its MetadataStoreService only (ml_metadata/metadata_store/
# metadata_store_server_main.cc in google/ml-metadata; kubeflow/pipelines; judge233)
# The OpenTelemetry Collector's OTLP gRPC receiver neither: its health is the health_check
# extension's HTTP port, when its configuration enables it
# (https://github.com/open-telemetry/opentelemetry-collector/issues/3040; Contour's tracing
# example; judge325)
_NO_GRPC_HEALTH = re.compile(
    r"(^|/)(ml_metadata_store_server|opentelemetry-collector(-contrib|-k8s|-otlp)?)(:|@|$)"
)
# Readiness commands the images ship, by protocol: pg_isready exits 0 once the server accepts
# connections, no credentials needed (https://www.postgresql.org/docs/current/app-pg-isready.html);
# `mysqladmin ping` exits 0 while the server runs, "even in case of an error such as Access
# denied" (https://dev.mysql.com/doc/refman/8.4/en/mysqladmin.html). Only for the images
# named: MariaDB 11 images ship `mariadb-admin`, not `mysqladmin`.
_EXEC = {
    "postgres": ("pg_isready", "-h", "127.0.0.1", "-p"),
    "postgresql": ("pg_isready", "-h", "127.0.0.1", "-p"),
    "postgis": ("pg_isready", "-h", "127.0.0.1", "-p"),
    "mysql": ("mysqladmin", "ping", "-h", "127.0.0.1", "-P"),
}
# knative.dev/pkg's webhook serves through handlers.Drainer, which answers the kubelet's
# probes (User-Agent kube-probe/) on any path with 200 until it drains (webhook/webhook.go,
# network/handlers/drain.go in knative/pkg); Tekton's webhooks are built on it.
_KNATIVE_WEBHOOK = re.compile(r"(knative\.dev/[^:@]*/cmd/webhook|tektoncd/[^:@]*/cmd/webhook)")
# A controller-runtime manager: kubebuilder's flags or its `/manager` binary
# (https://book.kubebuilder.io/cronjob-tutorial/empty-main). It serves /readyz on its
# --health-probe-bind-address port (kubebuilder's scaffold probes it there:
# config/manager/manager.yaml); its webhook server answers only the webhook paths
# (pkg/webhook/server.go in kubernetes-sigs/controller-runtime: GET /readyz there is a 404).
_MANAGER_FLAG = re.compile(r"^--(health-probe-bind-address|metrics-bind-address|webhook-port)(=|$)")


def no_readiness(workload: Workload, container: Container, today: str = "") -> str:
    """What a container without a readinessProbe gets wrong: traffic before it listens (unless its
    startupProbe, or Dapr's sidecar, holds the pod back) and after it stops serving;
    ``today``, why that loses nothing yet (``rollout.until_replicated``). Dapr's injected
    sidecar is ready only once the app's port answers: its probe is daprd's /v1.0/healthz,
    which waits until "the app channel is initialized"
    (https://docs.dapr.io/operations/resiliency/health-checks/sidecar-health/)."""
    annotations = workload.template.annotations
    if container.startup is not None:
        held = "once its startupProbe passes, it"
    elif annotations.get("dapr.io/enabled") == "true" and annotations.get("dapr.io/app-port"):
        held = "Dapr's sidecar keeps the pod unready until its app port answers, but it"
    else:
        held = "it gets traffic before it listens and"
    return f"readinessProbe: {today}{held} keeps getting traffic when it stops serving"


def service_target(inventory: Inventory, workload: Workload, container: Container) -> Target:
    """The port the Services send to for this container: a Service port's target the
    container declares (a plain-HTTP one first), else a numeric target no container of the
    pod declares (it may listen there undeclared), else its first declared port, else a
    placeholder."""
    services = inventory.services_of(workload)
    callers = [s for s in services if carries_requests(inventory, s)] or list(services)
    others = [o for o in workload.template.containers if o.name != container.name]
    found: dict[int | str, Target] = {}
    named_only: list[tuple[Service, ServicePort]] = []  # uncalled by name, declared by none
    for s in callers:
        for p in s.ports:
            t = p.target
            if uncalled(p) and (t in found or not serves(container, t)):
                if isinstance(t, int) and not container.ports and not others:
                    named_only.append((s, p))
                continue  # a metrics or probe port: only a port the container declares
            if serves(container, t):
                extra = ""
            elif (
                isinstance(t, int)
                and not any(serves(o, t) for o in others)
                and (_named_for(p, container) or not any(_named_for(p, o) for o in others))
            ):
                extra = "; no container declares it"
            else:
                continue
            if t in found:
                old = found[t]
                udp = old.udp and p.protocol.upper() in _UNPROBED  # DNS: UDP and TCP to one port
                found[t] = Target(old.port, old.number, old.where, (*old.sent, (s, p)), udp)
                continue
            number = t if isinstance(t, int) else _number(container, t)
            where = f"the port Service {s.ref.name} sends to (targetPort {t}{extra})"
            found[t] = Target(t, number, where, ((s, p),), p.protocol.upper() in _UNPROBED)
    targets = [t for t in found.values() if not t.udp] or list(found.values())
    # a port it declares before one it may listen on undeclared (a leftover Service port:
    # heptio/gimbal's Prometheus behind 9093 and its own 9090 named `prometheus`; judge108),
    # a port requests reach before one only named for metrics or probes
    declared = [t for t in targets if serves(container, t.port)]
    called = [t for t in targets if not all(uncalled(p) for _, p in t.sent)]
    targets = [t for t in declared if t in called] or declared or called
    if not targets and named_only:
        # a lone container's Service port named for metrics is still where it listens
        # (argo-workflows' quick-start Prometheus behind `metrics` 9090, no ports; judge329)
        s, p = named_only[0]
        number = int(p.target)
        where = f"the port Service {s.ref.name} sends to (targetPort {number}; undeclared)"
        targets = [Target(number, number, where, ((s, p),), p.protocol.upper() in _UNPROBED)]
    # an aggregated API server's --secure-port (metrics adapters beside a side HTTP port)
    secure = flag_port(argv_of(container), "secure-port")
    targets = [t for t in targets if t.number == secure] or targets
    if targets:
        http = [t for t in targets if speaks(inventory, container, t)[0] is Speaks.HTTP]
        return (http or targets)[0]
    if container.ports:
        first = container.ports[0]
        return Target(
            first.name or first.number,
            first.number,
            "its first declared port (no Service port targets one it declares)",
            udp=first.protocol.upper() in _UNPROBED,
        )
    return Target(
        PLACEHOLDER_PORT,
        None,
        "a placeholder: no Service port reaches a port of this container and it declares "
        "none; put the port the app listens on",
    )


def _named_for(port: ServicePort, other: Container) -> bool:
    """Whether a Service port is named for a container of the pod: its name, or its image's
    name as a word of it (`polaris-pushgateway` beside Prometheus: polarismesh/polaris)."""
    name = (port.name or "").lower()
    words = set(re.split(r"[-_]", name)) - {""}
    image = image_name(other.image).lower()
    names = {other.name.lower(), image} - {""}
    return bool(words) and bool(names & (words | {name}))


def probed_target(
    inventory: Inventory, workload: Workload, container: Container, port: int | str
) -> Target:
    """A port a probe already checks, with the Service ports that send to it."""
    number = port if isinstance(port, int) else _number(container, port)
    names = {p.name for p in container.ports if p.number == number and p.name}
    sent = tuple(
        (s, p)
        for s in inventory.services_of(workload)
        for p in s.ports
        if p.target in (port, number) or p.target in names
    )
    return Target(port, number, "the port the readinessProbe checks now", sent)


def speaks(inventory: Inventory, container: Container, target: Target) -> tuple[Speaks, str]:
    """What the target port speaks and the evidence, in order: the Service's
    ``appProtocol``, an image that speaks one protocol that is not HTTP, the port's names,
    an admission webhook's Service or port 443 (TLS), an HTTP server image, a well-known
    port number."""
    for _, p in target.sent:
        if p.app_protocol:
            found = _APP_PROTOCOL.get(p.app_protocol.lower(), Speaks.OTHER)
            return found, f"the Service port's appProtocol is {p.app_protocol}"
    for s, _ in target.sent:
        said = s.annotations.get(_KONG_PROTOCOL, "").lower()
        if said in _KONG_TLS:
            return _KONG_TLS[said], f"Service {s.ref.name}'s {_KONG_PROTOCOL} is {said}"
    base = image_name(container.image).lower()
    if base in _OTHER_IMAGES:
        return Speaks.OTHER, f"image {base} speaks {_OTHER_IMAGES[base]}, not HTTP"
    names = [p.name for _, p in target.sent if p.name]
    names += [t for _, p in target.sent if isinstance(t := p.target, str)]
    names += [p.name for p in container.ports if p.name and p.number == target.number]
    if isinstance(target.port, str):
        names.append(target.port)
    for name in names:
        if (word := _name_word(name)) is not None:
            return word, f"its name {name} says {_SAYS[word]}"
    for s, p in target.sent:
        if any(port == p.port for _, port in webhook_calls(inventory, s)):
            return Speaks.HTTPS, f"Service {s.ref.name} is an admission webhook's (HTTPS)"
        if p.port == 443 and target.number in (None, 443, 8443):  # not TLS ended before
            return Speaks.HTTPS, f"Service {s.ref.name} exposes it as 443 (HTTPS)"
    if base in _HTTP_IMAGES:
        return Speaks.HTTP, f"image {base} serves HTTP"
    if target.number in _OTHER_PORTS:
        return Speaks.OTHER, f"{target.number} is {_OTHER_PORTS[target.number]}'s port, not HTTP"
    if any(p.port == 80 for _, p in target.sent) or target.number == 80:
        return Speaks.HTTP, "it is exposed as port 80 (HTTP)"
    return Speaks.UNKNOWN, ""


_SAYS = {
    Speaks.HTTP: "HTTP",
    Speaks.HTTPS: "HTTPS",
    Speaks.GRPC: "gRPC",
    Speaks.OTHER: "a protocol other than HTTP",
}


def _name_word(name: str) -> Speaks | None:
    """What a port name says by its first word (``http-api``, ``tcp-ldap``), or its last one
    (``api-http``); ``grpc-web`` says nothing (gRPC-Web is neither gRPC nor a health URL)."""
    if name.lower() in _TLS_NAMES:
        return Speaks.HTTPS
    words = [w for w in _WORD.split(name.lower()) if w]
    if not words or words[:2] == ["grpc", "web"]:
        return None
    first = _NAME_WORDS.get(words[0])
    if first is not None:
        return first
    last = _NAME_WORDS.get(words[-1])
    return last if last is not Speaks.OTHER else None


def _number(container: Container, name: str) -> int | None:
    return next((p.number for p in container.ports if p.name == name), None)


_DEEPER = (
    "if the app has an endpoint that fails when\n# this pod cannot serve requests (e.g. "
    "/readyz), an httpGet to it checks more"
)


def known_path(container: Container, target: Target, scheme: str) -> tuple[str, Probe] | None:
    """The container's own livenessProbe or startupProbe (its kind and the probe) that GETs a
    path on the target port in ``scheme``: the inputs' only evidence of a path it serves."""
    ports = {target.port, target.number} - {None}
    ports |= {p.name for p in container.ports if p.number == target.number and p.name}
    return next(
        (
            (kind, probe)
            for kind, probe in _served_gets(container)
            if probe.port in ports and probe.target[1] == scheme
        ),
        None,
    )


def _served_gets(container: Container) -> list[tuple[str, Probe]]:
    """The container's own livenessProbe and startupProbe (kind, probe) that GET a path of
    the pod: no host (the kubelet GETs the pod's IP), no httpHeaders the app may require."""
    kinds = (("livenessProbe", container.liveness), ("startupProbe", container.startup))
    return [
        (kind, probe)
        for kind, probe in kinds
        if probe is not None
        and probe.handler == "httpGet"
        and not probe.target[2]
        and len(probe.target) == 5
    ]


def _http_probe(container: Container) -> tuple[str, Probe] | None:
    """The first of ``_served_gets`` on a port it names: a path the container serves."""
    return next(((k, p) for k, p in _served_gets(container) if p.port is not None), None)


def health_port(container: Container) -> int | None:
    """The port a controller-runtime manager serves /readyz on (``--health-probe-bind-address``),
    ``None`` when it sets none or disables it (``0``)."""
    return flag_port(argv_of(container), "health-probe-bind-address")


def manager(container: Container) -> bool:
    """Whether the container runs a controller-runtime manager (its flags, or kubebuilder's
    `/manager`)."""
    argv = argv_of(container)
    return any(_MANAGER_FLAG.match(w) for w in argv) or (
        bool(argv) and argv[0].rsplit("/", 1)[-1] == "manager"
    )


# smallstep's autocert injects a certificate for mutual TLS into pods annotated with the name
# to issue it for (https://github.com/smallstep/autocert#readme: "mutual TLS (mTLS)"): a
# server that requires its clients' certificates refuses the kubelet's HTTPS probe, which
# presents none
_MUTUAL_TLS = "autocert.step.sm/name"


def suggest(
    inventory: Inventory, workload: Workload, container: Container, target: Target
) -> Suggestion:
    """The readiness probe to print for ``target`` and its comment lines (``# port …: why
    this port``, ``# handler: why this handler``)."""
    if (health := health_port(container)) is not None:
        return Suggestion(
            {"httpGet": {"path": "/readyz", "port": health}},
            f"\n# port {health}: the manager's --health-probe-bind-address, where "
            "controller-runtime serves /readyz (kubebuilder's scaffold probes it there)",
            Speaks.HTTP,
        )
    head = f"\n# port {target.port}: {target.where}"
    if target.number is not None and target.number == flag_port(argv_of(container), "secure-port"):
        return Suggestion(
            {"httpGet": {"path": "/readyz", "port": target.port, "scheme": "HTTPS"}},
            f"{head}\n# httpGet /readyz, scheme HTTPS: it is the --secure-port of a server built "
            "on the Kubernetes API server\n# library, which serves /readyz there (as "
            "metrics-server's and prometheus-adapter's manifests probe it)",
            Speaks.HTTPS,
        )
    if target.udp:
        return Suggestion(
            None,
            f"{head}\n# it is UDP or SCTP, which no probe handler checks: an exec probe that "
            "sends the app a request (e.g. `dig @127.0.0.1`) does",
            Speaks.OTHER,
        )
    said, why = speaks(inventory, container, target)
    if said is Speaks.HTTPS and _MUTUAL_TLS in workload.template.annotations:
        said, why = (
            Speaks.OTHER,
            (
                f"{why}, with autocert's certificate for mutual TLS ({_MUTUAL_TLS}):\n# the "
                "kubelet's HTTPS probe presents no client certificate, which such a server refuses"
            ),
        )
    port = target.port
    if said in (Speaks.HTTP, Speaks.HTTPS) and not (
        said is Speaks.HTTPS and _KNATIVE_WEBHOOK.search(container.image)
    ):
        scheme = "HTTPS" if said is Speaks.HTTPS else "HTTP"
        if (known := known_path(container, target, scheme)) is not None:
            kind, probe = known
            path = probe.target[4]
            get: dict[str, Any] = {"path": path, "port": port}
            if said is Speaks.HTTPS:
                get["scheme"] = "HTTPS"
            if path == "/livez":  # the Kubernetes API server library's: /readyz is beside it
                get["path"] = "/readyz"
                return Suggestion(
                    {"httpGet": get},
                    f"{head}\n# httpGet /readyz: {why}; its {kind} GETs /livez, as servers "
                    "built on the Kubernetes\n# API server library do, which serve /readyz "
                    "beside it (failing once shutdown starts)",
                    said,
                )
            same = kind == "livenessProbe" and probe.may_check_dependencies
            return Suggestion(
                {"httpGet": get},
                f"{head}\n# httpGet {path}: {why}; its {kind} already GETs this path"
                + (
                    "\n# (liveness is then the same deep check: SVD202 moves it to tcpSocket)"
                    if same
                    else ""
                ),
                said,
            )
    ready, default = _READY_PATHS.get(image_name(container.image).lower(), ("", None))
    if ready and (said is Speaks.HTTP or (said is Speaks.UNKNOWN and target.number == default)):
        return Suggestion(
            {"httpGet": {"path": ready, "port": port}},
            f"{head}\n# httpGet {ready}: {image_name(container.image)} serves HTTP on port "
            f"{port} and answers 200 there once it is ready to serve",
            Speaks.HTTP,
        )
    if said is Speaks.HTTP:
        return Suggestion(
            {"tcpSocket": {"port": port}},
            f"{head}\n# tcpSocket: {why}, but nothing here names a path it serves\n# (a path it "
            f"lacks keeps every pod unready); {_DEEPER}",
            said,
        )
    if said is Speaks.HTTPS:
        if _KNATIVE_WEBHOOK.search(container.image):
            return Suggestion(
                {"httpGet": {"path": "/readyz", "port": port, "scheme": "HTTPS"}},
                f"{head}\n# httpGet, scheme HTTPS: {why}; knative.dev/pkg's webhook "
                "answers the kubelet's probes on any path until it drains",
                said,
            )
        if manager(container):
            return Suggestion(
                {"tcpSocket": {"port": port}},
                f"{head}\n# tcpSocket: {why}, but controller-runtime's webhook server answers "
                "only its webhook paths;\n# for a deeper check, if the manager takes "
                "kubebuilder's --health-probe-bind-address flag (a flag it lacks\n# stops it: "
                "openelb's has none), start it with =:8081 and probe httpGet /readyz on 8081",
                said,
            )
        if any(webhook_calls(inventory, svc) for svc, _ in target.sent) or "webhook" in str(
            target.port
        ):
            return Suggestion(
                {"tcpSocket": {"port": port}},
                f"{head}\n# tcpSocket: {why}, and an admission webhook's server answers its "
                "webhook paths only:\n# a probe path it does not serve would keep every pod "
                "unready (with failurePolicy Fail, blocking what it admits)",
                said,
            )
        return Suggestion(
            {"tcpSocket": {"port": port}},
            f"{head}\n# tcpSocket: {why}, but nothing here names a path it serves\n# (a path it "
            f"lacks keeps every pod unready); {_DEEPER}\n# (scheme HTTPS: the kubelet does "
            "not verify the certificate)",
            said,
        )
    if said is Speaks.GRPC and _NO_GRPC_HEALTH.search(container.image):
        return Suggestion(
            {"tcpSocket": {"port": port}},
            f"{head}\n# tcpSocket: {why}, but its server registers no grpc.health.v1 service "
            "(a grpc probe would keep\n# every pod unready) and its image ships no probe "
            "command",
            said,
        )
    if said is Speaks.GRPC and (found := _http_probe(container)) is not None:
        kind, probe = found
        get = {"path": probe.target[4], "port": probe.port}
        if probe.target[1] == "HTTPS":
            get["scheme"] = "HTTPS"
        return Suggestion(
            {"httpGet": get},
            f"{head}\n# httpGet {probe.target[4]} on {probe.port}: {why}, but nothing here says "
            f"it serves the gRPC health protocol;\n# its {kind} already GETs this path on the "
            "same pod (a grpc probe of a server without grpc.health.v1.Health\n# would keep "
            "every pod unready)",
            said,
        )
    if said is Speaks.GRPC and target.number is not None:
        return Suggestion(
            {"grpc": {"port": target.number}},
            f"{head}\n# grpc: {why}; the server must serve the gRPC health protocol "
            "(grpc.health.v1.Health), else tcpSocket",
            said,
        )
    base = image_name(container.image).lower()
    if said is Speaks.OTHER and base in _EXEC and target.number is not None:
        command = [*_EXEC[base], str(target.number)]
        return Suggestion(
            {"exec": {"command": command}},
            f"{head}\n# exec {command[0]}: {why}; {command[0]} passes once the server "
            "accepts connections",
            said,
        )
    if said in (Speaks.OTHER, Speaks.GRPC):
        return Suggestion({"tcpSocket": {"port": port}}, f"{head}\n# tcpSocket: {why}", said)
    return Suggestion(
        {"tcpSocket": {"port": port}},
        f"{head}\n# tcpSocket: nothing here says port {port} speaks HTTP; if it does, an "
        "httpGet to an endpoint that fails when\n# this pod cannot serve requests checks more",
        said,
    )
