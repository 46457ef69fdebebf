"""The lab's state as Kubernetes objects (pure): what ``svcdoctor lab serve`` puts in its
API server's store, and the logs its pods show.

Everything here is a function of a ``LabView``, a snapshot of the lab that ``serve.py``
takes after every change; the pod and event shapes come from ``evidence.write`` (the same
facts ``lab run`` writes to its bundle).

Where the lab differs from a cluster, the objects say what the lab really does:

* a pod is reachable from every node alike; its ``nodeName`` is where the lab's scheduler
  placed it (``Cluster.schedule``: no new pod on a cordoned node);
* on the userspace datapath every pod listens on 127.0.0.1 on a port of its own: that port
  is the pod's ``containerPort`` named ``http``, so the EndpointSlice controller's rule
  (one slice per distinct port) gives one slice per pod, all with address 127.0.0.1;
* the traffic's objects (the clients, the ingress, the load balancer) are
  ``hop_objects.py``'s, which puts every object together (``all_objects``).
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from svcdoctor.evidence.kubectl import TRIGGER_TIME
from svcdoctor.evidence.write import events_json, pods_json
from svcdoctor.lab.hopstate import HopView
from svcdoctor.lab.names import NAMESPACE, SERVICE, SERVICE_PORT
from svcdoctor.lab.scenarios import NEW, OLD, Scenario
from svcdoctor.model import LifecycleEvent, PodInfo, iso_utc

DEPLOYMENT = "api"
CONTAINER = "app"
IMAGE = "svcdoctor/lab-app:0.1"
POD_PORT = 8080  # the app's port in the template (the kernel datapath's pods use it)
CLUSTER_IP = "10.96.77.10"  # the kernel datapath's VIP (the userspace one has no VIP)
INGRESS_NAMESPACE = "ingress-nginx"
READY_HASH_LABEL = "pod-template-hash"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
REVISION = "deployment.kubernetes.io/revision"

Obj = dict[str, Any]
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' name suffixes (no vowels)


@dataclass(frozen=True, slots=True)
class ApiPod:
    """One pod of the Deployment: ``info`` as ``Cluster.snapshot()`` gives it (``ready``:
    Ready and not terminating), with what the snapshot leaves out."""

    info: PodInfo
    port: int  # where it listens (0 until it started)
    serving: bool  # its readiness probe passes (kept while terminating, as the kubelet does)
    node: str


@dataclass(frozen=True, slots=True)
class LabView:
    """A snapshot of a lab cluster: everything the objects are made of."""

    run: str  # the run's prefix: makes the uids unique to this lab
    scenario: Scenario
    datapath: str  # kernel | userspace
    started: float  # when the lab started (the cluster objects' creationTimestamp)
    node_ips: tuple[str, ...]
    pods: tuple[ApiPod, ...]
    events: tuple[LifecycleEvent, ...]
    rollout_at: float | None = None  # when the Deployment's template last changed
    restarted_at: str | None = None  # the restartedAt a client's restart patch set (else ours)
    earlier: tuple[tuple[float, str], ...] = ()  # the rollouts before the last: (when, restartedAt)
    last_change: float | None = None  # the latest endpoint change (the slices' trigger time)
    clients: int = 0  # load generator clients: pods load-0 … load-(clients-1)
    proxy_ports: tuple[int, ...] = ()  # userspace: each node's proxy port
    cordoned: tuple[int, ...] = ()  # nodes a drain cordoned (spec.unschedulable)
    hop: HopView | None = None  # the real nginx or haproxy in front of the pods


def uid(run: str, kind: str, namespace: str | None, name: str) -> str:
    """A stable uid per object and lab (an object keeps it across updates)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"svcdoctor-lab:{run}/{kind}/{namespace}/{name}"))


