"""Shared facts for the serving checks: which containers serve and which Services carry
requests (how a shell runs a script: ``checks._scripts``; shutdown facts and fix snippets:
``checks._shutdown``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from svcdoctor.checks._scripts import SHELLS, SimpleCommand, parse_script, shell_script
from svcdoctor.checks.settings import flag_value
from svcdoctor.model import Container, Inventory, Resource, Service, ServicePort, Workload
from svcdoctor.model.inventory import related
from svcdoctor.model.route import Route

# Programs that never listen: a container running only these serves nothing (a pod kept
# alive for `kubectl exec`, a test client, a loop writing files).
IDLE_PROGRAMS = frozenset(
    {
        "sleep", "tail", "cat", "true", ":", "echo", "printf", "date", "touch", "mkdir",
        "ls", "env", "hostname", "wait", "trap", "set", "export", "read", "[", "test",
        "curl", "wget", "nslookup", "dig", "ping", "pause", "/pause", "exit",
    }
)  # fmt: skip
_PAUSE_IMAGE = re.compile(r"(^|/)pause(:|@|$)")
# Images known to ship no shell (and no sleep binary). Distroless ":debug" tags have busybox.
NO_SHELL_IMAGE = re.compile(
    r"(^|/)distroless/(?!.*:debug)|^cgr\.dev/chainguard/(?!.*-dev\b)|(^|/)scratch(:|$)"
    r"|^(registry\.k8s\.io|k8s\.gcr\.io)/(metrics-server|kube-state-metrics|pause)"
)


# Kubernetes expands `$(VAR)` in command and args from the container's env and leaves an
# undefined one as written; `$$` is a literal `$` (https://kubernetes.io/docs/tasks/inject-
# data-application/define-interdependent-environment-variables/)
_DEPENDENT = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def argv_of(container: Container) -> list[str]:
    """The container's command and args as Kubernetes runs them: `$(VAR)` expanded from the
    env's literal values (one a ConfigMap or Secret gives stays as written)."""
    argv = [*container.command, *container.args]
    if not container.env or not any("$(" in word for word in argv):
        return argv
    env = dict(container.env)

    def value(m: re.Match[str]) -> str:
        return "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0))

    return [_DEPENDENT.sub(value, word) for word in argv]


def serves_nothing(container: Container) -> bool:
    """Whether the container runs only programs that never listen: ``sleep infinity``,
    ``tail -f /dev/null``, a bare ``cat`` or shell (kept open by stdin/tty), a
    ``while true; do sleep …; done`` loop, a curl/wget test client, or the pause image.
    A script that runs its arguments (``"$@"``) or anything else counts as serving."""
    argv = argv_of(container)
    if not argv:
        return bool(_PAUSE_IMAGE.search(container.image))
    first = SimpleCommand(tuple(argv))
    program = first.program
    if program is None:
        return False
    if program in SHELLS:
        wrapped = argv[argv.index(next(w for w in argv if w.rsplit("/", 1)[-1] == program)) :]
        if len(wrapped) == 1:
            return True  # an interactive shell: serves nothing, with or without a tty
        found = shell_script(wrapped)
        if found is None:
            return False  # runs a script file
        script = parse_script(found[1])
        programs = [c.program for c in script.commands]
        return (
            not script.positional
            and any(programs)
            and all(p is None or p in IDLE_PROGRAMS for p in programs)
        )
    if program in ("cat", "sh"):
        return len(argv) == 1
    return program in IDLE_PROGRAMS and program not in ("echo", "printf", "true", "env")


def serves(container: Container, target: int | str) -> bool:
    """Whether the container declares the port a Service targets (by number or name)."""
    if isinstance(target, int):
        return any(p.number == target for p in container.ports)
    return any(p.name == target for p in container.ports)


# Official images whose stock configuration listens on one port, and the directory whose
# mounted files would change it: nginx listens on 80 (/etc/nginx/conf.d/default.conf, EXPOSE
# 80: https://hub.docker.com/_/nginx, https://github.com/nginxinc/docker-nginx), httpd on 80
# (/usr/local/apache2/conf/httpd.conf `Listen 80`: https://hub.docker.com/_/httpd).
_STOCK_IMAGE = re.compile(r"^(?:(?:index\.)?docker\.io/)?(?:library/)?(nginx|httpd)(?::|@|$)")
_STOCK_PORTS = {"nginx": (80, "/etc/nginx"), "httpd": (80, "/usr/local/apache2")}


def stock_port(container: Container) -> int | None:
    """The port the container's official image listens on when run as shipped (no command,
    args or ports of its own, no file mounted over its configuration), else ``None``."""
    found = _STOCK_IMAGE.match(container.image)
    if found is None or container.command or container.args or container.ports:
        return None
    port, config = _STOCK_PORTS[found.group(1)]
    if any(m.path.rstrip("/").startswith(config) for m in container.mounts):
        return None
    return port


