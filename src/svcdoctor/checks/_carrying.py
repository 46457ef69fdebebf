"""Which Services carry requests, and the serving containers they race for: a Service only
scraped, probed, named in DNS or called by ``Ignore`` webhooks has no request to fail
(which containers serve: ``checks._serving``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from svcdoctor.checks._serving import (
    METRICS_FLAGS,
    PROFILER_FLAGS,
    SCRAPE_PORT,
    argv_of,
    backed,
    behind_proxies,
    flag_port,
    go_bool,
    kernel_mounted,
    metrics_named,
    metrics_port,
    proxies_metrics,
    queried_scraper,
    runs_locust,
    scrape_only,
    serves,
    serves_nothing,
    serving_containers,
    uncalled,
    unreached,
)
from svcdoctor.checks.settings import flag_value
from svcdoctor.model import Container, Inventory, Resource, Service, Workload
from svcdoctor.model.images import image_name
from svcdoctor.model.inventory import nearest, related
from svcdoctor.model.route import RouteKind


def carries_requests(inventory: Inventory, service: Service) -> bool:
    """Whether clients send requests through the Service: a route sends to it, or one of its
    ports is not a metrics, profiling or probe port (by its name, or because a
    ServiceMonitor scrapes it). The one answer every serving rule asks (SVD101-106,
    SVD201-204): a Service only scraped or probed has no request to fail. Answered once
    per Service of an inventory (every serving rule asks, for each of its workloads)."""
    known = inventory.derived(_carrying)
    hit = known.get(id(service))
    if hit is None or hit[0] is not service:  # an id outlives its object
        hit = known[id(service)] = (
            service,
            routed(inventory, service)
            or queried(inventory, service)
            or (
                not scrape_only(service)
                and not _config_only(inventory, service)
                and not peers_only(service)
                and not names_only(inventory, service)
                and not portless_controller(inventory, service)
                and not scrapes_named_ports(inventory, service)
                and not monitored_only(inventory, service)
                and not metrics_probed(inventory, service)
                and not ignored_webhook(inventory, service)
                and not metrics_servers_only(inventory, service)
                and not scaffold_leftover(inventory, service)
                and not pods_dialed_instead(inventory, service)
                and not fake_node_addressed(inventory, service)
                and not webhooks_off(inventory, service)
                and not _idle(inventory, service)
            ),
        )
    return hit[1]


def carrying_services(inventory: Inventory, workload: Workload) -> list[Service]:
    """The workload's Services that carry requests (``carries_requests``)."""
    return [s for s in inventory.services_of(workload) if carries_requests(inventory, s)]


def _idle(inventory: Inventory, service: Service) -> bool:
    """Whether every workload the Service selects serves nothing as configured
    (``PodTemplate.idle``: Argo CD's Dex without dex.config)."""
    backends = inventory.targeted(service)
    return bool(backends) and all(w.template.idle for w in backends)


def _config_only(inventory: Inventory, service: Service) -> bool:
    """Whether every port of the Service is scraped or probed (``uncalled``) or a known
    control plane's configuration port (``config_ports``), and one is the latter."""
    config = config_ports(inventory, service)
    return bool(config) and all(uncalled(p) or p.port in config for p in service.ports)


def queried(inventory: Inventory, service: Service) -> bool:
    """Whether the Service's pods run a Prometheus server: its clients (Grafana, rules,
    users) query it on the port it serves, even one named `prometheus` or `metrics` that
    would say scrapes elsewhere (CrunchyData's crunchy-prometheus; judge197)."""
    return any(
        queried_scraper(c) for w in inventory.targeted(service) for c in w.template.containers
    )


def _carrying(inventory: Inventory) -> dict[int, tuple[Service, bool]]:
    """The answers of ``carries_requests`` so far, by Service, filled as the rules ask."""
    return {}


# kubebuilder v1's scaffold made a `controller-manager-service` on 443 for a webhook server
# (config/manager/manager.yaml of its v1 project layout, kubernetes-sigs/kubebuilder release-1):
# where no webhook configuration calls it and the manager declares no port, it is a leftover
# nothing listens behind (kubernetes-sigs/application, bitpoke/wordpress-operator; named for
# the manager itself in vmware-tanzu/sources-for-knative's horizon source, judge418)
_SCAFFOLD_SERVICE = re.compile(r"(^|-)controller-manager(-service)?$")
# ...or one whose selector has that scaffold's label, under a name its namePrefix made
# (kubic-project/dex-operator's `-service`)
_SCAFFOLD_LABEL = "controller-tools.k8s.io"


