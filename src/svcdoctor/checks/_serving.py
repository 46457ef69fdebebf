"""Shared facts for the serving checks: which containers serve, and which Service ports are
only scraped or probed (which Services carry requests: ``checks._carrying``; how a shell
runs a script: ``checks._scripts``; shutdown facts and fix snippets: ``checks._shutdown``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from svcdoctor.checks._scripts import SHELLS, SimpleCommand, parse_script, shell_script
from svcdoctor.checks.settings import flag_value
from svcdoctor.model import Container, Inventory, Service, ServicePort, Workload
from svcdoctor.model.images import image_name

# Programs that never listen: a container running only these serves nothing (a pod kept
# alive for `kubectl exec`, a test client, a loop writing files).
IDLE_PROGRAMS = frozenset(
    {
        "sleep", "tail", "cat", "true", ":", "echo", "printf", "date", "touch", "mkdir",
        "ls", "env", "hostname", "wait", "trap", "set", "export", "read", "[", "test",
        "curl", "wget", "nslookup", "dig", "ping", "pause", "/pause", "exit",
    }
)  # fmt: skip
# Load generators that only send: k6 (`k6 run`; its REST API listens on localhost only,
# https://grafana.com/docs/k6/latest/reference/k6-rest-api/), hey, vegeta, wrk. A Service
# that selects one gives it a mesh identity (learn-consul-kubernetes' k6 `traffic`; judge441)
_LOAD_CLIENTS = frozenset({"k6", "hey", "vegeta", "wrk"})
_NEVER_LISTEN = IDLE_PROGRAMS | _LOAD_CLIENTS
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


# Locust, the load generator: its image, an image named for it, or a command that runs it
# (bank-of-anthos builds its own, `command: [locust, --autostart]`; judge157)
_LOCUST_IMAGE = re.compile(r"(^|/)locustio/locust(:|@|$)|(^|[/_-])locust([_-][\w.-]*)?(:|@|$)")


def runs_locust(container: Container) -> bool:
    """Whether the container runs Locust (``_LOCUST_IMAGE``, or ``locust`` as PID 1)."""
    argv = argv_of(container)
    first = argv[0].rsplit("/", 1)[-1] if argv else ""
    image = container.image.split("@", 1)[0]
    return bool(_LOCUST_IMAGE.search(image)) or "locust" in (first, image_name(image))


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


def serves_nothing(container: Container) -> bool:
    """Whether the container runs only programs that never listen: ``sleep infinity``,
    ``tail -f /dev/null``, a bare ``cat`` or shell (kept open by stdin/tty), a
    ``while true; do sleep …; done`` loop, a curl/wget test client, a load generator
    (``_LOAD_CLIENTS``), or the pause image.
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
            and all(p is None or p in _NEVER_LISTEN for p in programs)
        )
    if program in ("cat", "sh"):
        return len(argv) == 1
    return program in _NEVER_LISTEN and program not in ("echo", "printf", "true", "env")


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
#   kubernetes-csi/csi-driver-smb), chanow/samba (dperson's, longhorn's deploy/backupstores
#   cifs-backupstore.yaml; judge195)
_KERNEL_MOUNTED = re.compile(
    r"(^|/)(sig-storage/nfs-provisioner|kubernetes_incubator/nfs-provisioner|"
    r"itsthenetwork/nfs-server-alpine|volume-nfs|dperson/samba|servercontainers/samba|"
    r"andyzhangx/samba|chanow/samba|cpuguy83/nfs-server|erichough/nfs-server)(:|@|$)",
    re.IGNORECASE,
)


def kernel_mounted(container: Container) -> bool:
    """Whether the container is an NFS or SMB file server of ``_KERNEL_MOUNTED``, whose
    clients are kernel mounts that retry on their own connection."""
    return bool(_KERNEL_MOUNTED.search(container.image))


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


def _left_off(containers: Sequence[Container], target: int | str) -> bool:
    """Whether ``target`` is a port its server leaves off by default (``_admission_off``)
    and no other container of the pod serves it (Kong's controller beside its proxy)."""
    off = [c for c in containers if _admission_off(c, target)]
    return bool(off) and not any(serves(c, target) for c in containers if c not in off)