# File servers whose clients are kernel mounts (NFS, SMB/CIFS): a mount keeps one long-lived
# connection and retries on its own when the server goes away (NFS hard mounts, nfs(5); the
# CIFS client reconnects, mount.cifs(8)), so the endpoint-removal race of HTTP clients does
# not apply; what they lose is the single instance (SVD204's note). Their images:
# - NFS-Ganesha's provisioner: kubernetes-sigs/nfs-ganesha-server-and-external-provisioner
#   (deploy/kubernetes/deployment.yaml, registry.k8s.io/sig-storage/nfs-provisioner)
# - https://github.com/sjiveson/nfs-server-alpine (itsthenetwork/nfs-server-alpine, used by
#   deploy/example/nfs-provisioner/nfs-server.yaml in kubernetes-csi/csi-driver-nfs)
# - Kubernetes' e2e NFS server, test/images/volume/nfs in kubernetes/kubernetes
#   (k8s.gcr.io/volume-nfs, gcr.io/google_containers/volume-nfs); cpuguy83/nfs-server and
#   erichough/nfs-server (their READMEs: kernel nfsd exporting the container's paths)
# - Samba: https://github.com/dperson/samba, https://github.com/ServerContainers/samba, and
#   andyzhangx/samba (deploy/example/smb-provisioner/smb-server.yaml in
#   kubernetes-csi/csi-driver-smb)
_KERNEL_MOUNTED = re.compile(
    r"(^|/)(sig-storage/nfs-provisioner|kubernetes_incubator/nfs-provisioner|"
    r"itsthenetwork/nfs-server-alpine|volume-nfs|dperson/samba|servercontainers/samba|"
    r"andyzhangx/samba|cpuguy83/nfs-server|erichough/nfs-server)(:|@|$)",
    re.IGNORECASE,
)


def kernel_mounted(container: Container) -> bool:
    """Whether the container is an NFS or SMB file server of ``_KERNEL_MOUNTED``, whose
    clients are kernel mounts that retry on their own connection."""
    return bool(_KERNEL_MOUNTED.search(container.image))


def unserved(inventory: Inventory, workload: Workload, container: Container) -> bool:
    """Whether the Services that carry requests to the workload reach no listener of the
    container: every port they target is ``unreached`` (SVD205 reports it), so its
    shutdown loses no request of theirs; or the container is a file server whose clients
    are kernel mounts (``kernel_mounted``), which retry by themselves."""
    if kernel_mounted(container):
        return True
    targets = [
        p.target
        for s in inventory.services_of(workload)
        if carries_requests(inventory, s)
        for p in s.ports
        if not uncalled(p)
    ]
    return bool(targets) and all(unreached((container,), t) for t in targets)


# Kong's ingress controller serves admission only when told where: `--admission-webhook-
# listen` (CONTROLLER_ADMISSION_WEBHOOK_LISTEN) is "off" by default (internal/cmd/rootcmd/
# config/cli.go in Kong/kubernetes-ingress-controller; its dev-only component turns it on;
# so in 0.x, published as bintray's kong-ingress-controller)
_KONG_CONTROLLER = re.compile(r"(^|/)kong(/kubernetes)?-ingress-controller(:|@|$)")


def _admission_off(container: Container, target: int | str) -> bool:
    """Whether ``target`` is the webhook port of a Kong ingress controller left at "off"."""
    if not _KONG_CONTROLLER.search(container.image):
        return False
    listen = flag_value(argv_of(container), "admission-webhook-listen") or dict(container.env).get(
        "CONTROLLER_ADMISSION_WEBHOOK_LISTEN", "off"
    )
    webhook = {p.number for p in container.ports if p.name == "webhook"} | {"webhook"}
    return listen == "off" and target in webhook


def unreached(containers: Sequence[Container], target: int | str) -> bool:
    """Whether a Service port's target reaches no listener of these containers: a port name
    none declares (the endpoint gets no such port), a number none declares while the one
    that would take it runs a stock image listening elsewhere (``stock_port``), or a port
    its server leaves off by default (``_admission_off``)."""
    if containers and all(_admission_off(c, target) for c in containers):
        return True
    if any(serves(c, target) for c in containers):
        return False
    if isinstance(target, str):
        return True
    port = stock_port(containers[0]) if containers else None
    return port is not None and port != target


def serving_containers(inventory: Inventory, workload: Workload) -> tuple[Container, ...]:
    """Containers behind the workload's Services: those exposing a targeted port, else the
    first container (the app, by convention, when ports are not declared). Containers that
    serve nothing (``serves_nothing``) are never serving, even when a Service selects them
    or they declare the port: a pod of only those gets no serving check."""
    services = inventory.services_of(workload)
    containers = [c for c in workload.template.containers if not serves_nothing(c)]
    if not services or not containers:
        return ()
    ports = [p for s in services for p in s.ports]
    # a metrics sidecar (an exporter, or kube-rbac-proxy behind a `*-metrics` Service) is
    # scraped, not called: when other ports are targeted too, only the containers behind
    # those serve requests
    proxied = any(_RBAC_PROXY.search(c.image) for c in workload.template.containers)
    called = [
        p
        for s in services
        if not scrape_only(s)
        for p in s.ports
        if not uncalled(p) and not (proxied and proxies_metrics(workload, p.target))
    ] or ports
    servers = {_server(workload.template.containers, p.target) for p in called}
    matched = tuple(c for c in containers if c.name in servers)
    if None in servers:  # a port no container declares: the app's (multus' webhook on 443)
        app = next((c for c in containers if not _RBAC_PROXY.search(c.image)), containers[0])
        matched = (*matched, app) if app not in matched else matched
    return matched or (containers[0],)