def stamp(ts: float) -> str:
    """A Kubernetes Time: RFC 3339 UTC, whole seconds."""
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(seconds: float) -> str:
    """Seconds as Go's ``time.Duration`` prints them (``0s``, ``500ms``, ``1.5s``, ``1m30s``)."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{round(seconds * 1000):d}ms"
    minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    text = f"{rest:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


def _meta(
    view: LabView, kind: str, name: str, namespace: str | None, created: float, **extra: Any
) -> Obj:
    meta: Obj = {"name": name, "uid": uid(view.run, kind, namespace, name)}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["creationTimestamp"] = stamp(created)
    meta.update({k: v for k, v in extra.items() if v is not None})
    return meta


def _owner(view: LabView, kind: str, name: str, api_version: str = "apps/v1") -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid(view.run, kind, NAMESPACE, name),
        "controller": True,
        "blockOwnerDeletion": True,
    }


# ---- the cluster's fixed parts ---------------------------------------------------------
def namespaces(view: LabView) -> list[Obj]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": _meta(
                view,
                "Namespace",
                ns,
                None,
                view.started,
                labels={"kubernetes.io/metadata.name": ns},
            ),
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        for ns in ("default", "kube-system", INGRESS_NAMESPACE, NAMESPACE)
    ]


def nodes(view: LabView) -> list[Obj]:
    """The nodes (each one a network namespace on the kernel datapath, a proxy on
    loopback on the userspace one), Ready."""
    out = []
    for i, ip in enumerate(view.node_ips):
        name = f"node-{i}"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": _meta(
                    view,
                    "Node",
                    name,
                    None,
                    view.started,
                    labels={"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
                ),
                "spec": {"unschedulable": True} if i in view.cordoned else {},
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": ip},
                        {"type": "Hostname", "address": name},
                    ],
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": stamp(view.started),
                            "lastTransitionTime": stamp(view.started),
                        }
                    ],
                    "nodeInfo": {
                        "kubeletVersion": "v1.31.4-lab",
                        "kubeProxyVersion": "v1.31.4-lab",
                        "containerRuntimeVersion": "svcdoctor-lab://0.1",
                        "operatingSystem": "linux",
                        "architecture": "amd64",
                    },
                },
            }
        )
    return out


def kube_proxy_config(view: LabView) -> Obj:
    """kube-proxy's ConfigMap: the lab's propagation settings as a KubeProxyConfiguration
    (mode iptables: the kernel datapath writes kube-proxy's rules; the userspace proxies
    pick a backend per connection at random, as those rules do). No ``conntrack`` section:
    the lab's "kube-proxy" sets no conntrack limits (the host's are what they are)."""
    config = "\n".join(
        [
            "apiVersion: kubeproxy.config.k8s.io/v1alpha1",
            "kind: KubeProxyConfiguration",
            'bindAddress: "0.0.0.0"',
            "clusterCIDR: 10.233.0.0/16",
            "iptables:",
            "  masqueradeAll: false",
            f"  minSyncPeriod: {go_duration(view.scenario.propagation.min_sync)}",
            "  syncPeriod: 30s",
            "mode: iptables",
            "",
        ]
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(
            view,
            "ConfigMap",
            "kube-proxy",
            "kube-system",
            view.started,
            labels={"app": "kube-proxy"},
            # not a kube-proxy setting: how long an endpoint change takes to reach a node
            annotations={"lab.svcdoctor.io/propagation-delay": str(view.scenario.delay)},
        ),
        "data": {"config.conf": config},
    }


# ---- the Deployment --------------------------------------------------------------------
def _hash(replica_set: str) -> str:
    return replica_set.rsplit("-", 1)[1]


def pod_spec(scenario: Scenario, port: int = POD_PORT) -> Obj:
    """The pod template's spec: the scenario's PodSpec as a Kubernetes container (the lab's
    readiness probe runs every 0.25 s; 1 s is Kubernetes' shortest period)."""
    spec = scenario.pod
    container: Obj = {
        "name": CONTAINER,
        "image": IMAGE,
        "args": [
            "--shutdown",
            spec.shutdown.value,
            "--shutdown-delay",
            f"{spec.shutdown_delay:g}",
            "--latency",
            str(spec.latency),
            "--slow",
            f"{spec.slow_share:g},{spec.slow_seconds:g}",
        ],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http", "scheme": "HTTP"},
            "periodSeconds": 1,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 1,
        },
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if spec.prestop > 0:
        seconds = math.ceil(spec.prestop)
        # a failing hook: an exec of a sleep binary the image does not have
        action: Obj = (
            {"exec": {"command": ["sleep", str(seconds)]}}
            if spec.prestop_fails
            else {"sleep": {"seconds": seconds}}
        )
        container["lifecycle"] = {"preStop": action}
    return {
        "containers": [container],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": math.ceil(spec.grace),
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
    }


def _template(view: LabView, replica_set: str) -> Obj:
    restarts = dict(zip(_replica_sets(view)[1:], (r for _, r in _rollouts(view)), strict=True))
    annotations = {RESTARTED_AT: restarts[replica_set]} if replica_set in restarts else None
    labels = {"app": DEPLOYMENT, READY_HASH_LABEL: _hash(replica_set)}
    meta: Obj = {"labels": labels} | ({"annotations": annotations} if annotations else {})
    return {"metadata": meta, "spec": pod_spec(view.scenario)}


def _rollouts(view: LabView) -> list[tuple[float, str]]:
    """Every rollout so far: when, and the restartedAt annotation it set."""
    last = (
        [(view.rollout_at, view.restarted_at or stamp(view.rollout_at))]
        if view.rollout_at is not None
        else []
    )
    return [*view.earlier, *last]


def replica_set_name(rollout: int) -> str:
    """The ReplicaSet of the ``rollout``-th rollout (0: the first, ``scenarios.NEW``); its pods
    are ``NAME-00`` … (the lab's names, not a template hash)."""
    if rollout == 0:
        return NEW
    digest = hashlib.sha256(f"{DEPLOYMENT}:{rollout}".encode()).hexdigest()
    return f"{DEPLOYMENT}-{''.join(_SUFFIX_CHARS[int(c, 16)] for c in digest[:9])}"


def _replica_sets(view: LabView) -> list[str]:
    return [OLD, *(replica_set_name(i) for i in range(len(_rollouts(view))))]


def _counts(pods: Sequence[ApiPod]) -> dict[str, int]:
    """A ReplicaSet's status counts: terminating pods count for none of them."""
    active = [p for p in pods if p.info.deleted_at is None]
    ready = sum(1 for p in active if p.info.ready)
    return {"replicas": len(active), "readyReplicas": ready, "availableReplicas": ready}


def _owned(view: LabView, replica_set: str) -> list[ApiPod]:
    return [p for p in view.pods if p.info.name.rsplit("-", 1)[0] == replica_set]


def replica_sets(view: LabView) -> list[Obj]:
    """The Deployment's ReplicaSets (the second one from the rollout on): ``replicas`` is
    what the rolling update scaled it to (its pods not deleted)."""
    out = []
    names = _replica_sets(view)
    for revision, name in enumerate(names, start=1):
        pods = _owned(view, name)
        counts = _counts(pods)
        created = view.started if revision == 1 else _rollouts(view)[revision - 2][0]
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": _meta(
                    view,
                    "ReplicaSet",
                    name,
                    NAMESPACE,
                    created,
                    labels={"app": DEPLOYMENT, READY_HASH_LABEL: _hash(name)},
                    annotations={
                        REVISION: str(revision),
                        "deployment.kubernetes.io/desired-replicas": str(view.scenario.replicas),
                        "deployment.kubernetes.io/max-replicas": str(
                            view.scenario.replicas + view.scenario.max_surge
                        ),
                    },
                    ownerReferences=[_owner(view, "Deployment", DEPLOYMENT)],
                    generation=1,
                ),
                "spec": {
                    "replicas": counts["replicas"],
                    "selector": {"matchLabels": {"app": DEPLOYMENT, READY_HASH_LABEL: _hash(name)}},
                    "template": _template(view, name),
                },
                "status": counts
                | {"fullyLabeledReplicas": counts["replicas"]}
                | {"observedGeneration": 1},
            }
        )
    return out