def unreached(containers: Sequence[Container], target: int | str) -> bool:
    """Whether a Service port's target reaches no listener of these containers: a port name
    none declares (the endpoint gets no such port), a number none declares while the one
    that would take it runs a stock image listening elsewhere (``stock_port``), or a port
    its server leaves off by default (``_left_off``)."""
    if _left_off(containers, target):
        return True
    if any(serves(c, target) for c in containers):
        return False
    if isinstance(target, str):
        return True
    port = stock_port(containers[0]) if containers else None
    return port is not None and port != target


def refused(inventory: Inventory, workload: Workload, svc: Service, port: ServicePort) -> bool:
    """Whether the workload's pods refuse a Service port another workload it selects serves:
    they declare ports, but not its target (ECK's registry proxy, on 80 under the registry's
    label, beside the registry on 5000: its pods are selected by mistake; judge226)."""
    pod = workload.template.containers
    if not any(c.ports for c in pod) or any(serves(c, port.target) for c in pod):
        return False
    return any(
        serves(c, port.target)
        for other in inventory.targeted(svc)
        if other.ref != workload.ref
        for c in other.template.containers
    )


def serving_containers(inventory: Inventory, workload: Workload) -> tuple[Container, ...]:
    """Containers behind the workload's Services: those exposing a targeted port, else the
    first container (the app, by convention, when ports are not declared). Containers that
    serve nothing (``serves_nothing``) are never serving, even when a Service selects them
    or they declare the port: a pod of only those gets no serving check."""
    services = inventory.services_of(workload)
    containers = [c for c in workload.template.containers if not serves_nothing(c)]
    if not services or not containers:
        return ()
    pod = workload.template.containers
    ports = [
        p
        for s in services
        for p in s.ports
        if not _left_off(pod, p.target) and not refused(inventory, workload, s, p)
    ]
    if not ports:
        return ()
    # a metrics sidecar (an exporter, or kube-rbac-proxy behind a `*-metrics` Service) is
    # scraped, not called: when other ports are targeted too, only the containers behind
    # those serve requests
    proxied = any(_RBAC_PROXY.search(c.image) for c in workload.template.containers)
    called = [
        p
        for s in services
        if not scrape_only(s)
        for p in s.ports
        if p in ports and not uncalled(p) and not (proxied and proxies_metrics(workload, p.target))
    ] or ports
    servers = {
        _server(workload.template.containers, p.target) or _named_for(containers, p) for p in called
    }
    matched = tuple(c for c in containers if c.name in servers)
    if None in servers:  # a port no container declares: the app's (multus' webhook on 443)
        app = next((c for c in containers if not _RBAC_PROXY.search(c.image)), containers[0])
        matched = (*matched, app) if app not in matched else matched
    return matched or (containers[0],)


def _named_for(containers: Sequence[Container], port: ServicePort) -> str | None:
    """The container a Service port no container declares is named for: the container's
    name or its image's (opencost's `opencost-ui` port beside its `opencost` one; judge229)."""
    name = port.name.lower() if port.name else ""
    named = (c.name for c in containers if name in (c.name.lower(), image_name(c.image).lower()))
    return next(named, None) if name else None