def behind_proxies(workload: Workload, containers: Sequence[Container]) -> tuple[Container, ...]:
    """The containers whose data the serving ones answer with: themselves, or, where they are
    all kube-rbac-proxy sidecars, the pod's other containers (their upstreams on loopback:
    rukpak's bundle server)."""
    if containers and all(_RBAC_PROXY.search(c.image) for c in containers):
        return tuple(c for c in workload.template.containers if c not in containers)
    return tuple(containers)


def _server(containers: Sequence[Container], target: int | str) -> str | None:
    """The container that gets a Service port's traffic: a name resolves to the number of
    the first container declaring it (the endpoint controller's FindPort,
    pkg/api/v1/pod/util.go in kubernetes/kubernetes), and one container of the pod binds a
    number: the first that declares it (a sidecar that copies the app's containerPort,
    git-sync's in box/kube-applier, does not listen on it)."""
    number = target
    if isinstance(target, str):
        named = (p.number for c in containers for p in c.ports if p.name == target)
        number = next(named, None) or target
    return next((c.name for c in containers if serves(c, number)), None)


# Ports no client sends requests to: a scraper's (Prometheus' conventions: `metrics`,
# `http-metrics`; https://github.com/prometheus/prometheus/wiki/Default-port-allocations),
# a profiler's (Go's net/http/pprof, https://pkg.go.dev/net/http/pprof) and the kubelet's
# probes (`healthz`, `probes`; https://kubernetes.io/docs/reference/using-api/health-checks/),
# and a placeholder a StatefulSet's governing Service needs (`dummy`: the CSI sidecars'
# examples, deploy/kubernetes/csi-snapshotter in kubernetes-csi/external-snapshotter).
# The word may also lead, the scheme following: `metrics-http`/`metrics-https` (the
# controller's metrics Service, config/operator/metrics-service.yaml in kedacore/http-add-on;
# vsphere-csi-driver's `prometheus-sync` and `prometheus-csi`). Apache Dubbo's QoS port
# (`qos`, `dubbo-qos`: 22222) takes operators' commands, not requests
# (https://dubbo.apache.org/en/overview/mannual/java-sdk/reference-manual/qos/overview/), and
# a Cluster API provider's `diagnostics` port serves metrics and pprof
# (https://cluster-api.sigs.k8s.io/tasks/diagnostics); cert-manager's older charts named
# their metrics port `tcp-prometheus-servicemonitor`.
# By name only: 9090, 9100 or 8080 serve requests as often as metrics.
_SCRAPE_PORT = re.compile(
    r"(^|[-_])(metrics?|prom|prometheus|monitoring|profiling|pprof|exporter|telemetry|qos|"
    r"diagnostics|probes?|healthz?|livez|readyz|dummy|placeholder|servicemonitor)"
    r"([-_](port|service))?$"  # crane's `health-metric-port`, `https-metrics-service`
    r"|^(metrics|profiling|pprof|prometheus)([-_]|port$)",  # `metricsport`: the ACK controllers'
    re.IGNORECASE,
)
# A Service named for metrics (`*-metrics`, kubebuilder's `controller-manager-metrics-service`
# with its one `https` port: config/default/metrics_service.yaml of its scaffold,
# https://book.kubebuilder.io/reference/metrics) whose ports have no name of their own.
_SCRAPE_SERVICE = re.compile(r"(^|[-_])(metrics|monitoring|exporter)([-_](service|svc))?$")
# ... or labelled as one (`app.kubernetes.io/component: exporter`, kube-prometheus'
# node-exporter: https://github.com/prometheus-operator/kube-prometheus manifests)
_SCRAPE_COMPONENTS = frozenset({"metrics", "exporter"})
_GENERIC_PORT = frozenset({"http", "https"})


# A control plane's xDS port (`grpc-xds`, `xds`, `ads`): its clients are Envoy proxies that
# hold a stream, keep serving the configuration they last received while it is down, and
# reconnect (the xDS protocol: https://www.envoyproxy.io/docs/envoy/latest/api-docs/xds_protocol;
# istiod's grpc-xds 15010)
_XDS_PORT = re.compile(r"(^|[-_])(xds|ads)([-_]|$)", re.IGNORECASE)


