"""Load balancer checks (``SVD110`` to ``SVD112``): the cloud load balancers in front of a
workload (``model.path``) send to pod IPs on legs of their own, longer than the cluster's.

The numbers come from the one remedy (``model.remedy.plan_shutdown`` for the preStop,
``plan_hops`` for the hops' own settings); these rules say what they find and write the fix
where it is safe: the preStop and grace period of the pod, a target group's attributes on
the Ingress or Service that carries them. A Namespace label is a step for the user.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from svcdoctor.checks._carrying import racing
from svcdoctor.checks._shutdown import readiness_first, run_paths, seconds, shutdown_facts
from svcdoctor.checks.race import race_plan, short_sleep
from svcdoctor.checks.registry import Hit, Subject, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.model import Cause, Container, Inventory, Service, Severity, Workload
from svcdoctor.model.hops import (
    AGIC_DRAINING,
    ALB_GATE_LABEL,
    ALB_TARGET_TYPE,
    ALB_TG_ATTRIBUTES,
    GKE_NEG,
    NEG_READY_GATE,
    NLB_TARGET_TYPE,
    NLB_TYPE,
    Hop,
    HopKind,
    Implementation,
)
from svcdoctor.model.patch import Fix, FixAvailability, ObjectPatch
from svcdoctor.model.remedy import HopChange, HopSetting, plan_hops
from svcdoctor.model.route import Route

_DELAY_KEY = "deregistration_delay.timeout_seconds"
# Workload kinds with spec.minReadySeconds (apps/v1 Deployment, ReplicaSet, StatefulSet,
# DaemonSet: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/).
_MIN_READY_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"})


@dataclass(frozen=True, slots=True)
class _Planned:
    """One hop setting the plan of one serving container asks for, with the Service the
    hop's path is addressed to."""

    workload: Workload
    container: Container
    setting: HopSetting
    service: str
    grace: int  # the grace period the plan gives the pod


def _planned(inventory: Inventory, settings: Settings) -> Iterator[_Planned]:
    """The hop settings (``model.remedy.plan_hops``) of every serving container."""
    paths = run_paths(inventory, settings)
    for w, c in racing(inventory):
        by_hop: dict[int, tuple[Hop, str]] = {}
        for path in paths.of(w):
            for hop in path.hops:
                by_hop.setdefault(id(hop), (hop, path.service.name))
        if not any(h.kind is HopKind.LOAD_BALANCER for h, _ in by_hop.values()):
            continue
        sleep = c.prestop.sleep_seconds if c.prestop else None
        plan = race_plan(w, c, settings, current_prestop=sleep)
        facts = shutdown_facts(w, c, settings, sleep)
        services = {id(h): s for h, s in by_hop.values()}
        placed = replace(w.ref, namespace=inventory.namespace_of(w.ref))  # -n applies
        for s in plan_hops(plan, facts, [h for h, _ in by_hop.values()], placed):
            yield _Planned(w, c, s, services.get(id(s.hop), ""), plan.grace_seconds)