def deployment(view: LabView) -> Obj:
    """Deployment ``api``: the scenario's template and strategy; its status follows the
    pods (updated: those of the newest ReplicaSet)."""
    scenario = view.scenario
    names = _replica_sets(view)
    active = [p for p in view.pods if p.info.deleted_at is None]
    updated = [p for p in _owned(view, names[-1]) if p.info.deleted_at is None]
    ready = sum(1 for p in active if p.info.ready)
    generation = len(names)
    complete = len(updated) == scenario.replicas == len(active) and ready == scenario.replicas
    available = ready >= scenario.replicas - scenario.max_unavailable
    status: Obj = {
        "observedGeneration": generation,
        "replicas": len(active),
        "updatedReplicas": len(updated),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "conditions": [
            {
                "type": "Available",
                "status": "True" if available else "False",
                "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                "message": f'ReplicaSet "{names[-1]}" '
                + ("has successfully progressed." if complete else "is progressing."),
            },
        ],
    }
    if scenario.replicas > ready:
        status["unavailableReplicas"] = scenario.replicas - ready
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(
            view,
            "Deployment",
            DEPLOYMENT,
            NAMESPACE,
            view.started,
            labels={"app": DEPLOYMENT},
            annotations={REVISION: str(generation)},
            generation=generation,
        ),
        "spec": _deployment_spec(scenario, _template(view, names[-1]))
        | {"revisionHistoryLimit": 10, "progressDeadlineSeconds": 600, "minReadySeconds": 0},
        "status": status,
    }