# The Istio sidecar's own ports: 15020 (merged Prometheus telemetry), 15021 (health
# checks), 15090 (Envoy's Prometheus telemetry): scraped or probed, whatever the Service
# calls them (https://istio.io/latest/docs/ops/deployment/application-requirements/#ports-used-by-istio)
_ISTIO_AGENT_PORTS = frozenset({15020, 15021, 15090})
# kube-scheduler's and kube-controller-manager's secure ports serve their health and metrics
# only (https://kubernetes.io/docs/reference/networking/ports-and-protocols/); a scheduler
# of one's own built on kube-scheduler keeps 10259 (kubenexus-scheduler; judge142)
_CONTROL_PLANE_PORTS = frozenset({10257, 10259})


def uncalled(port: ServicePort) -> bool:
    """Whether a Service port is a metrics, profiling or probe port (by its name, or by
    the container port name it targets; or the Istio sidecar's telemetry and health ports):
    scraped or probed, never sent requests; or an xDS
    port, whose proxies keep their configuration while the stream is down. A UDP port
    is never one: scrapes and probes are HTTP or TCP (a statsd ingest port named
    `statsd-metrics`: emissary deployments/statsd-sink), except DHCP's server port 67,
    whose clients broadcast, which no Service address receives (RFC 2131 4.1; sidero's
    `dhcp` Service; judge118)."""
    if port.protocol == "UDP":
        return port.port == 67
    if port.target in _ISTIO_AGENT_PORTS or port.target in _CONTROL_PLANE_PORTS:
        return True
    names = (port.name, port.target if isinstance(port.target, str) else None)
    return any(n and (_SCRAPE_PORT.search(n) or _XDS_PORT.search(n)) for n in names)


def scrape_only(service: Service) -> bool:
    """Whether the Service only exposes metrics, profiling and probe ports (every port named
    ``metrics``, ``http-metrics``, ``http-profiling``, ``probes``…, or a ``*-metrics`` or
    ``*-exporter`` Service, or one labelled component ``metrics``/``exporter``, whose ports
    are unnamed or only ``http``/``https``): its client is a scraper
    reading pod endpoints, for which a shutdown race costs one scrape."""
    if service.ports and all(uncalled(p) for p in service.ports):
        return True
    named = bool(_SCRAPE_SERVICE.search(service.ref.name))
    labelled = service.labels.get("app.kubernetes.io/component") in _SCRAPE_COMPONENTS
    return (named or labelled) and all(
        p.protocol != "UDP" and (p.name is None or p.name in _GENERIC_PORT or uncalled(p))
        for p in service.ports
    )


def carries_requests(inventory: Inventory, service: Service) -> bool:
    """Whether clients send requests through the Service: a route sends to it, or one of its
    ports is not a metrics, profiling or probe port (by its name, or because a
    ServiceMonitor scrapes it). The one answer every serving rule asks (SVD101-106,
    SVD201-204): a Service only scraped or probed has no request to fail. Answered once
    per Service of an inventory (every serving rule asks, for each of its workloads)."""
    if not _CARRIES or _CARRIES[0][0] is not inventory:
        _CARRIES[:] = [(inventory, {})]
    known = _CARRIES[0][1]
    hit = known.get(id(service))
    if hit is None or hit[0] is not service:
        hit = known[id(service)] = (
            service,
            routed(inventory, service)
            or (
                not scrape_only(service)
                and not peers_only(service)
                and not names_only(inventory, service)
                and not portless_controller(inventory, service)
                and not scrapes_named_ports(inventory, service)
                and not monitored_only(inventory, service)
                and not ignored_webhook(inventory, service)
                and not metrics_servers_only(inventory, service)
                and not scaffold_leftover(inventory, service)
                and not pods_dialed_instead(inventory, service)
                and not webhooks_off(inventory, service)
            ),
        )
    return hit[1]


# the answers of ``carries_requests`` for the last inventory, by Service (kept with it)
_CARRIES: list[tuple[Inventory, dict[int, tuple[Service, bool]]]] = []


# kubebuilder v1's scaffold made a `controller-manager-service` on 443 for a webhook server
# (config/manager/manager.yaml of its v1 project layout, kubernetes-sigs/kubebuilder release-1):
# where no webhook configuration calls it and the manager declares no port, it is a leftover
# nothing listens behind (kubernetes-sigs/application, bitpoke/wordpress-operator)
_SCAFFOLD_SERVICE = re.compile(r"(^|-)controller-manager-service$")
# ...or one whose selector has that scaffold's label, under a name its namePrefix made
# (kubic-project/dex-operator's `-service`)
_SCAFFOLD_LABEL = "controller-tools.k8s.io"