def behind_proxies(workload: Workload, containers: Sequence[Container]) -> tuple[Container, ...]:
    """The containers whose data the serving ones answer with: themselves, or, where they are
    all kube-rbac-proxy sidecars, the pod's other containers (their upstreams on loopback:
    rukpak's bundle server), or for a local proxy, the containers it forwards to
    (``upstreams``: the Grafana behind an OpenShift oauth-proxy; judge463)."""
    if containers and all(_RBAC_PROXY.search(c.image) for c in containers):
        return tuple(c for c in workload.template.containers if c not in containers)
    held = [h for c in containers for h in upstreams(workload, c) or (c,)]
    return tuple(h for i, h in enumerate(held) if h not in held[:i])


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
# their metrics port `tcp-prometheus-servicemonitor`. A `debug` port serves a Go program's
# pprof and expvar, or a debugger's (Sourcegraph's executor and workers, 6060; judge339, 402).
# By name only: 9090, 9100 or 8080 serve requests as often as metrics.
SCRAPE_PORT = re.compile(
    r"(^|[-_])(metrics?|prom|prometheus|monitoring|profiling|pprof|exporter|telemetry|qos|"
    r"diagnostics|debug|probes?|healthz?|livez|readyz|dummy|placeholder|servicemonitor)"
    r"([-_](port|service))?$"  # crane's `health-metric-port`, `https-metrics-service`
    r"|^(metrics|profiling|pprof|prometheus)([-_]|port$)"  # `metricsport`: the ACK controllers'
    r"|metrics(https?)?$",  # MetalLB's `metricshttps`, `frrmetricshttps` (judge189)
    re.IGNORECASE,
)
# A Service named for metrics (`*-metrics`, kubebuilder's `controller-manager-metrics-service`
# with its one `https` port: config/default/metrics_service.yaml of its scaffold,
# https://book.kubebuilder.io/reference/metrics) whose ports have no name of their own.
_SCRAPE_SERVICE = re.compile(r"(^|[-_])(metrics|monitoring|exporter)([-_](service|svc))?$")
# ... or labelled as one (`app.kubernetes.io/component: exporter`, kube-prometheus'
# node-exporter: https://github.com/prometheus-operator/kube-prometheus manifests)
_SCRAPE_COMPONENTS = frozenset({"metrics", "exporter"})
# ... or labelled with such an app's name (`app: npm-metrics` on azure-npm's
# `npm-metrics-cluster-service`, its one unnamed port the daemon's metrics; judge412)
_SCRAPE_APP = re.compile(r"(^|[-_])(metrics|exporter)$")
_APP_LABELS = ("app", "k8s-app", "app.kubernetes.io/name")
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
    return any(n and (SCRAPE_PORT.search(n) or _XDS_PORT.search(n)) for n in names)


def metrics_named(service: Service) -> bool:
    """Whether the Service is named (``*-metrics``, ``*-exporter``…) or labelled (component
    ``metrics``/``exporter``, app ``*-metrics``) as the one a scraper reads."""
    return (
        bool(_SCRAPE_SERVICE.search(service.ref.name))
        or service.labels.get("app.kubernetes.io/component") in _SCRAPE_COMPONENTS
        or any(_SCRAPE_APP.search(service.labels.get(k) or "") for k in _APP_LABELS)
    )


def scrape_only(service: Service) -> bool:
    """Whether the Service only exposes metrics, profiling and probe ports (every port named
    ``metrics``, ``http-metrics``, ``http-profiling``, ``probes``…, or a ``*-metrics`` or
    ``*-exporter`` Service, or one labelled component ``metrics``/``exporter``, whose ports
    are unnamed or only ``http``/``https``, or beside a metrics port any other TCP port:
    Vector's ``vector-infra-metrics`` exposes its admin API for `vector top` too; judge293):
    its client is a scraper reading pod endpoints, for which a shutdown race costs one
    scrape. (A ``prometheus.io/port`` annotation says a port is scraped, not that it is only
    scraped: Grafana's UI port is both.)"""
    if service.ports and all(uncalled(p) for p in service.ports):
        return True
    if not metrics_named(service) or any(p.protocol == "UDP" for p in service.ports):
        return False
    return any(uncalled(p) for p in service.ports) or all(
        p.name is None or p.name in _GENERIC_PORT for p in service.ports
    )


# kube-rbac-proxy guards a local endpoint (`--upstream=http://127.0.0.1:8080/`); in
# kubebuilder's scaffold up to v3 it stands in front of the manager's metrics
# (`--metrics-bind-address=127.0.0.1:8080`: config/default/manager_auth_proxy_patch.yaml,
# https://book.kubebuilder.io/reference/metrics; kserve config/default).
_RBAC_PROXY = re.compile(r"(^|/)kube-rbac-proxy(:|@|$)")
_UPSTREAM = re.compile(r"^--?upstream=https?://(?:127\.0\.0\.1|localhost|\[::1\]):(\d+)(/|$)")
# kubebuilder's, older ones, and Cluster API providers' (metrics and pprof on one port:
# https://cluster-api.sigs.k8s.io/tasks/diagnostics)
METRICS_FLAGS = (
    "metrics-bind-address",
    "metrics-addr",
    "diagnostics-address",
    "metrics-listen-address",  # multus-admission-controller's
)
# kubebuilder v2's manager (`--metrics-addr`, `--enable-leader-election`) serves its metrics on
# `--metrics-addr`, ":8080" by default (the scaffold's main.go; controller-runtime's default
# MetricsBindAddress before v0.16): logging-operator's headless Service of `http` 8080; judge502
_OLD_MANAGER_FLAG = re.compile(r"^--?(metrics-addr|enable-leader-election)(=|$)")
_OLD_MANAGER_METRICS = 8080
# Go's net/http/pprof served on a port of its own by a flag (metacontroller's
# `--pprof-address=:6060`, a debug port `go tool pprof` reads; judge279)
PROFILER_FLAGS = ("pprof-address", "pprof-bind-address", "pprof-addr", "profiler-address")
_BIND_PORT = re.compile(r"^(?:[^:]*:)?(\d+)$")
# The Prometheus Operator serves only its metrics and health on its web port (its
# --web.listen-address, --listen-address before v0.48; :8080 by default), which
# kube-prometheus puts behind kube-rbac-proxy (manifests/prometheusOperator-deployment.yaml)
_PROMETHEUS_OPERATOR = re.compile(r"(^|/)prometheus-operator(:|@|$)")
_METRICS_VARIABLE = re.compile(r"METRICS\w*(PORT|ADDR|ADDRESS)$")