def _deployment_spec(scenario: Scenario, template: Obj) -> Obj:
    """The Deployment's spec as its user wrote it (the API server adds its own defaults)."""
    return {
        "replicas": scenario.replicas,
        "selector": {"matchLabels": {"app": DEPLOYMENT}},
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {
                "maxSurge": scenario.max_surge,
                "maxUnavailable": scenario.max_unavailable,
            },
        },
        "template": template,
    }


def _service_spec() -> Obj:
    return {
        "selector": {"app": DEPLOYMENT},
        "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}],
    }


def manifests(scenario: Scenario) -> list[Obj]:
    """The Deployment and Service as a user would have written them (what ``lab run`` puts
    in its bundle beside the evidence, so a diagnosis knows the pods' preStop and grace):
    the specs the lab's API server serves, without what the server adds."""
    template: Obj = {"metadata": {"labels": {"app": DEPLOYMENT}}, "spec": pod_spec(scenario)}
    labels = {"app": DEPLOYMENT}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE, "labels": labels},
            "spec": _deployment_spec(scenario, template),
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": dict(labels)},
            "spec": _service_spec(),
        },
    ]


def pods(view: LabView) -> list[Obj]:
    """The Deployment's pods, from ``pods_json`` (deletion and termination facts) with the
    rest of a real pod: owner, template spec, node, IP, conditions, phase."""
    items = pods_json([replace(p.info, node=p.node) for p in view.pods], CONTAINER)["items"]
    out = []
    for pod, item in zip(view.pods, items, strict=True):
        info = pod.info
        replica_set = info.name.rsplit("-", 1)[0]
        meta = item["metadata"]
        meta["uid"] = uid(view.run, "Pod", NAMESPACE, info.name)
        meta["labels"] = {"app": DEPLOYMENT, READY_HASH_LABEL: _hash(replica_set)}
        meta["ownerReferences"] = [_owner(view, "ReplicaSet", replica_set)]
        meta["generateName"] = f"{replica_set}-"
        template = _template(view, replica_set)
        if "annotations" in template["metadata"]:
            meta["annotations"] = template["metadata"]["annotations"]
        # the port the pod listens on: 8080 on the kernel datapath; on the userspace one,
        # where every pod is 127.0.0.1, a port of its own
        spec = pod_spec(view.scenario, pod.port or POD_PORT) | {"nodeName": pod.node}
        item["spec"] = spec
        status = item["status"]
        exited = bool(info.exits)
        ready = pod.serving and not exited
        status["phase"] = (
            "Pending"
            if not pod.port
            else "Running"
            if not exited
            else "Succeeded"
            if all(e.exit_code == 0 for e in info.exits)
            else "Failed"
        )
        status["hostIP"] = view.node_ips[int(pod.node.rsplit("-", 1)[1])]
        status["startTime"] = stamp(info.created_at or view.started)
        if pod.port:
            status["podIPs"] = [{"ip": info.ip}]
        else:  # created, its process not listening yet
            status.pop("podIP", None)
            status["containerStatuses"][0]["state"] = {"waiting": {"reason": "ContainerCreating"}}
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True" if ready else "False"},
            {"type": "Ready", "status": "True" if ready else "False"},
        ]
        for c in status["containerStatuses"]:
            c["ready"] = ready
            c["image"] = IMAGE
            c["imageID"] = f"docker.io/{IMAGE}"
            c["started"] = bool(pod.port) and not exited
            if "running" in c["state"]:
                c["state"]["running"] = {"startedAt": stamp(info.created_at or view.started)}
            elif "terminated" in c["state"]:
                c["state"]["terminated"]["startedAt"] = stamp(info.created_at or view.started)
        out.append(item)
    return out