def scaffold_leftover(inventory: Inventory, service: Service) -> bool:
    """Whether the Service is kubebuilder v1's leftover webhook Service (``_SCAFFOLD_SERVICE``,
    ``_SCAFFOLD_LABEL``): no webhook calls it, and no container behind it declares a port, or
    it is the scaffold's own port 443 to 443, which none declares (the manager's webhook
    server, when on, makes a Service of its own for its port: multi-tenancy's VirtualCluster
    manager declares 9876). A Service of another port (kubeeye's 80 to 8888) is the app's."""
    backends = inventory.targeted(service)
    containers = [c for w in backends for c in w.template.containers]
    scaffold = [(p.port, p.target) for p in service.ports] == [(443, 443)]
    scaffolded = _SCAFFOLD_SERVICE.search(service.ref.name) or _SCAFFOLD_LABEL in (
        service.selector or {}
    )
    return (
        bool(scaffolded)
        and bool(backends)
        and not any(c.ports if not scaffold else serves(c, 443) for c in containers)
        and not webhook_calls(inventory, service)
    )


# Servers that get no request that can fail: the prometheus-operator's one HTTP port
# serves only its metrics and health, and admission webhooks when a webhook configuration
# calls them (`--web.listen-address` :8080, named `http` in its bundle; cmd/operator/main.go
# in prometheus-operator/prometheus-operator); Prometheus exporters (`*-exporter`,
# `*_exporter`: node_exporter, blackbox_exporter, redis_exporter…), cAdvisor and
# kube-state-metrics serve `/metrics` to scrapers, whatever their port's name (not the
# statsd_exporter, whose UDP port apps send their metrics to)
# (https://prometheus.io/docs/instrumenting/exporters/; https://github.com/google/cadvisor;
# https://github.com/kubernetes/kube-state-metrics); and an ingress controller's default
# backend answers 404 to the requests no Ingress rule matches
# (https://kubernetes.github.io/ingress-nginx/user-guide/default-backend/); and Locust, a
# load generator, serves its web UI to the person running the test and its port to its own
# workers, which reconnect (https://docs.locust.io/en/stable/running-distributed.html); and
# observatorium's thanos-receive-controller and up prober, which serve only their /metrics
# (cmd/ of observatorium/thanos-receive-controller and observatorium/up)
_METRICS_SERVER = re.compile(
    r"(^|/)((prometheus-operator|coreos)/prometheus-operator|(?!statsd)[\w.-]+[-_]exporter|cadvisor|"
    r"kube-state-metrics|defaultbackend(-(amd|arm)64)?|locustio/locust|"
    r"observatorium/(thanos-receive-controller|up))(:|@|$)"
)


def metrics_servers_only(inventory: Inventory, service: Service) -> bool:
    """Whether the Service selects only ``_METRICS_SERVER`` containers and no admission
    webhook calls it: it is scraped (or answers only 404s), not sent requests."""
    backends = inventory.targeted(service)
    return (
        bool(backends)
        and all(
            _METRICS_SERVER.search(c.image.split("@", 1)[0])
            for w in backends
            for c in serving_containers(inventory, w)
        )
        and not webhook_calls(inventory, service)
    )


# Ports named for a cluster's own members (Elasticsearch's `transport` 9300, Cassandra's
# `intra-node` 7000, Redis Cluster's bus `cluster`, etcd's `peer`, Consul's `serf-lan`,
# Raft, Alertmanager's `mesh` 9094 in prometheus-operator's StatefulSets): behind a headless
# Service they are how members find each other, not where clients send requests
# (pires/kubernetes-elasticsearch-cluster es-discovery-svc.yaml).
_PEER_PORT = re.compile(
    r"(^|[-_])(transport|intra-?node|peers?|gossip|cluster|raft|serf(-lan|-wan)?|discovery|"
    r"mesh|memberlist)$|^(mesh|gossip|cluster)[-_](tcp|udp)$"
    r"|^(gossip|memberlist)[-_]ring$",  # Loki's and Mimir's memberlist ring (`gossip-ring`)
    re.IGNORECASE,
)


def peers_only(service: Service) -> bool:
    """Whether the Service is headless and every port is a members' port (``_PEER_PORT``,
    by name or target name): peer discovery, which no client sends requests through."""
    names = [[n for n in (p.name, p.target) if isinstance(n, str)] for p in service.ports]
    return (
        service.headless
        and bool(names)
        and all(ns and any(_PEER_PORT.search(n) for n in ns) for ns in names)
    )


# knative.dev/pkg's sharedmain controllers read their ConfigMaps' names from these variables
# (injection/sharedmain/main.go); a controller of theirs that declares no port serves none
# but its metrics and probes (eventing-redis' and eventing-rabbitmq's controllers)
_KNATIVE_CONTROLLER_ENV = frozenset(
    {"CONFIG_LEADERELECTION_NAME", "CONFIG_LOGGING_NAME", "CONFIG_OBSERVABILITY_NAME"}
)


def portless_controller(inventory: Inventory, service: Service) -> bool:
    """Whether the Service fronts only controllers that declare no port (knative.dev/pkg's
    sharedmain, by its variables) and no webhook calls it: a leftover, nothing behind it
    answers (judge138)."""
    containers = [c for w in inventory.targeted(service) for c in w.template.containers]
    return (
        bool(containers)
        and not any(c.ports for c in containers)
        and all(_KNATIVE_CONTROLLER_ENV & {n for n, _ in c.env} for c in containers)
        and not webhook_calls(inventory, service)
    )