def scaffold_leftover(inventory: Inventory, service: Service) -> bool:
    """Whether the Service is kubebuilder v1's leftover webhook Service (``_SCAFFOLD_SERVICE``,
    ``_SCAFFOLD_LABEL``): no webhook calls it, and no container behind it declares a port, or
    it is the scaffold's own port 443 to 443, which none declares (the manager's webhook
    server, when on, makes a Service of its own for its port: multi-tenancy's VirtualCluster
    manager declares 9876), or every port it targets is a name no container declares (ome's
    8443 to `https`, once its removed kube-rbac-proxy's; judge256). A Service of another port
    (kubeeye's 80 to 8888) is the app's."""
    backends = inventory.targeted(service)
    containers = [c for w in backends for c in w.template.containers]
    scaffold = [(p.port, p.target) for p in service.ports] == [(443, 443)]
    scaffolded = _SCAFFOLD_SERVICE.search(service.ref.name) or _SCAFFOLD_LABEL in (
        service.selector or {}
    )
    gone = all(
        isinstance(p.target, str) and not any(serves(c, p.target) for c in containers)
        for p in service.ports
    )
    return (
        bool(scaffolded)
        and bool(backends)
        and (gone or not any(c.ports if not scaffold else serves(c, 443) for c in containers))
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
# (cmd/ of observatorium/thanos-receive-controller and observatorium/up); and cert-manager's
# controller and CA injector, which reconcile and serve only their metrics (9402) and health
# (cert-manager's webhook is the one that serves requests; the v0.12 bundle left the metrics
# port unnamed: https://cert-manager.io/docs/devops-tips/prometheus-metrics/; judge156; under
# any registry, as mirrors re-host it: docker.intuit.com/…/cert-manager-controller; judge536), and
# Jetstack's version-checker, an exporter of the images' versions whose one port is its
# controller-runtime metrics server (cmd/app/app.go of jetstack/version-checker; judge155);
# and the Sock Shop's queue-master, a RabbitMQ consumer whose HTTP port serves only its
# health and Prometheus endpoints: no service of the shop calls it (microservices-demo's
# deploy/ scrape it only: deploy/docker-compose/prometheus.yml; judge156, judge161, judge163);
# and the cluster autoscaler, whose one port (8085, `--address`) serves its metrics and
# health check (https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/FAQ.md;
# judge168), and Atlassian's escalator, whose one server is its /metrics handler
# (cmd/main.go, pkg/metrics/metrics.go of atlassian/escalator; judge175); the default backend
# re-hosted under another repository, its name in the tag (scylla-operator's
# `scylladb/scylla-operator:thirdparty-google_containers-defaultbackend-1.4`; judge214)
_METRICS_SERVER = re.compile(
    r"(^|/)((prometheus-operator|coreos)/prometheus-operator|(?!statsd)[\w.-]+[-_]exporter|cadvisor|"
    r"kube-state-metrics|defaultbackend(-(amd|arm)64)?|"
    r"observatorium/(thanos-receive-controller|up)|"
    r"cert-manager-(controller|cainjector)|jetstack/version-checker|weaveworksdemos/queue-master|"
    r"cluster-autoscaler|atlassian/escalator)"
    r"(:|@|$)|:([\w.-]*[-_])?defaultbackend([-_.][\w.-]*)?$"
)


# The container name ingress controllers' docs give their default backend, whatever image a
# placeholder stands for (`image: "IMAGE_URL"` in kubernetes/ingress-gce's
# docs/deploy/resources/default-http-backend.yaml; judge286)
_DEFAULT_BACKEND = "default-http-backend"


def metrics_servers_only(inventory: Inventory, service: Service) -> bool:
    """Whether the Service selects only ``_METRICS_SERVER`` containers (or default backends
    by their conventional name, ``_DEFAULT_BACKEND``), itself or behind kube-rbac-proxy
    sidecars (kube-prometheus' kube-state-metrics; judge379), and no admission webhook
    calls it: it is scraped (or answers only 404s), not sent requests."""
    backends = inventory.targeted(service)
    return (
        bool(backends)
        and all(
            _METRICS_SERVER.search(c.image.split("@", 1)[0])
            or runs_locust(c)
            or c.name == _DEFAULT_BACKEND
            for w in backends
            for c in behind_proxies(w, serving_containers(inventory, w))
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
    r"mesh|memberlist)([-_]port)?$|^(mesh|gossip|cluster)[-_](tcp|udp)$"
    r"|^(gossip|memberlist)[-_]ring$",  # Loki's and Mimir's memberlist ring (`gossip-ring`)
    re.IGNORECASE,
)


def peers_only(service: Service) -> bool:
    """Whether the Service is headless, or named for its members (Loki's `loki-memberlist`,
    the join address its config names; judge384), and every port is a members' port
    (``_PEER_PORT``, by name or target name): peer discovery, which no client sends requests
    through."""
    names = [[n for n in (p.name, p.target) if isinstance(n, str)] for p in service.ports]
    return (
        (service.headless or bool(_PEER_PORT.search(service.ref.name)))
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
    ports, or none its pods declare but metrics ports (a placeholder port: kubernetes-vault's
    peer discovery; Vector's agent, which serves only its Prometheus exporter behind a
    headless Service of the aggregator's ports, judge242): it gives its pods DNS names (a
    StatefulSet's `serviceName`, a pod's `subdomain`:
    https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/#pod-hostname-and-subdomain-field),
    and no client sends requests through it (mysql-ndb-operator's operator, vanus' store;
    judge109, judge128, judge135). So is the `serviceName` of the StatefulSets it selects
    with a cluster IP, when their containers declare ports and none it targets (Config
    Connector's `manager`: 443, which nothing declares, and a metrics port; judge421), or
    declare none and it has kubebuilder v1's scaffolded 443 (its manager was a StatefulSet
    of that `serviceName`: Config Connector's operator)."""
    if service.ref.name in inventory.dialed.hosts:
        return False
    backends = inventory.targeted(service)
    containers = [c for w in backends for c in w.template.containers]
    governing = bool(backends) and all(w.governing == service.ref.name for w in backends)
    scaffold = all(uncalled(p) or (p.port, p.target) == (443, 443) for p in service.ports)
    if not service.headless and not (governing and (scaffold or any(c.ports for c in containers))):
        return False
    return not service.ports or (
        bool(containers)
        and all(
            uncalled(p) or not any(serves(c, p.target) for c in containers) for p in service.ports
        )
    )


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


# kwok's controller writes its pod's IP into each fake Node's address (`--node-ip=$(POD_IP)`,
# kustomize/kwok in kubernetes-sigs/kwok): the API server reaches the fake kubelets at that
# address, the pod's own, never through a Service in front of it (judge243)
_KWOK = re.compile(r"(^|/)kwok/kwok(:|@|$)")


def fake_node_addressed(inventory: Inventory, service: Service) -> bool:
    """Whether every pod behind the Service is a kwok controller that gives its fake nodes
    its own pod IP as their address: their clients reach the pod, not the Service."""
    containers = [c for w in inventory.targeted(service) for c in w.template.containers]
    return bool(containers) and all(
        _KWOK.search(c.image) and flag_value(argv_of(c), "node-ip") == "$(POD_IP)"
        for c in containers
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
    says metrics, profiling or probes (``SCRAPE_PORT``) in each pod it selects: an unnamed
    Service port `29644` to the container port named `metrics` (deploy/csi-smb-controller.yaml
    and csi-smb-controller's metrics Service in kubernetes-csi/csi-driver-smb); or the port
    a controller-runtime manager's ``--metrics-bind-address`` sets (``metrics_port``: kubebuilder
    v2's ``:8080`` by default), a ``--pprof-address``
    (``PROFILER_FLAGS``) or its ``--health-probe-bind-address`` (by number, or by the name of
    the container port of that number: grafana's alloy-operator Service port `http` to its
    probes' 8081; judge398); or a kube-rbac-proxy in front of the pod's metrics
    (``proxies_metrics``)."""
    workloads = inventory.targeted(service)
    if not workloads or not service.ports:
        return False
    return all(
        uncalled(p)
        or any(
            cp.number == p.target and cp.name and SCRAPE_PORT.search(cp.name)
            for c in w.template.containers
            for cp in c.ports
        )
        or proxies_metrics(w, p.target)
        or _flag_target(w, p.target)
        for p in service.ports
        for w in workloads
    )


def _flag_target(w: Workload, target: int | str) -> bool:
    """Whether the port is one a container's metrics, profiler or health-probe flag sets."""
    flagged = {
        port
        for argv in map(argv_of, w.template.containers)
        for port in (
            metrics_port(argv),
            flag_port(argv, *PROFILER_FLAGS),
            flag_port(argv, "health-probe-bind-address"),
        )
        if port is not None
    }
    named = {cp.name for c in w.template.containers for cp in c.ports if cp.number in flagged}
    return target in flagged or target in named


def ignored_webhook(inventory: Inventory, service: Service) -> bool:
    """Whether the Service's clients are admission webhooks that all have `failurePolicy:
    Ignore`: when it does not answer, the API server admits the request without it
    (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#failure-policy),
    so a rollout fails no request. One webhook with `Fail` (the default) keeps it serving,
    and so does a port of the Service no webhook calls (it carries other traffic), unless
    it is only scraped (``uncalled``: KEDA's webhook Service with its metrics port) or it is
    the port a known webhook server's own probes check (``_PROBED_ONLY``)."""
    called = webhook_calls(inventory, service)
    if not called:
        backends = inventory.targeted(service)
        return bool(backends) and all(_registers_ignored(w) for w in backends)
    if {policy for policy, _ in called} != {"Ignore"}:
        return False
    probed = _probed_only(inventory, service) | config_ports(inventory, service)
    carried = {p.port for p in service.ports if not uncalled(p) and p.port not in probed}
    return carried <= {port for _, port in called}


# Control planes whose ports under their own names serve configuration to proxies that keep
# the last they received and reconnect (as ``uncalled``'s xDS ports do): Envoy Gateway's
# xDS (18000, named `grpc`), its rate limit service's xDS (18001) and the Wasm modules Envoy
# fetches with retries (18002) (the envoy-gateway Service of its Helm chart; judge310)
_CONFIG_PORTS = ((re.compile(r"(^|/)envoyproxy/gateway(-dev)?(:|@|$)"), {18000, 18001, 18002}),)


def config_ports(inventory: Inventory, service: Service) -> set[int]:
    """The Service's ports that reach a known control plane's configuration ports
    (``_CONFIG_PORTS``) on every workload it selects."""
    backends = inventory.targeted(service)
    served = [
        frozenset().union(
            *(
                ports
                for image, ports in _CONFIG_PORTS
                for c in w.template.containers
                if image.search(c.image.split("@", 1)[0])
            )
        )
        for w in backends
    ]
    if not served or not all(served):
        return set()
    return {p.port for p in service.ports if all(p.target in ports for ports in served)}


# Webhook servers whose other port only their own probes use (an app's port that its probe
# checks usually serves requests too): Strimzi's Drain Cleaner answers its eviction webhook on
# 8443 and its Quarkus health checks on http 8080, which nothing else calls (install/
# drain-cleaner of strimzi/strimzi-kafka-operator and strimzi/drain-cleaner; judge200)
_PROBED_ONLY = re.compile(r"(^|/)strimzi/drain-cleaner(:|@|$)")


def _probed_only(inventory: Inventory, service: Service) -> set[int]:
    """The Service's ports that target the port a ``_PROBED_ONLY`` server's probes check,
    when no file of the inputs dials the Service by its name."""
    if service.ref.name in inventory.dialed.hosts:
        return set()
    checked: set[int | str] = set()
    for w in inventory.targeted(service):
        for c in (c for c in w.template.containers if _PROBED_ONLY.search(c.image)):
            for probe in (c.readiness, c.liveness, c.startup):
                if probe is not None and probe.port is not None:
                    checked.add(probe.port)
                    checked.update(p.name for p in c.ports if p.number == probe.port and p.name)
                    checked.update(p.number for p in c.ports if p.name == probe.port)
    return {p.port for p in service.ports if p.target in checked}


# A server whose admission webhook is registered at run time with `failurePolicy: Ignore`
# unless told otherwise, so its webhook configuration is in no manifest: the VPA admission
# controller (`--register-webhook` true and `--webhook-failure-policy-fail` false by
# default: vertical-pod-autoscaler/pkg/admission-controller/config.go and docs/flags.md in
# kubernetes/autoscaler); Kubeflow Pipelines' cache server (`kfp-cache-server`, before it
# `gcr.io/ml-pipeline/cache-server`, as kfp-tekton still runs it), whose cache-deployer applies
# backend/src/cache/deployer/cache-webhook-config.v1.yaml.template (kubeflow/pipelines);
# YuniKorn's admission controller (failurePolicy Ignore in pkg/admission/webhook_manager.go
# of apache/yunikorn-k8shim); numaflow's and Argo Events' images run as `webhook-service`
# (failurePolicy Ignore in pkg/webhook/webhook.go of numaproj/numaflow and of
# argoproj/argo-events); OpenShift's cluster-autoscaler-operator and cluster-baremetal-operator
# (failurePolicy Ignore in pkg/operator/webhookconfig.go of openshift/cluster-autoscaler-operator
# and provisioning/webhook.go of openshift/cluster-baremetal-operator; the release payload
# names its images by tag: registry.ci.openshift.org/openshift:cluster-baremetal-operator).
_SELF_REGISTERED = re.compile(
    r"(^|/)(vpa-admission-controller|kfp-cache-server|ml-pipeline/cache-server"
    r"|(origin-)?cluster-(autoscaler|baremetal)-operator)"
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


def webhook_calls(inventory: Inventory, service: Service) -> set[tuple[str, int]]:
    """``(failurePolicy, port)`` of each admission webhook that calls the Service
    (``_calls``)."""
    return {(policy, port) for policy, port, _ in _calls(inventory, service)}


def webhook_budget(inventory: Inventory, workload: Workload) -> int | None:
    """The longest ``timeoutSeconds`` of the admission webhooks that call the workload's
    Services when they are the only clients of every Service carrying its requests (every
    port such a Service carries is one they call), else ``None``: the API server gives up on
    a call then, so no call of theirs lasts longer."""
    longest = None
    for service in carrying_services(inventory, workload):
        called = _calls(inventory, service)
        carried = {p.port for p in service.ports if not uncalled(p)}
        if not called or not carried <= {port for _, port, _ in called}:
            return None
        longest = max(longest or 0, *(timeout for _, _, timeout in called))
    return longest


def _calls(inventory: Inventory, service: Service) -> set[tuple[str, int, int]]:
    """``(failurePolicy, port, timeoutSeconds)`` of each admission webhook that calls the
    Service. A Service without a namespace goes into the namespace it is applied to: it also
    answers a webhook of its folder that names it in a namespace where no Service of that
    name is declared (devtron's guard, its webhook in devtroncd)."""
    calls = inventory.derived(_webhook_index)
    here = (inventory.namespace_of(service.ref), service.ref.name)
    alike = inventory.services_named(*here)
    found = {  # the definition nearest the webhook's file, of several (pyrra's variants; judge334)
        (policy, port, timeout)
        for policy, port, timeout, file in calls.get(here, set())
        if len(alike) < 2 or service in nearest(file, alike)
    }
    if calls.get(here) or service.ref.namespace:
        return found
    return {
        (policy, port, timeout)
        for key, called in calls.items()
        if key[1] == service.ref.name and not inventory.services_named(*key)
        for policy, port, timeout, file in called
        if related(service.location.file, file)
    }


def every_replica_server(
    inventory: Inventory, svc: Service, containers: Sequence[Container]
) -> bool:
    """Whether the Service reaches a server a controller-runtime manager runs on every
    replica: a webhook calls it, or every port that carries requests (all of them, when
    all are scraped) targets a container port named ``webhook*``, or the metrics or health
    port its flags set, or its ``--secure-port``, which Kubernetes' component base serves on
    every replica before the election (kube-controller-manager's healthz and metrics;
    clusternet's controller manager: judge336). KEDA's operator serves its metrics on every
    replica but its metrics-service gRPC port on the leader only: a Service of both reaches
    the leader's."""
    if webhook_calls(inventory, svc):
        return True
    ports = [cp for c in containers for cp in c.ports if (cp.name or "").startswith("webhook")]
    numbers = {cp.number for cp in ports} | {
        port
        for c in containers
        for flags in (METRICS_FLAGS, ("health-probe-bind-address",), ("secure-port",))
        if (port := flag_port(argv_of(c), *flags)) is not None
    }
    names = {cp.name for cp in ports}
    called = [p for p in svc.ports if not uncalled(p)] or svc.ports
    return all(p.target in numbers or p.target in names for p in called)


_Call = tuple[str, int, int, str]  # failure policy, port, timeout seconds, file


def _webhook_index(inventory: Inventory) -> dict[tuple[str, str], set[_Call]]:
    """The Services admission webhooks call, by (namespace, name), with each call's failure
    policy, port, timeout and file."""
    calls: dict[tuple[str, str], set[_Call]] = {}
    for r in inventory.resources:
        for namespace, name, policy, port, timeout in r.webhooks:
            key = (namespace or inventory.namespace, name)
            calls.setdefault(key, set()).add((policy, port, timeout, r.location.file))
    return calls


def monitored_only(inventory: Inventory, service: Service) -> bool:
    """Whether Prometheus ServiceMonitors in the inputs select the Service and scrape every
    one of its named ports, and its pods serve nothing else there: the Service is named as a
    metrics one (``metrics_named``: aibrix's `*-metrics` on the runtime's port; judge256), or
    its pods run an operator, a controller or an exporter (the prometheus-operator's own
    Service names its metrics port `http`: example/rbac/prometheus-operator in
    prometheus-operator/prometheus-operator;
    https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.ServiceMonitor).
    A headless Service no address in the inputs dials is there for the monitor too (it lists
    the pods for Prometheus: openshift/telemeter's telemeter-client; judge364). Servers are
    scraped on the port that serves their requests too: kube-prometheus monitors
    Grafana, Prometheus, Alertmanager and the adapter's API so; aks-store-demo its product
    API (judge181)."""
    monitors = inventory.derived(_monitors)
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
    workloads = inventory.targeted(service)
    return (
        bool(scraped)
        and bool(names)
        and all(n in scraped for n in names)
        and bool(workloads)
        and (
            metrics_named(service)
            or (service.headless and service.ref.name not in inventory.dialed.hosts)
            or all(
                any(_SCRAPED_ONLY.search(image_name(c.image)) for c in w.template.containers)
                for w in workloads
            )
        )
    )


def metrics_probed(inventory: Inventory, service: Service) -> bool:
    """Whether every port of the Service is, on every pod it selects, a port whose container
    probes GET /metrics: its server's health is its metrics, the port an exporter's or a
    controller's metrics endpoint, whatever it is named (kepler's `http` 28282, kuberay's
    operator on 8080; judge256, judge257)."""
    workloads = inventory.targeted(service)
    return (
        bool(workloads)
        and bool(service.ports)
        and all(
            any(_probes_metrics(c, p.target) for c in w.template.containers)
            for w in workloads
            for p in service.ports
        )
    )


def _probes_metrics(container: Container, target: int | str) -> bool:
    """Whether the container's probes GET /metrics on the port ``target`` names."""
    names = {target} | {
        q.name if isinstance(target, int) else q.number
        for q in container.ports
        if target in (q.number, q.name)
    }
    return any(
        p.handler == "httpGet" and p.port in names and p.target[4] == "/metrics"
        for p in container.probes
    )


# Images whose servers carry no requests on a port a ServiceMonitor scrapes: operators,
# controllers and exporters (by the image's name), and the prometheus-operator's example app,
# which serves its metrics to be scraped (brancz/prometheus-example-app; its getting-started
# guide exposes it "specifying the port where the metrics are exposed"; judge326)
_SCRAPED_ONLY = re.compile(
    r"(^|[_-])(operator|controller|exporter|metrics)$|^prometheus-example-app$"
)


def _monitors(inventory: Inventory) -> tuple[Resource, ...]:
    """The ServiceMonitors with a selector (scanning every resource for each Service was
    most of lint's time on the corpus)."""
    return tuple(r for r in inventory.resources if r.ref.kind == "ServiceMonitor" and r.selector)


def routed(inventory: Inventory, service: Service) -> bool:
    """Whether a route (an Ingress, a Gateway API route, a TargetGroupBinding) sends to the
    Service: its clients send requests, however its ports are named and even when it is
    headless (the controller balances over its endpoints)."""
    return bool(route_kinds(inventory, service))


def route_kinds(inventory: Inventory, service: Service) -> frozenset[RouteKind]:
    """The kinds of the routes that send to the Service (none: no route does)."""
    if not inventory.routes:
        return frozenset()
    return inventory.derived(_routed).get(id(service), frozenset())


def _routed(inventory: Inventory) -> dict[int, frozenset[RouteKind]]:
    """The kinds of route that send to each Service (by its id). A route sends to the
    definitions of its backend's name defined nearest it, not to copies elsewhere in the
    tree: grafana/agent's 30 rendered test cases each define Service grafana-agent, and only
    faro-ingress' Ingress routes to its own (judge305)."""
    kinds: dict[int, set[RouteKind]] = {}
    for r in inventory.routes:
        for b in r.backends:
            if b.kind != "Service":
                continue
            found = inventory.services_named(b.namespace or inventory.namespace_of(r.ref), b.name)
            for s in nearest(r.location.file, found):
                kinds.setdefault(id(s), set()).add(r.kind)
    return {key: frozenset(found) for key, found in kinds.items()}


def unserved(inventory: Inventory, workload: Workload, container: Container) -> bool:
    """Whether the Services that carry requests to the workload reach no listener of the
    container: every port they target is ``unreached`` (SVD205 reports it) or the injected
    Dapr sidecar's (``_dapr_served``), so its shutdown loses no request of theirs; or the
    container is a file server whose clients are kernel mounts (``kernel_mounted``), which
    retry by themselves."""
    if kernel_mounted(container):
        return True
    targets = [
        p.target
        for s in inventory.services_of(workload)
        if carries_requests(inventory, s)
        for p in s.ports
        if not uncalled(p)
    ]
    if targets and _dapr_served(workload, targets):
        return True
    return bool(targets) and all(unreached((container,), t) for t in targets)


# Dapr's injected sidecar (`dapr.io/enabled`) listens on the Dapr API ports, HTTP 3500 and
# gRPC 50001 (https://docs.dapr.io/reference/arguments-annotations-overview/): a Service
# that targets them reaches daprd, not the app, which daprd calls on its app port
_DAPR_API_PORTS = frozenset({3500, 50001})


def _dapr_served(workload: Workload, targets: list[int | str]) -> bool:
    """Whether every target is a Dapr API port of the pod's injected sidecar that no
    container declares (DeathStarBench's daprApps_v1 Services target 3500; judge166)."""
    if workload.template.annotations.get("dapr.io/enabled") != "true":
        return False
    declared = {p.number for c in workload.template.containers for p in c.ports}
    return all(t in _DAPR_API_PORTS and t not in declared for t in targets)


def racing(inventory: Inventory) -> tuple[tuple[Workload, Container], ...]:
    """Serving containers behind a Service that carries requests (``carries_requests``): not
    only metrics-only Services no route sends to (a scraper that misses one scrape during a
    rollout is no failed request). Computed once per inventory."""
    return inventory.derived(_racing)


def _racing(inventory: Inventory) -> tuple[tuple[Workload, Container], ...]:
    found = []
    for w, c in backed(inventory):
        targets = [
            p.target
            for s in inventory.services_of(w)
            if carries_requests(inventory, s)
            for p in s.ports
        ]
        if targets and not _siblings_only(w, c, targets):
            found.append((w, c))
    return tuple(found)


def _siblings_only(w: Workload, c: Container, targets: list[int | str]) -> bool:
    """Whether every port the Services that carry requests send to is one of the pod's other
    containers declares, and none is ``c``'s: ``c`` serves only a scraped Service (OpenShift's
    check-endpoints sidecar on its metrics port beside the apiserver's 8443; judge283). A
    port no container declares may be ``c``'s."""
    others = [x for x in w.template.containers if x is not c]
    return not any(serves(c, t) for t in targets) and all(
        any(serves(x, t) for x in others) for t in targets
    )