def metrics_port(argv: Sequence[str]) -> int | None:
    """The port a container's metrics flag sets (``METRICS_FLAGS``), or kubebuilder v2's
    manager's default when it sets none; ``None`` when none is known, or it is off."""
    if any(flag_value(argv, flag) is not None for flag in METRICS_FLAGS):
        return flag_port(argv, *METRICS_FLAGS)
    if any(_OLD_MANAGER_FLAG.match(word) for word in argv):
        return _OLD_MANAGER_METRICS
    return None


def flag_port(argv: Sequence[str], *flags: str) -> int | None:
    """The port of the first of these Go address flags that is set (``--flag=:8081`` or
    ``--flag :8081``); ``None`` when none is, or it is ``0`` (off)."""
    for flag in flags:
        if (value := flag_value(argv, flag)) is not None:
            m = _BIND_PORT.match(value)
            return int(m.group(1)) if m and int(m.group(1)) else None
    return None


def upstreams(w: Workload, proxy: Container) -> tuple[Container, ...]:
    """The containers of the pod a local proxy forwards to (``--upstream`` on loopback:
    kube-rbac-proxy, oauth-proxy, oauth2-proxy): the one declaring the port, else the
    others; none for a container that is no such proxy."""
    ports = [int(m.group(1)) for a in argv_of(proxy) if (m := _UPSTREAM.match(a))]
    if not ports:
        return ()
    others = [c for c in w.template.containers if c is not proxy]
    declared = tuple(c for c in others if any(p.number == ports[0] for p in c.ports))
    return declared or tuple(others)


def proxies_metrics(w: Workload, target: int | str) -> bool:
    """Whether the port a Service targets is a kube-rbac-proxy's whose upstream is the port
    another container of the pod serves its metrics on (``--metrics-bind-address``, a
    ``*METRICS*PORT`` variable: cluster-machine-approver's METRICS_PORT; the Prometheus
    Operator's web port)."""
    containers = w.template.containers
    proxies = [c for c in containers if serves(c, target) and _RBAC_PROXY.search(c.image)]
    metrics = {flag_port(argv_of(c), *METRICS_FLAGS) for c in containers} - {None}
    metrics |= {
        flag_port(argv_of(c), "web.listen-address", "listen-address") or 8080
        for c in containers
        if _PROMETHEUS_OPERATOR.search(c.image)
    }
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


def backed(inventory: Inventory) -> tuple[tuple[Workload, Container], ...]:
    """Every (workload, serving container) pair behind some Service; not a workload scaled
    to zero (no pod runs: k8gb's test app kept unhealthy on purpose), unless an autoscaler
    raises it. Computed once per inventory."""
    return inventory.derived(_backed)


def _backed(inventory: Inventory) -> tuple[tuple[Workload, Container], ...]:
    return tuple(
        (w, c)
        for w in inventory.workloads
        if inventory.replicas(w) != 0
        for c in serving_containers(inventory, w)
    )


_PROMETHEUS = re.compile(r"(^|/)(prom|prometheus)/prometheus(:|@|$)")


def queried_scraper(container: Container) -> bool:
    """Whether the container is a Prometheus server (not a forwarder such as vmagent):
    clients query the series its own scrapes gathered, which differ between replicas."""
    return bool(_PROMETHEUS.search(container.image))
