"""Rollouts (``SVD106``): how a rollout or an eviction replaces a Service's pods, and
whether, for a while, none of them serves."""

from __future__ import annotations

from collections.abc import Iterator

from svcdoctor.checks._backends import only_backend
from svcdoctor.checks._carrying import carrying_services
from svcdoctor.checks._serving import queried_scraper
from svcdoctor.checks._shutdown import daemon_gap
from svcdoctor.checks.election import ELECT_FIRST, leader_elected, unknown_election, waits_for_lease
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.checks.state import (
    SPLIT_CAVEAT,
    keeps_data,
    local_state,
    one_node_claim,
    single_writer_claim,
)
from svcdoctor.checks.stores import data_store
from svcdoctor.model import Cause, Inventory, Severity, Workload
from svcdoctor.model.inventory import autoscaler_of, operator_asset
from svcdoctor.model.patch import Fix, FixAvailability, ObjectPatch, note


def _effective(value: int | str | None, replicas: int, default: int | str) -> int:
    value = default if value is None else value
    if isinstance(value, int):
        return value
    percent = float(value.rstrip("%") or 0) if value.rstrip("%").replace(".", "").isdigit() else 0
    return int(percent * replicas / 100)  # maxUnavailable rounds down


@rule("SVD106", "rollout-drops-capacity", Cause.RACE, Severity.WARNING, fix=FixAvailability.SAFE)
def rollout_drops_capacity(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Every rollout takes all serving pods of a Service away at once.

    ## What it does
    Flags Service-backed Deployments and Argo Rollouts with `strategy: Recreate`, and workloads
    with one replica whose update removes it before its replacement is ready (`maxUnavailable`
    of 1 or more, or a StatefulSet, which always deletes first), unless the pods keep local
    state, as for SVD204 (a claim that attaches to one node, a single-instance server, a node's
    daemon reached through a hostPath socket), where a second pod would split the state or reach
    another node's daemon, or the app runs under k8s-await-election
    (`K8S_AWAIT_ELECTION_ENABLED`) or operator-sdk's leader-for-life election (`POD_NAME` and
    `OPERATOR_NAME`; a surge pod would wait for the lease the old pod holds), or a
    leader-elected app (`--leader-elect`…) that chose `strategy: Recreate` and has a readiness
    probe (if only the leader serves, a surge pod never gets ready while the old pod holds the
    lease: the rollout would stall), or another workload's pods behind the same Service keep
    serving meanwhile (a canary beside its stable track, bare Pods beside a Deployment). A
    controller with no leader election in sight (`*-operator`, kubebuilder's `/manager`) whose
    strategy writes out `maxSurge: 0` is told so as an info: never running two pods is what a
    controller that must not run twice needs. A DaemonSet's rolling update replaces one node at
    a time, which other nodes' pods cover; it is flagged with `maxUnavailable: 100%` (every pod
    at once), and behind a Service with `externalTrafficPolicy: Local`, where a node's traffic
    only reaches the node's own pod, with `maxSurge: 0` (the default: the pod is deleted before
    its replacement runs) unless the pod uses a `hostPort` or serves on the host's network
    (two pods cannot bind one node's port, so it cannot surge). `OnDelete` DaemonSets are
    not flagged. Only Services that carry requests count (not metrics-only ones, as for
    SVD101).

    ## Why it matters
    During the gap no endpoint is ready: every request fails, not a few. With one replica and
    `maxUnavailable: 1` every deploy is a short outage that looks "intermittent" on a
    dashboard aggregated over minutes.

    ## Example
    Bad:
    ```yaml
    replicas: 1
    strategy:
      type: RollingUpdate
      rollingUpdate: {maxUnavailable: 1, maxSurge: 0}
    ```
    Good:
    ```yaml
    replicas: 2
    strategy:
      type: RollingUpdate
      rollingUpdate: {maxUnavailable: 0, maxSurge: 1}
    ```

    ## Fix
    Use `RollingUpdate` with `maxUnavailable: 0` and `maxSurge: 1`, and run at least two
    replicas (with a PodDisruptionBudget) for anything behind a Service. Pods that cannot
    share a node (`hostNetwork` with ports, a `hostPort`, a required pod anti-affinity on
    `kubernetes.io/hostname` against their own labels) cannot surge without a spare node:
    for them the fix is two replicas with `maxUnavailable: 1` and `maxSurge: 0`, one
    replaced while the other serves. A Prometheus server keeps its one replica and surges:
    a second would answer queries from a history of its own.

    ## References
    - https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#strategy
    - https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#rolling-updates
    - https://kubernetes.io/docs/tasks/manage-daemon/update-daemon-set/
    - https://github.com/kubernetes/enhancements/tree/master/keps/sig-apps/1591-daemonset-surge
    """
    del settings
    for w in inventory.workloads:
        services = carrying_services(inventory, w)
        if not services or data_store(w):  # stop-then-start is deliberate for a store
            continue
        names = ", ".join(dict.fromkeys(s.ref.name for s in services))  # alternatives: once
        replicas = inventory.replicas(w)
        rolling, apart = _rolling(w)
        hit: Hit | None = None
        if w.strategy == "Recreate":
            more = bool(apart) and replicas == 1  # one pod that cannot surge: a second one
            hit = Hit(
                w,
                f"strategy Recreate stops every pod before starting new ones: Service {names} "
                "has no ready endpoint during each rollout",
                fix=(
                    _second_pod(inventory, w, {"strategy": rolling}, apart)
                    if more
                    else _spec_fix({"strategy": rolling}, apart, _surge_elect_first(w, replicas))
                ),
            )
        elif replicas == 1 and w.ref.kind in ("Deployment", "Rollout"):
            # a second Prometheus is a second history: surging alone closes the gap
            one = not apart and any(queried_scraper(c) for c in w.template.containers)
            if w.replicas is None and operator_asset(w):
                pass  # the operator sets the count when it applies it (SVD204's note says so)
            elif _only_pod_goes_first(inventory, w):
                fix = (
                    _spec_fix({"strategy": rolling})
                    if one
                    else _second_pod(inventory, w, {"strategy": rolling}, apart)
                )
                hit = (
                    Hit(
                        w,
                        f"1 replica with maxUnavailable {w.max_unavailable} and maxSurge 0 "
                        f"written out: the only pod of Service {names} is removed before its "
                        "replacement is ready, as a controller that must never run twice needs "
                        "(no leader election here); if it may, the fix closes the gap",
                        fix=fix,
                        severity=Severity.INFO,
                    )
                    if _one_at_most(w)
                    else Hit(
                        w,
                        f"1 replica with maxUnavailable {w.max_unavailable}: the only pod of "
                        f"Service {names} is removed before its replacement is ready",
                        fix=fix,
                    )
                )
        elif replicas == 1 and w.ref.kind == "StatefulSet":
            hit = Hit(
                w,
                f"a 1-replica StatefulSet deletes its pod before recreating it: Service {names} "
                "has no endpoint during each rollout",
                fix=_second_pod(inventory, w, {}),
            )
        elif w.ref.kind == "DaemonSet" and (gap := daemon_gap(w, services)):
            # a pod that cannot share its node cannot surge: one node at a time, the others'
            # pods serving (Cilium's agent on the host's network; judge550)
            yield Hit(w, gap.format(names=names), fix=_spec_fix({"updateStrategy": rolling}, apart))
        if hit is not None and not stops_first_on_purpose(w) and only_backend(inventory, w):
            yield hit


def _one_at_most(w: Workload) -> bool:
    """Whether the strategy is written never to run two pods (``maxSurge: 0`` given, not
    defaulted) for a controller whose manifest turns no leader election on: a deliberate
    single instance (grafana/rollout-operator, which elects no leader and whose policy checks
    require maxSurge 0; judge150)."""
    return w.max_surge in (0, "0%") and any(unknown_election(c) for c in w.template.containers)


def _rolling(w: Workload) -> tuple[dict[str, object], str]:
    """The rolling update that keeps a pod serving, and why it is not a surge (a note; ""
    for a surge): pods that cannot share a node (``PodTemplate.apart``) would wait for a
    spare one, so one is replaced at a time while another serves."""
    if not w.template.apart:
        return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}, ""
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}, (
        f"# its pods cannot share a node ({w.template.apart}): a surge pod would wait "
        "for a spare node,\n# so one pod is replaced at a time while another serves; that "
        "takes 2 nodes they may run on"
    )


def stops_first_on_purpose(w: Workload) -> bool:
    """Whether stopping the pods before starting new ones is deliberate: a data store, pods
    that keep local state (two must not hold or attach it at once, nor a second reach
    another node's daemon), or an app that serves once elected (``waits_for_lease``: a
    surge pod would wait for the lease the old one holds, never deleted before), or a
    leader-elected app that chose ``Recreate`` and is probed for readiness: if only the
    leader serves, a surge pod is never ready while the old one holds the lease, and the
    rollout stalls (cloudnative-pg's plugin-barman-cloud; judge107), or pods that write to a
    claim that attaches to one node (``one_node_claim``: a surge pod on another node waits
    for it, and the rollout stalls: prow's ghproxy cache; judge267), or ``Recreate`` beside a
    claim they write, whatever its access mode (``single_writer_claim``)."""
    return (
        data_store(w)
        or one_node_claim(w) is not None
        or single_writer_claim(w) is not None
        or any(
            local_state(w, c, alike=True)
            or waits_for_lease(c)
            or (
                w.strategy == "Recreate"
                and c.readiness is not None
                and leader_elected(c) is not None
            )
            for c in w.template.containers
        )
    )


def lone_keeper(inventory: Inventory, w: Workload) -> bool:
    """Whether the workload's one pod is the only backend of its Services and holds data no
    other pod ever takes over, nor stands beside it for a probe to route to: a data store's
    (``data_store``: a surge pod is another, empty database), or a server's local state
    (``keeps_data``) when no surge pod takes its traffic over in a rollout: it stops first
    (``stops_first``), or its claim attaches to one node (``one_node_claim``). A server's
    surge pod, if with state of its own, does serve the requests a preStop delay and a
    readiness probe save (clusterpedia's binding-apiserver on memory storage, a mitmproxy
    test Pod, dubbo-samples' SkyWalking; judge279, judge291, judge304)."""
    if not only_backend(inventory, w) or inventory.replicas(w) != 1:
        return False
    surges = not stops_first(w) and one_node_claim(w) is None
    return data_store(w) or (keeps_data(w) and not surges)


def _only_pod_goes_first(inventory: Inventory, w: Workload) -> bool:
    """Whether a rollout removes the workload's only pod before its replacement is ready."""
    return stops_first(w) and inventory.replicas(w) == 1


def stops_first(w: Workload) -> bool:
    """Whether a rollout of one pod of the workload removes it before its replacement is
    ready: ``Recreate``, a StatefulSet, or a rolling update whose ``maxUnavailable`` is a
    pod or more of one (the default 25 % rounds down to none)."""
    rolls = w.ref.kind in ("Deployment", "Rollout") and w.strategy != "BlueGreen"
    unavailable = rolls and _effective(w.max_unavailable, 1, "25%") >= 1
    return w.strategy == "Recreate" or w.ref.kind == "StatefulSet" or unavailable


# Kinds that never roll their pods: a deleted or evicted pod is replaced after it is gone
_NO_ROLLOUT = frozenset({"ReplicaSet", "ReplicationController", "Pod"})


def lone_pod(inventory: Inventory, w: Workload) -> str | None:
    """The rule that reports the outage when the workload's only pod goes with nothing to
    take over from it (SVD106: a rollout stops it first; SVD204: a kind that never rolls),
    or ``None``."""
    if not only_backend(inventory, w):
        return None
    if _only_pod_goes_first(inventory, w):
        return "SVD106"
    if w.ref.kind in _NO_ROLLOUT and inventory.replicas(w) == 1:
        return "SVD204"
    return None


def until_replicated(w: Workload, alone: str | None) -> str:
    """How a finding about the only pod's shutdown or start begins while another rule's
    outage (``lone_pod``: SVD106, SVD204) hides it: requests fail anyway until that rule's
    fix adds a pod that takes over; "" when none does."""
    if alone == "SVD106":
        return (
            "today each rollout stops its only pod before a replacement starts, so requests "
            "fail meanwhile anyway (SVD106); once a replacement takes over (SVD106's fix), "
        )
    if alone == "SVD204":
        two = "a Deployment runs 2 of it" if w.ref.kind == "Pod" else "it runs 2"
        return (
            f"today no pod takes over from the only one of this {w.ref.kind}, so requests fail "
            f"while it is replaced anyway (SVD204); once {two} (SVD204's fix), "
        )
    return ""


def _second_pod(inventory: Inventory, w: Workload, spec: dict[str, object], *notes: str) -> Fix:
    """The fix that runs a second pod beside ``spec``'s change (after ``notes``):
    ``replicas: 2``, or, where an autoscaler owns the count (it would scale the workload back:
    loki-distributed's distributor, whose HPA keeps minReplicas 1; judge502), a note to raise
    its minimum; then the data a second pod may split, and ``ELECT_FIRST`` for a controller
    whose leader election the manifest does not show."""
    hpa = autoscaler_of(inventory, w)
    scaled = (
        f"# {hpa.ref} owns the replica count: set its {hpa.min_field} to 2 for a second pod"
        if hpa
        else ""
    )
    unknown = any(unknown_election(c) for c in w.template.containers)
    return _spec_fix(
        spec if hpa else {"replicas": 2} | spec,
        *notes,
        scaled,
        SPLIT_CAVEAT,
        ELECT_FIRST if unknown else "",
    )


def _surge_elect_first(w: Workload, replicas: int | None) -> str:
    """The note of a fix that surges the one pod of a controller whose leader election the
    manifest does not show: its Recreate may be what keeps a second one from reconciling too
    (the Spark operator's; judge136). Moot where two already run (MinIO's operator; judge190)."""
    if (replicas or 1) > 1 or not any(unknown_election(c) for c in w.template.containers):
        return ""
    return (
        "# a surge pod runs beside the old one: if this controller runs without leader "
        "election (no --leader-elect\n# here), turn it on first, or both reconcile every "
        "object while the rollout lasts"
    )


def _spec_fix(spec: dict[str, object], *notes: str) -> Fix:
    caveat = "\n".join(n for n in notes if n)
    if not spec:  # nothing of the workload's to change (an autoscaler owns its count)
        return note(caveat)
    return Fix(ObjectPatch({"spec": spec}), note=f"\n{caveat}" if caveat else "")
