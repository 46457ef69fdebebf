"""The traffic's objects (pure): the load generator's client pods, the ingress in front of
the Service (the userspace datapath's per-node stand-ins, or the real nginx) and the
load balancer in IP mode (the real haproxy), and ``all_objects``, every object of the lab.

The load generator's clients and the userspace datapath's per-node proxies run on the
nodes (``hostNetwork``): client pods ``load-N`` and, on the userspace datapath without a
real hop, ingress-nginx controller pods, one per node, whose logs are generated from the
load's real records, with the IngressClass and the Ingress they route by. The real hops
(``LabView.hop``, see ``hopstate.py``) show as a cluster shows them:

* nginx: an ingress-nginx controller pod (its IP and port: where nginx listens; its log:
  nginx's own lines), the IngressClass ``nginx`` and the Ingress ``api`` whose
  ``status.loadBalancer.ingress`` names that address (with its port when not 80);
* haproxy: as the AWS Load Balancer Controller shows an NLB in IP mode
  (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/nlb/):
  the Service ``api`` of type LoadBalancer (``loadBalancerClass: service.k8s.aws/nlb``,
  the ``aws-load-balancer-type: external`` and ``nlb-target-type: ip`` annotations, the
  deregistration delay in ``target-group-attributes``) whose ``status.loadBalancer.ingress``
  names haproxy's address; the TargetGroupBinding the controller creates for it, whose
  annotation ``lab.svcdoctor.io/targets`` lists haproxy's servers with their health; and,
  with the readiness gate, each pod's ``target-health.elbv2.k8s.aws/<binding>`` gate
  and condition (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/pod_readiness_gate/),
  the namespace labelled ``elbv2.k8s.aws/pod-readiness-gate-inject: enabled``.
"""

from __future__ import annotations

import hashlib
import json

from svcdoctor.lab.hopstate import REASONS, HopKind, HopView, TargetHealth
from svcdoctor.lab.names import NAMESPACE, SERVICE, SERVICE_PORT
from svcdoctor.lab.objects import (
    INGRESS_NAMESPACE,
    LabView,
    Obj,
    _meta,
    deployment,
    endpoint_slices,
    endpoints,
    events,
    kube_proxy_config,
    namespaces,
    nodes,
    pods,
    replica_sets,
    service,
    stamp,
)

INGRESS_IMAGE = "registry.k8s.io/ingress-nginx/controller:v1.11.3"
# the Helm chart's IngressClass and labels (kubernetes/ingress-nginx charts/ingress-nginx,
# values.yaml controller.ingressClassResource: name nginx, controllerValue)
INGRESS_CLASS = "nginx"
INGRESS_CONTROLLER = "k8s.io/ingress-nginx"
INGRESS_LABELS = {
    "app.kubernetes.io/name": "ingress-nginx",
    "app.kubernetes.io/instance": "ingress-nginx",
    "app.kubernetes.io/component": "controller",
}
LOAD_IMAGE = "svcdoctor/lab-load:0.1"
TARGETS = "lab.svcdoctor.io/targets"  # the TargetGroupBinding's targets (lab's annotation)
# the AWS Load Balancer Controller's names (docs/guide/service/annotations.md,
# docs/deploy/pod_readiness_gate.md, docs/guide/service/nlb.md)
NLB_CLASS = "service.k8s.aws/nlb"
NLB_ANNOTATIONS = {
    "service.beta.kubernetes.io/aws-load-balancer-type": "external",
    "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
}
TG_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
GATE_LABEL = "elbv2.k8s.aws/pod-readiness-gate-inject"
GATE_PREFIX = "target-health.elbv2.k8s.aws/"


def _host_pod(
    view: LabView,
    name: str,
    namespace: str,
    node: int,
    labels: dict[str, str],
    container: Obj,
) -> Obj:
    ip = view.node_ips[node]
    started = stamp(view.started)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(view, "Pod", name, namespace, view.started, labels=labels),
        "spec": {
            "containers": [container],
            "hostNetwork": True,
            "nodeName": f"node-{node}",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
        },
        "status": {
            "phase": "Running",
            "hostIP": ip,
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": started,
            "conditions": [
                {"type": t, "status": "True"}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": f"docker.io/{container['image']}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": started}},
                }
            ],
        },
    }


def load_pod_name(client: int) -> str:
    return f"load-{client}"