def names_only(inventory: Inventory, service: Service) -> bool:
    """Whether the Service is headless, nothing in the inputs dials it by name, and it has no
    ports, or none its pods declare (a placeholder port: kubernetes-vault's peer discovery):
    it gives its pods DNS names (a StatefulSet's `serviceName`, a pod's `subdomain`:
    https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/#pod-hostname-and-subdomain-field),
    and no client sends requests through it (mysql-ndb-operator's operator, vanus' store;
    judge109, judge128, judge135)."""
    if not service.headless or service.ref.name in inventory.dialed.hosts:
        return False
    containers = [c for w in inventory.targeted(service) for c in w.template.containers]
    return not service.ports or (bool(containers) and not any(c.ports for c in containers))


def pods_dialed_instead(inventory: Inventory, service: Service) -> bool:
    """Whether the inputs dial the pods of the StatefulSets behind the Service by their own
    names (`etcd-0.etcd:2379`, m3db-operator's etcd clients; vanus' controllers) and never
    the Service by its name: each client picks its pod, no request crosses the Service."""
    workloads = inventory.targeted(service)
    if not workloads or any(w.ref.kind != "StatefulSet" for w in workloads):
        return False
    hosts = inventory.dialed.hosts
    if service.ref.name in hosts:
        return False
    return all(
        any(re.fullmatch(rf"{re.escape(w.ref.name)}-\d+", h) for h in hosts) for w in workloads
    )


def webhooks_off(inventory: Inventory, service: Service) -> bool:
    """Whether every port of the Service targets the webhook port (9443, or a port named
    for webhooks) of managers started with ``ENABLE_WEBHOOKS=false``: kubebuilder's scaffold
    then sets up no webhook (cmd/main.go, https://book.kubebuilder.io/cronjob-tutorial/main-revisited),
    and controller-runtime starts its webhook server only for one (kubeslice's
    worker-operator; judge111): nothing listens behind the Service."""
    workloads = inventory.targeted(service)
    off = [
        [c for c in w.template.containers if dict(c.env).get("ENABLE_WEBHOOKS") == "false"]
        for w in workloads
    ]
    if not workloads or not all(off) or not service.ports:
        return False
    ports = [p for cs in off for c in cs for p in c.ports]
    named = {p.name for p in ports if p.name and "webhook" in p.name}
    numbers = {p.number for p in ports if p.name in named} | {9443}
    return all(
        p.target in numbers or p.target in named or "webhook" in (p.name or "")
        for p in service.ports
    )


def scrapes_named_ports(inventory: Inventory, service: Service) -> bool:
    """Whether every port of the Service targets, by number, a container port whose name
    says metrics, profiling or probes (``_SCRAPE_PORT``) in each pod it selects: an unnamed
    Service port `29644` to the container port named `metrics` (deploy/csi-smb-controller.yaml
    and csi-smb-controller's metrics Service in kubernetes-csi/csi-driver-smb); or the port
    a controller-runtime manager's ``--metrics-bind-address`` sets; or a kube-rbac-proxy in
    front of the pod's metrics (``proxies_metrics``)."""
    workloads = inventory.targeted(service)
    if not workloads or not service.ports:
        return False
    return all(
        uncalled(p)
        or any(
            cp.number == p.target and cp.name and _SCRAPE_PORT.search(cp.name)
            for c in w.template.containers
            for cp in c.ports
        )
        or proxies_metrics(w, p.target)
        or any(p.target == flag_port(argv_of(c), *METRICS_FLAGS) for c in w.template.containers)
        for p in service.ports
        for w in workloads
    )


# kube-rbac-proxy guards a local endpoint (`--upstream=http://127.0.0.1:8080/`); in
# kubebuilder's scaffold up to v3 it stands in front of the manager's metrics
# (`--metrics-bind-address=127.0.0.1:8080`: config/default/manager_auth_proxy_patch.yaml,
# https://book.kubebuilder.io/reference/metrics; kserve config/default).
_RBAC_PROXY = re.compile(r"(^|/)kube-rbac-proxy(:|@|$)")
_UPSTREAM = re.compile(r"^--upstream=https?://(?:127\.0\.0\.1|localhost|\[::1\]):(\d+)(/|$)")
# kubebuilder's, older ones, and Cluster API providers' (metrics and pprof on one port:
# https://cluster-api.sigs.k8s.io/tasks/diagnostics)
METRICS_FLAGS = (
    "metrics-bind-address",
    "metrics-addr",
    "diagnostics-address",
    "metrics-listen-address",  # multus-admission-controller's
)
_BIND_PORT = re.compile(r"^(?:[^:]*:)?(\d+)$")
_METRICS_VARIABLE = re.compile(r"METRICS\w*(PORT|ADDR|ADDRESS)$")