# ---- the Service and its endpoints -----------------------------------------------------
def service(view: LabView) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(view, "Service", SERVICE, NAMESPACE, view.started, labels={"app": "api"}),
        "spec": {"type": "ClusterIP", "clusterIP": CLUSTER_IP, "clusterIPs": [CLUSTER_IP]}
        | _service_spec()
        | {"sessionAffinity": "None", "ipFamilies": ["IPv4"]},
        "status": {"loadBalancer": {}},
    }


def _pod_ref(view: LabView, name: str) -> Obj:
    return {
        "kind": "Pod",
        "name": name,
        "namespace": NAMESPACE,
        "uid": uid(view.run, "Pod", NAMESPACE, name),
    }


def _endpoint_pods(view: LabView) -> list[ApiPod]:
    """The pods the EndpointSlice controller lists: started and not yet exited."""
    return [p for p in view.pods if p.port and not p.info.exits and p.info.ip]


def endpoint_slices(view: LabView) -> list[Obj]:
    """EndpointSlices of Service ``api``: one per distinct target port (as the controller
    groups them), with each pod's ``ready``/``serving``/``terminating`` conditions."""
    by_port: dict[int, list[ApiPod]] = {}
    for p in _endpoint_pods(view):
        by_port.setdefault(p.port, []).append(p)
    if not by_port:
        by_port[POD_PORT] = []  # the controller keeps one (empty) slice per Service
    trigger = iso_utc(view.last_change) if view.last_change is not None else None
    out = []
    for port, members in sorted(by_port.items()):
        suffix = hashlib.sha256(f"{view.run}:{port}".encode()).hexdigest()
        name = f"{SERVICE}-{''.join(_SUFFIX_CHARS[int(c, 16)] for c in suffix[:5])}"
        out.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": _meta(
                    view,
                    "EndpointSlice",
                    name,
                    NAMESPACE,
                    view.started,
                    generateName=f"{SERVICE}-",
                    labels={
                        "kubernetes.io/service-name": SERVICE,
                        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                    },
                    annotations={TRIGGER_TIME: trigger} if trigger else None,
                    ownerReferences=[_owner(view, "Service", SERVICE, "v1")],
                ),
                "addressType": "IPv4",
                "endpoints": [
                    {
                        "addresses": [p.info.ip],
                        "conditions": {
                            "ready": p.serving and p.info.deleted_at is None,
                            "serving": p.serving,
                            "terminating": p.info.deleted_at is not None,
                        },
                        "nodeName": p.node,
                        "targetRef": _pod_ref(view, p.info.name),
                    }
                    for p in members
                ],
                "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            }
        )
    return out


def endpoints(view: LabView) -> Obj:
    """Core ``Endpoints``: ready addresses, not-ready ones, terminating pods left out."""
    subsets: dict[int, Obj] = {}
    for p in _endpoint_pods(view):
        if p.info.deleted_at is not None:
            continue
        subset = subsets.setdefault(
            p.port, {"ports": [{"name": "http", "port": p.port, "protocol": "TCP"}]}
        )
        address = {
            "ip": p.info.ip,
            "nodeName": p.node,
            "targetRef": _pod_ref(view, p.info.name),
        }
        subset.setdefault("addresses" if p.serving else "notReadyAddresses", []).append(address)
    meta = _meta(view, "Endpoints", SERVICE, NAMESPACE, view.started, labels={"app": "api"})
    obj: Obj = {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta}
    if subsets:
        obj["subsets"] = [subsets[k] for k in sorted(subsets)]
    return obj


# ---- events ------------------------------------------------------------------------------
def events(view: LabView) -> list[Obj]:
    """Every event so far, core/v1 and events.k8s.io/v1, as ``events_json`` writes them
    (with uids, and the involved object's apiVersion and uid)."""
    out = []
    for api in ("v1", "events.k8s.io/v1"):
        for item in events_json(view.events, NAMESPACE, api)["items"]:
            meta = item["metadata"]
            meta["uid"] = uid(view.run, f"Event.{api}", meta["namespace"], meta["name"])
            when = item.get("firstTimestamp") or item["eventTime"][:19] + "Z"
            meta["creationTimestamp"] = when
            regarding = item.get("involvedObject") or item["regarding"]
            kind = regarding["kind"]
            regarding["apiVersion"] = "v1" if kind == "Pod" else "apps/v1"
            regarding["uid"] = uid(view.run, kind, regarding["namespace"], regarding["name"])
            out.append(item)
    return out