def load_pods(view: LabView) -> list[Obj]:
    """The load generator's clients, each a pod on its node (client i on node i mod n)."""
    load = view.scenario.load
    return [
        _host_pod(
            view,
            load_pod_name(i),
            NAMESPACE,
            i % len(view.node_ips),
            {"app": "load", "app.kubernetes.io/component": "load"},
            {
                "name": "load",
                "image": LOAD_IMAGE,
                "args": [
                    f"--url=http://{SERVICE}.{NAMESPACE}.svc:{SERVICE_PORT}/",
                    f"--rate={load.rate / load.clients:g}",
                    f"--connection={load.connection}",
                    f"--retries={load.retries}",
                ],
            },
        )
        for i in range(view.clients)
    ]


def ingress_pod_name(run: str, node: int) -> str:
    digest = hashlib.sha256(f"{run}:ingress:{node}".encode()).hexdigest()
    return f"ingress-nginx-controller-{digest[:5]}"


def ingress_pods(view: LabView) -> list[Obj]:
    """Userspace datapath: each node's proxy as an ingress-nginx controller pod."""
    return [
        _host_pod(
            view,
            ingress_pod_name(view.run, node),
            INGRESS_NAMESPACE,
            node,
            dict(INGRESS_LABELS),
            {
                "name": "controller",
                "image": INGRESS_IMAGE,
                "args": ["/nginx-ingress-controller", "--election-id=ingress-nginx-leader"],
                "ports": [
                    {"name": "http", "containerPort": port, "hostPort": port, "protocol": "TCP"}
                ],
            },
        )
        for node, port in enumerate(view.proxy_ports)
    ]


def nginx_pod(view: LabView, hop: HopView) -> Obj:
    """The real nginx as the ingress-nginx controller pod: its IP and port are where nginx
    listens (its own network namespace on the kernel datapath, loopback on the userspace
    one), on node-0."""
    pod = _host_pod(
        view,
        ingress_pod_name(view.run, 0),
        INGRESS_NAMESPACE,
        0,
        dict(INGRESS_LABELS),
        {
            "name": "controller",
            "image": INGRESS_IMAGE,
            "args": ["/nginx-ingress-controller", "--election-id=ingress-nginx-leader"],
            "ports": [{"name": "http", "containerPort": hop.port, "protocol": "TCP"}],
        },
    )
    del pod["spec"]["hostNetwork"]
    pod["status"] |= {"podIP": hop.ip, "podIPs": [{"ip": hop.ip}]}
    return pod


def _address(ip: str, port: int) -> Obj:
    """A LoadBalancerIngress: the IP, and its port when it is not HTTP's 80."""
    return {"ip": ip} | ({"ports": [{"port": port, "protocol": "TCP"}]} if port != 80 else {})


def ingress(view: LabView) -> list[Obj]:
    """The controllers' IngressClass (the Helm chart's) and the Ingress they route by:
    every request goes to the Service's port (UPSTREAM). Its status names the real nginx's
    address, or on the userspace datapath each node address with its stand-in
    controller's hostPort; nothing without an ingress."""
    if view.hop is not None and view.hop.kind is HopKind.INGRESS:
        address = [_address(view.hop.ip, view.hop.port)]
    elif view.proxy_ports:
        ips = dict.fromkeys(view.node_ips[: len(view.proxy_ports)])  # with its first hostPort
        port = {ip: view.proxy_ports[view.node_ips.index(ip)] for ip in ips}
        address = [{"ip": ip, "ports": [{"port": port[ip], "protocol": "TCP"}]} for ip in ips]
    else:
        return []
    backend = {"service": {"name": SERVICE, "port": {"number": SERVICE_PORT}}}
    path = {"path": "/", "pathType": "Prefix", "backend": backend}
    meta = _meta(view, "Ingress", SERVICE, NAMESPACE, view.started, generation=1)
    cls = _meta(view, "IngressClass", INGRESS_CLASS, None, view.started, labels=INGRESS_LABELS)
    return [
        {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": cls}
        | {"spec": {"controller": INGRESS_CONTROLLER}},
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": meta,
            "spec": {"ingressClassName": INGRESS_CLASS, "rules": [{"http": {"paths": [path]}}]},
            "status": {"loadBalancer": {"ingress": address}},
        },
    ]


# ---- the load balancer in IP mode --------------------------------------------------------
def binding_name(run: str) -> str:
    """The TargetGroupBinding's name, as the controller names a Service's target group:
    ``k8s-<namespace>-<service>-<10 hex>`` (pkg/service/model_build_target_group.go)."""
    digest = hashlib.sha256(f"{run}:{NAMESPACE}/{SERVICE}:{SERVICE_PORT}".encode()).hexdigest()
    return f"k8s-{NAMESPACE[:8]}-{SERVICE[:8]}-{digest[:10]}"