def flag_port(argv: Sequence[str], *flags: str) -> int | None:
    """The port of the first of these Go address flags that is set (``--flag=:8081`` or
    ``--flag :8081``); ``None`` when none is, or it is ``0`` (off)."""
    for flag in flags:
        if (value := flag_value(argv, flag)) is not None:
            m = _BIND_PORT.match(value)
            return int(m.group(1)) if m and int(m.group(1)) else None
    return None


def proxies_metrics(w: Workload, target: int | str) -> bool:
    """Whether the port a Service targets is a kube-rbac-proxy's whose upstream is the port
    another container of the pod serves its metrics on (``--metrics-bind-address``, or a
    ``*METRICS*PORT`` variable: cluster-machine-approver's METRICS_PORT)."""
    containers = w.template.containers
    proxies = [c for c in containers if serves(c, target) and _RBAC_PROXY.search(c.image)]
    metrics = {flag_port(argv_of(c), *METRICS_FLAGS) for c in containers} - {None}
    metrics |= {
        int(m.group(1))
        for c in containers
        for name, value in c.env
        if _METRICS_VARIABLE.search(name) and (m := _BIND_PORT.match(value))
    }
    for c in proxies:
        upstream = [int(m.group(1)) for a in argv_of(c) if (m := _UPSTREAM.match(a))]
        if upstream and upstream[0] in metrics:
            return True
    return False


def ignored_webhook(inventory: Inventory, service: Service) -> bool:
    """Whether the Service's clients are admission webhooks that all have `failurePolicy:
    Ignore`: when it does not answer, the API server admits the request without it
    (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#failure-policy),
    so a rollout fails no request. One webhook with `Fail` (the default) keeps it serving,
    and so does a port of the Service no webhook calls (it carries other traffic), unless
    it is only scraped (``uncalled``: KEDA's webhook Service with its metrics port)."""
    called = webhook_calls(inventory, service)
    if not called:
        backends = inventory.targeted(service)
        return bool(backends) and all(_registers_ignored(w) for w in backends)
    if {policy for policy, _ in called} != {"Ignore"}:
        return False
    return {p.port for p in service.ports if not uncalled(p)} <= {port for _, port in called}


# A server whose admission webhook is registered at run time with `failurePolicy: Ignore`
# unless told otherwise, so its webhook configuration is in no manifest: the VPA admission
# controller (`--register-webhook` true and `--webhook-failure-policy-fail` false by
# default: vertical-pod-autoscaler/pkg/admission-controller/config.go and docs/flags.md in
# kubernetes/autoscaler); Kubeflow Pipelines' cache server, whose cache-deployer applies
# backend/src/cache/deployer/cache-webhook-config.v1.yaml.template (kubeflow/pipelines);
# YuniKorn's admission controller (failurePolicy Ignore in pkg/admission/webhook_manager.go
# of apache/yunikorn-k8shim); numaflow's and Argo Events' images run as `webhook-service`
# (failurePolicy Ignore in pkg/webhook/webhook.go of numaproj/numaflow and of
# argoproj/argo-events); OpenShift's cluster-autoscaler-operator and cluster-baremetal-operator
# (failurePolicy Ignore in pkg/operator/webhookconfig.go of openshift/cluster-autoscaler-operator
# and provisioning/webhook.go of openshift/cluster-baremetal-operator; the release payload
# names its images by tag: registry.ci.openshift.org/openshift:cluster-baremetal-operator).
_SELF_REGISTERED = re.compile(
    r"(^|/)(vpa-admission-controller|kfp-cache-server|(origin-)?cluster-(autoscaler|baremetal)-operator)"
    r"(:|@|$)|(^|/)apache/yunikorn:admission|(^|/)openshift:cluster-(autoscaler|baremetal)-operator$"
)
_WEBHOOK_SERVICE = re.compile(r"(^|/)(numaproj/numaflow|argoproj/argo-events)(:|@|$)")


def _registers_ignored(w: Workload) -> bool:
    """Whether every container of the workload that serves is one of ``_SELF_REGISTERED``
    left at its `Ignore` policy (VPA's flags unset or false)."""
    serving = [c for c in w.template.containers if not serves_nothing(c)]
    return bool(serving) and all(
        (
            _SELF_REGISTERED.search(c.image.split("@", 1)[0])
            or (_WEBHOOK_SERVICE.search(c.image) and "webhook-service" in argv_of(c))
        )
        and not go_bool(argv_of(c), "webhook-failure-policy-fail", False)
        and go_bool(argv_of(c), "register-webhook", True)
        for c in serving
    )


_GO_TRUE = frozenset({"1", "t", "true"})  # strconv.ParseBool, case-folded
_GO_FALSE = frozenset({"0", "f", "false"})


def go_bool(argv: Sequence[str], flag: str, default: bool) -> bool:
    """A Go boolean flag's value: ``--flag`` alone is true, ``--flag=false`` (any spelling
    strconv.ParseBool takes) sets it; one dash or two, the last one wins."""
    value = default
    for arg in argv:
        name, sep, given = arg.partition("=")
        if name.lstrip("-") != flag or not name.startswith("-"):
            continue
        word = given.lower() if sep else "true"
        value = True if word in _GO_TRUE else False if word in _GO_FALSE else value
    return value