@rule(
    "SVD110",
    "prestop-shorter-than-hop-leg",
    Cause.RACE,
    Severity.WARNING,
    fix=FixAvailability.SAFE,
)
def prestop_shorter_than_hop_leg(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The preStop sleep covers the cluster's propagation but not a load balancer's leg.

    ## What it does
    Flags preStop sleeps at least as long as `--propagation-seconds` (so SVD103 is quiet)
    but shorter than the leg of the slowest hop in front of the pod: a cloud load balancer
    sending to pod IPs, which learns of a deleted pod through its own controller and cloud
    API. svcdoctor finds the hops from the objects: an ALB Ingress
    (`alb.ingress.kubernetes.io/target-type: ip`), an NLB Service
    (`service.beta.kubernetes.io/aws-load-balancer-nlb-target-type: ip`, or the old type
    `nlb-ip`), a TargetGroupBinding with `targetType: ip`, GKE NEGs
    (`cloud.google.com/neg`), Azure's Application Gateway Ingress Controller. The default
    legs: AWS ALB 30 s, NLB and target groups 60 s, GKE NEG 40 s, Application Gateway 90 s
    (see the References); set your own in `[tool.svcdoctor.hops]`. A container with no
    preStop delay is SVD101's, whose message names the hop too.

    ## Why it matters
    The load balancer keeps sending new requests to a deleted pod until its deregistration
    reaches the data plane: seconds to minutes, whatever kube-proxy does. A sleep sized for
    kube-proxy ends long before that; the app then stops listening and the load balancer's
    last requests fail (502/504 on an ALB, resets on an NLB) on every rollout.

    ## Example
    Bad:
    ```yaml
    # Ingress with alb.ingress.kubernetes.io/target-type: ip in front of:
    lifecycle:
      preStop:
        sleep: {seconds: 5}
    ```
    Good:
    ```yaml
    terminationGracePeriodSeconds: 45
    lifecycle:
      preStop:
        sleep: {seconds: 30}
    ```

    ## Fix
    Raise the sleep to the hop's leg and the grace period above sleep + longest request +
    margin (`fix` writes both). Measure your load balancer's leg (the time from a pod's
    deletion to its last request in the load balancer's access log) and set it in the
    configuration, `[tool.svcdoctor.hops]` with `aws-alb = 45`. Where the image cannot sleep
    (SVD104), a preStop `httpGet` to an endpoint of the app that fails its health check
    and answers after the same time does the same without a shell.

    ## References
    - https://docs.aws.amazon.com/eks/latest/best-practices/load-balancing.html
    - https://github.com/kubernetes-sigs/aws-load-balancer-controller/issues/2366
    - https://github.com/kubernetes-sigs/aws-load-balancer-controller/issues/1064
    - https://cloud.google.com/knowledge/kb/502-503-errors-on-external-http-s-load-balancer-000006416
    - https://azure.github.io/application-gateway-kubernetes-ingress/how-tos/minimize-downtime-during-deployments/
    """
    paths = run_paths(inventory, settings)
    for w, c in racing(inventory):
        hit = short_sleep(w, c, settings, "SVD110")
        if hit is None:
            continue
        hop = paths.slower_than(w, settings.propagation_seconds)
        if hop is not None and hit.fix is not None:
            key = hop.implementation.value
            note = (
                f"\n# {hop.label}'s leg {hop.leg.seconds:g} s: {hop.leg.source}; measure yours "
                f"and set it in the config:\n#   [tool.svcdoctor.hops]\n#   {key} = N"
            )
            if hop.readiness_gate:  # it honours readiness: flipping it first helps too
                note += "\n" + readiness_first(hop).rstrip("\n")
            hit = replace(hit, fix=replace(hit.fix, note=hit.fix.note + note))
        yield hit


@rule("SVD111", "lb-targets-without-readiness-gate", Cause.RACE, Severity.WARNING)
def lb_targets_without_readiness_gate(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Pods are a load balancer's IP targets, and nothing holds a rollout until they are healthy.

    ## What it does
    Flags workloads whose pods are IP targets of an AWS load balancer (an ALB Ingress with
    `target-type: ip`, an NLB Service with `nlb-target-type: ip` or type `nlb-ip`, a
    TargetGroupBinding with `targetType: ip`) when their Namespace, given in the input or
    read from the cluster, lacks the label `elbv2.k8s.aws/pod-readiness-gate-inject:
    enabled`. When the Namespace is not in the input, nothing is said (svcdoctor cannot
    know). Also flags pods in GKE standalone NEGs (`cloud.google.com/neg` with
    `exposed_ports`), which get no readiness gate, when `minReadySeconds` is shorter than
    the NEG's leg.

    ## Why it matters
    Without the gate a new pod is Ready as soon as its probe passes, while the load balancer
    has not registered it or seen it healthy yet. The rollout goes on and deletes old pods
    that are still the load balancer's only healthy targets: requests fail, or the load
    balancer has no healthy target at all for a while (aws-load-balancer-controller #1124).
    The gate holds the rollout until the new targets are healthy. It does not hold a
    terminating pod: the preStop delay (SVD101, SVD110) is still needed.

    ## Example
    Bad:
    ```yaml
    apiVersion: v1
    kind: Namespace
    metadata:
      name: shop
    ```
    Good:
    ```yaml
    apiVersion: v1
    kind: Namespace
    metadata:
      name: shop
      labels:
        elbv2.k8s.aws/pod-readiness-gate-inject: enabled
    ```

    ## Fix
    Label the Namespace (`kubectl label namespace shop
    elbv2.k8s.aws/pod-readiness-gate-inject=enabled`), then re-create the pods (`kubectl
    rollout restart`): the controller's webhook injects the gate only when a pod is created.
    svcdoctor does not write this: a Namespace label changes every workload in it. For a GKE
    standalone NEG, set `spec.minReadySeconds` to the NEG's leg, or serve the pods through an
    Ingress' NEGs (`cloud.google.com/neg: '{"ingress": true}'`), for which GKE injects the
    gate `cloud.google.com/load-balancer-neg-ready`. A load balancer that health-checks its
    targets also stops sending to a pod whose health check fails: a preStop that first
    makes the app fail it (the app's own shutdown endpoint) and then waits lets it act
    before its deregistration arrives.

    ## References
    - https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/pod_readiness_gate/
    - https://github.com/kubernetes-sigs/aws-load-balancer-controller/issues/1124
    - https://cloud.google.com/kubernetes-engine/docs/concepts/container-native-load-balancing
    - https://github.com/kubernetes/ingress-gce/issues/769
    """
    seen: set[tuple[str, str]] = set()
    for p in _planned(inventory, settings):
        s, w = p.setting, p.workload
        if s.change is not HopChange.READINESS_GATE or (s.target.name, w.ref.name) in seen:
            continue
        seen.add((s.target.name, w.ref.name))
        ns = s.target.name
        restart = f"kubectl rollout restart {w.ref.kind.lower()}/{w.ref.name} -n {ns}"
        yield Hit(
            w,
            f"pods of {w.ref} are IP targets of {s.hop.name}, but namespace {ns} has no "
            f"label {ALB_GATE_LABEL}=enabled: a rollout can delete old pods before the new "
            "ones are healthy targets",
            fix=Fix(
                note="# a Namespace label svcdoctor does not write (it changes every workload "
                "in the namespace):\n"
                f"kubectl label namespace {ns} {ALB_GATE_LABEL}=enabled\n"
                "# the gate is injected only when a pod is created: re-create the pods\n"
                f"{restart}\n" + readiness_first(s.hop)
            ),
            line=w.template.line,
        )
    yield from _standalone_negs(inventory, settings)


def _standalone_negs(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Workloads in GKE standalone NEGs (no readiness gate) whose ``minReadySeconds`` is
    shorter than the NEG's leg."""
    paths = run_paths(inventory, settings)
    for w in inventory.workloads:
        if w.ref.kind not in _MIN_READY_KINDS:
            continue
        hop = next(
            (
                h
                for path in paths.of(w)
                for h in path.hops
                if h.implementation is Implementation.GKE_NEG and h.readiness_gate is False
            ),
            None,
        )
        if hop is None:
            continue
        need = max(seconds(hop.leg.seconds), 1)
        have = w.min_ready_seconds or 0
        if have >= need:
            continue
        yield Hit(
            w,
            f"pods of {w.ref} are endpoints of a standalone NEG ({hop.via}: {GKE_NEG} "
            f"exposed_ports), which gets no readiness gate, and minReadySeconds is {have}: a "
            f"rollout can delete old pods before the load balancer sends to the new ones "
            f"(its leg: {hop.leg.seconds:g} s)",
            fix=Fix(
                ObjectPatch({"spec": {"minReadySeconds": need}}),
                lead="# hold each new pod for the NEG's leg before the rollout goes on:\n",
                note="\n# or serve the pods through an Ingress' NEGs "
                f"({GKE_NEG}: '{{\"ingress\": true}}'): GKE then injects the readiness gate "
                f"{NEG_READY_GATE}\n" + readiness_first(hop),
            ),
            line=w.location.line,
        )


@rule(
    "SVD112",
    "deregistration-delay-mismatch",
    Cause.RACE,
    Severity.WARNING,
    fix=FixAvailability.SAFE,
)
def deregistration_delay_mismatch(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A target group's deregistration delay cuts in-flight requests, or outlasts the pod.

    ## What it does
    Reads the deregistration delay of the AWS target groups in front of a workload's pods
    (IP targets): `deregistration_delay.timeout_seconds` in the Ingress' or Service's
    `alb.ingress.kubernetes.io/target-group-attributes`, or the NLB Service's
    `service.beta.kubernetes.io/aws-load-balancer-target-group-attributes`; AWS's default
    is 300 s. For an Azure Application Gateway (AGIC) Ingress, its connection draining:
    `appgw.ingress.kubernetes.io/connection-draining` (off by default) and
    `connection-draining-timeout` (30 s by default). Flags draining that is off or a delay
    shorter than the longest request (`--max-request-seconds`, warning), or a delay longer
    than the grace period the pod will have (info).

    ## Why it matters
    When the delay ends the load balancer closes the connections still open to the target:
    a delay shorter than the longest request cuts requests the pod would have finished.
    A delay longer than the grace period buys nothing: the kubelet has killed the pod by
    then, and the target only stays draining, which slows every rollout and scale-down.

    ## Example
    Bad:
    ```yaml
    metadata:
      annotations:
        alb.ingress.kubernetes.io/target-type: ip
        alb.ingress.kubernetes.io/target-group-attributes: deregistration_delay.timeout_seconds=5
    ```
    Good:
    ```yaml
    metadata:
      annotations:
        alb.ingress.kubernetes.io/target-type: ip
        alb.ingress.kubernetes.io/target-group-attributes: deregistration_delay.timeout_seconds=10
    ```

    ## Fix
    Set the delay to the longest request, and keep it within the grace period. `fix` writes
    the annotation on the object that carries it (the Ingress, or the Service whose
    annotation overrides the Ingress'), keeping the value's other attributes.

    ## References
    - https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-target-group-attributes.html#deregistration-delay
    - https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/ingress/annotations/
    - https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/
    - https://github.com/zalando-incubator/kubernetes-on-aws/pull/4272
    - https://learn.microsoft.com/azure/application-gateway/ingress-controller-annotations
    """
    routes: dict[object, Route] = {}
    for route in inventory.routes:
        # same-named alternatives (mreferre/yelb's ALB Ingress in instance mode beside its
        # ip variant; judge234): report on the one whose targets are the pods
        if route.ref not in routes or route.annotations.get(ALB_TARGET_TYPE) == "ip":
            routes[route.ref] = route
    services: dict[object, Service] = {}
    for candidate in inventory.services:
        # same-named alternatives (nginx/kubernetes-ingress deployments/service/: an NLB
        # variant beside NodePort and plain LoadBalancer ones): report on the NLB's
        # (and of NLB variants, the one whose targets are the pods: eks-workshop-v2's ui-nlb
        # in instance mode beside a lab's ip patch of it; judge248)
        before = services.get(candidate.ref)
        if before is None or (_nlb(candidate) and not _ip_targets(before)):
            services[candidate.ref] = candidate
    done: set[tuple[object, str]] = set()
    for p in _planned(inventory, settings):
        s, hop = p.setting, p.setting.hop
        if s.change is not HopChange.DEREGISTRATION or hop.deregistration is None:
            continue
        subject: Subject | None = routes.get(s.target) or services.get(s.target)
        key = s.key
        if hop.implementation is Implementation.AWS_ALB:
            # the backend Service's annotation overrides the Ingress' ("Annotations applied
            # to Service have higher priority over annotations applied to Ingress":
            # aws-load-balancer-controller docs/guide/ingress/annotations.md)
            svc = next(
                (
                    v
                    for v in inventory.services_of(p.workload)
                    if v.ref.name == p.service and ALB_TG_ATTRIBUTES in v.annotations
                ),
                None,
            )
            subject = svc or subject
        if subject is None or (subject.ref, key) in done:
            continue
        done.add((subject.ref, key))
        delay = hop.deregistration.seconds
        want = int(s.value.rsplit("=", 1)[-1])
        longest = seconds(settings.max_request_seconds)
        current = subject.annotations.get(key)
        if hop.implementation is Implementation.AZURE_APPGW:
            annotations = {AGIC_DRAINING: "true", key: s.value}
            what = f"{hop.label} connection draining"
        else:
            annotations = {key: _attributes(current, want)}
            what = f"{hop.label} target group deregistration delay"
        if delay == 0:
            why, severity = (
                "off: the load balancer cuts the requests in flight on a pod it removes",
                Severity.WARNING,
            )
        elif delay < longest:
            why, severity = (
                f"shorter than the longest request ({longest} s, --max-request-seconds): the "
                "load balancer closes requests still in flight on a deleted pod",
                Severity.WARNING,
            )
        else:
            now = p.workload.template.effective_grace_seconds
            grace = (
                f"the {p.grace} s grace period of {p.workload.ref}"
                if p.grace == now
                else f"the {p.grace} s grace period {p.workload.ref} gets with the preStop fix "
                f"(now {now} s)"
            )
            why, severity = (
                f"longer than {grace}: the pod is killed before it ends, the target only "
                "stays draining",
                Severity.INFO,
            )
        shown = "" if delay == 0 else f" {delay:g} s"
        yield Hit(
            subject,
            f"{what}{shown} ({hop.deregistration.source}) is {why}",
            fix=Fix(ObjectPatch({"metadata": {"annotations": annotations}})),
            line=subject.location.line,
            severity=severity,
        )


def _nlb(svc: Service) -> bool:
    """Whether the AWS Load Balancer Controller puts an NLB in front of the Service (its
    annotations, as ``model.path`` reads them)."""
    return svc.type == "LoadBalancer" and (
        svc.annotations.get(NLB_TYPE, "") in ("external", "nlb-ip")
        or NLB_TARGET_TYPE in svc.annotations
    )


def _ip_targets(svc: Service) -> bool:
    """Whether an NLB Service's targets are its pods (target type ip, or the old nlb-ip)."""
    return svc.annotations.get(NLB_TARGET_TYPE) == "ip" or svc.annotations.get(NLB_TYPE) == "nlb-ip"


def _attributes(current: str | None, delay: int) -> str:
    """A target group attributes value with its deregistration delay set, the other
    attributes kept in their order."""
    attrs = [a.strip() for a in (current or "").split(",") if a.strip()]
    setting = f"{_DELAY_KEY}={delay}"
    out = [setting if a.split("=", 1)[0].strip() == _DELAY_KEY else a for a in attrs]
    return ",".join(out if setting in out else [*out, setting])