def lb_service(view: LabView, hop: HopView) -> Obj:
    """The Service ``api`` as an NLB in IP mode: type LoadBalancer (no node ports: the
    targets are the pods), its status naming haproxy's address."""
    obj = service(view)
    annotations = dict(NLB_ANNOTATIONS)
    annotations[TG_ATTRIBUTES] = f"deregistration_delay.timeout_seconds={hop.deregistration:g}"
    obj["metadata"]["annotations"] = annotations
    obj["spec"] |= {
        "type": "LoadBalancer",
        "loadBalancerClass": NLB_CLASS,
        "allocateLoadBalancerNodePorts": False,
        "externalTrafficPolicy": "Cluster",
    }
    obj["status"] = {"loadBalancer": {"ingress": [_address(hop.ip, hop.port)]}}
    return obj


def target_group_binding(view: LabView, hop: HopView) -> Obj:
    """The binding of the Service's port to the target group (haproxy's backend): its
    targets, as haproxy reports them, in the annotation ``TARGETS`` (a JSON list: the
    target's ``id`` (pod IP), ``port``, ``pod``, its ``state``, ``reason`` and
    ``description`` as ELB's DescribeTargetHealth gives them, and ``haproxy_status``,
    haproxy's own word for the server's state)."""
    targets = []
    for t in hop.targets:
        reason, description = REASONS[t.health]
        targets.append(
            {"id": t.ip, "port": t.port, "pod": t.pod, "state": t.health.value}
            | {"reason": reason, "description": description}
            | {"haproxy_status": t.status}
        )
    name = binding_name(view.run)
    annotations = {TARGETS: json.dumps(targets, separators=(",", ":"))}
    # the labels the controller puts on the bindings it makes for a Service
    # (aws-load-balancer-controller pkg/deploy/tracking/provider.go, StackLabels)
    stack = {"service.k8s.aws/stack-namespace": NAMESPACE, "service.k8s.aws/stack-name": SERVICE}
    meta = _meta(
        view, "TargetGroupBinding", name, NAMESPACE, view.started, generation=1, labels=stack
    )
    meta["annotations"] = annotations
    return {
        "apiVersion": "elbv2.k8s.aws/v1beta1",
        "kind": "TargetGroupBinding",
        "metadata": meta,
        "spec": {
            "serviceRef": {"name": SERVICE, "port": SERVICE_PORT},
            "targetType": "ip",
            "ipAddressType": "ipv4",
        },
        "status": {"observedGeneration": 1},
    }


def gated(view: LabView, hop: HopView, items: list[Obj]) -> list[Obj]:
    """The Deployment's pods with the load balancer's readiness gate: its condition is the
    target's health (True when healthy; absent before haproxy has the target), and a pod
    is Ready only when its containers are and the gate is True."""
    gate = GATE_PREFIX + binding_name(view.run)
    health = {t.pod: t.health for t in hop.targets}
    for pod in items:
        name = pod["metadata"]["name"]
        pod["spec"]["readinessGates"] = [{"conditionType": gate}]
        conditions = pod["status"]["conditions"]
        state = health.get(name)
        if state is not None:
            reason, message = REASONS[state]
            condition = {
                "type": gate,
                "status": "True" if state is TargetHealth.HEALTHY else "False",
            }
            conditions.append(
                condition | ({"reason": reason, "message": message} if reason else {})
            )
        if state is not TargetHealth.HEALTHY:
            for c in conditions:
                if c["type"] == "Ready":
                    c["status"] = "False"
    return items


def _lb_namespaces(view: LabView, hop: HopView, items: list[Obj]) -> list[Obj]:
    """The pods' namespace carries the controller's readiness-gate label when they do."""
    for ns in items:
        if hop.readiness_gate and ns["metadata"]["name"] == NAMESPACE:
            ns["metadata"]["labels"][GATE_LABEL] = "enabled"
    return items


def all_objects(view: LabView) -> list[Obj]:
    """Every object of the lab."""
    hop = view.hop
    lb = hop if hop is not None and hop.kind is HopKind.LOAD_BALANCER else None
    nginx = hop if hop is not None and hop.kind is HopKind.INGRESS else None
    app_pods = pods(view)
    return [
        *(namespaces(view) if lb is None else _lb_namespaces(view, lb, namespaces(view))),
        *nodes(view),
        kube_proxy_config(view),
        deployment(view),
        *replica_sets(view),
        *(app_pods if lb is None or not lb.readiness_gate else gated(view, lb, app_pods)),
        service(view) if lb is None else lb_service(view, lb),
        *endpoint_slices(view),
        endpoints(view),
        *events(view),
        *load_pods(view),
        *ingress_pods(view),
        *([nginx_pod(view, nginx)] if nginx is not None else []),
        *ingress(view),
        *([target_group_binding(view, lb)] if lb is not None else []),
    ]