def webhook_calls(inventory: Inventory, service: Service) -> set[tuple[str, int]]:
    """``(failurePolicy, port)`` of each admission webhook that calls the Service. A Service
    without a namespace goes into the namespace it is applied to: it also answers a webhook
    of its folder that names it in a namespace where no Service of that name is declared
    (devtron's guard, its webhook in devtroncd)."""
    cached = _WEBHOOKS[0] if _WEBHOOKS else None
    if cached is None or cached[0] is not inventory:
        calls: dict[tuple[str, str], set[tuple[str, int, str]]] = {}
        for r in inventory.resources:
            for namespace, name, policy, port in r.webhooks:
                key = (namespace or inventory.namespace, name)
                calls.setdefault(key, set()).add((policy, port, r.location.file))
        names = frozenset((inventory.namespace_of(s.ref), s.ref.name) for s in inventory.services)
        _WEBHOOKS[:] = [(inventory, calls, names)]
    _, calls, declared = _WEBHOOKS[0]
    here = (inventory.namespace_of(service.ref), service.ref.name)
    found = {(policy, port) for policy, port, _ in calls.get(here, set())}
    if found or service.ref.namespace:
        return found
    return {
        (policy, port)
        for key, called in calls.items()
        if key[1] == service.ref.name and key not in declared
        for policy, port, file in called
        if related(service.location.file, file)
    }


# the Services admission webhooks call and their failure policies, and the Services declared,
# for the last inventory
_WEBHOOKS: list[
    tuple[Inventory, dict[tuple[str, str], set[tuple[str, int, str]]], frozenset[tuple[str, str]]]
] = []


def monitored_only(inventory: Inventory, service: Service) -> bool:
    """Whether Prometheus ServiceMonitors in the inputs select the Service and scrape every
    one of its named ports (the prometheus-operator's own Service names its metrics port
    `http`: example/rbac/prometheus-operator in prometheus-operator/prometheus-operator;
    https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.ServiceMonitor)."""
    monitors = _monitors(inventory)
    if not monitors:
        return False
    scraped = {
        port
        for r in monitors
        if inventory.same_namespace(r.ref, service.ref)
        and all(service.labels.get(k) == v for k, v in r.selector.items())
        for port in r.scrapes
    }
    names = [p.name for p in service.ports]
    return bool(scraped) and bool(names) and all(n in scraped for n in names)


_MONITORS: list[tuple[tuple[Resource, ...], tuple[Resource, ...]]] = []


def _monitors(inventory: Inventory) -> tuple[Resource, ...]:
    """The ServiceMonitors with a selector, kept for the last inventory's resources: the
    rules ask once per Service, and scanning every resource each time was most of lint's
    time on the corpus."""
    cached = _MONITORS[0] if _MONITORS else None
    if cached is None or cached[0] is not inventory.resources:
        found = tuple(
            r for r in inventory.resources if r.ref.kind == "ServiceMonitor" and r.selector
        )
        _MONITORS[:] = [(inventory.resources, found)]
    return _MONITORS[0][1]


_ROUTED: list[tuple[tuple[Route, ...], str, frozenset[tuple[str, str]]]] = []


def routed(inventory: Inventory, service: Service) -> bool:
    """Whether a route (an Ingress, a Gateway API route, a TargetGroupBinding) sends to the
    Service: its clients send requests, however its ports are named and even when it is
    headless (the controller balances over its endpoints). The set of routed Services is
    kept for the last inventory's routes: the rules ask once per Service."""
    if not inventory.routes:
        return False
    cached = _ROUTED[0] if _ROUTED else None
    if cached is None or cached[0] is not inventory.routes or cached[1] != inventory.namespace:
        names = frozenset(
            (b.namespace or inventory.namespace_of(r.ref), b.name)
            for r in inventory.routes
            for b in r.backends
            if b.kind == "Service"
        )
        _ROUTED[:] = [(inventory.routes, inventory.namespace, names)]
    return (inventory.namespace_of(service.ref), service.ref.name) in _ROUTED[0][2]


def backed(inventory: Inventory) -> list[tuple[Workload, Container]]:
    """Every (workload, serving container) pair behind some Service; not a workload scaled
    to zero (no pod runs: k8gb's test app kept unhealthy on purpose), unless an autoscaler
    raises it."""
    return [
        (w, c)
        for w in inventory.workloads
        if inventory.replicas(w) != 0
        for c in serving_containers(inventory, w)
    ]


def racing(inventory: Inventory) -> list[tuple[Workload, Container]]:
    """Serving containers behind a Service that carries requests (``carries_requests``): not
    only metrics-only Services no route sends to (a scraper that misses one scrape during a
    rollout is no failed request)."""
    return [
        (w, c)
        for w, c in backed(inventory)
        if any(carries_requests(inventory, s) for s in inventory.services_of(w))
    ]
