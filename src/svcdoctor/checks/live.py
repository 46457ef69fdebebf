"""Live-only checks: what only a running cluster shows (``svcdoctor scan``).

They read ``Inventory.live`` (pod terminations, events, EndpointSlice conditions, the
kube-proxy configuration) and find nothing without it, so ``lint`` on files is unchanged.
Ids follow their cause's series like every other rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from svcdoctor.checks._backends import service_names
from svcdoctor.checks._carrying import racing
from svcdoctor.checks._serving import serves
from svcdoctor.checks._shutdown import seconds, shutdown_facts
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.model import (
    DEFAULT_CONNTRACK_MAX_PER_CORE,
    DEFAULT_CONNTRACK_MIN,
    Cause,
    EventCount,
    Inventory,
    LiveFacts,
    ObjectRef,
    PodFacts,
    Service,
    Severity,
    Workload,
    selector_matches,
)
from svcdoctor.model.patch import Fix, Handler, ObjectPatch, PodPatch, PreStopHook
from svcdoctor.model.remedy import HookKind, hook_kind, plan_shutdown

SIGKILL_EXIT = 137
REPEATED = 2  # FailedPreStopHook events (summed over a workload's pods) that make a pattern
FLAPPING = 3  # readiness failures of one Ready pod that make it flap
NOT_READY_SECONDS = 300.0  # an endpoint not ready this long is not a rollout in progress
SHOWN = 3  # pods named in a message
STEADIER_PROBE = {"timeoutSeconds": 3, "periodSeconds": 5, "failureThreshold": 3}
LINGER_TOLERANCE = 30.0  # seconds past the grace period before a terminating endpoint is stale


def _clock(ts: float | None) -> str:
    if ts is None:
        return "?"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ago(seconds_: float) -> str:
    s = max(0, round(seconds_))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s / 3600:.1f} h"


def _names(items: Iterable[str]) -> str:
    names = list(items)
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _workloads(inventory: Inventory) -> dict[ObjectRef, Workload]:
    return {w.ref: w for w in inventory.workloads}


def _prestop_sleep(w: Workload, container: str) -> float:
    for c in w.template.containers:
        if c.name == container and c.prestop and c.prestop.sleep_seconds:
            return c.prestop.sleep_seconds
    return 0.0


def _killed_at_grace(pod: PodFacts, finished: float | None) -> bool:
    """Exit 137 at the end of the pod's grace period (its deletion's, or the one the kubelet
    gave when it was told to stop the pod): the kubelet's SIGKILL. An earlier 137 is a force
    delete or a kill by someone else; 2 s of slack for whole-second timestamps."""
    if finished is None:
        return pod.deleted_at is not None
    if pod.grace_ends is not None:
        return finished >= pod.grace_ends - 2
    grace = pod.grace_seconds if pod.grace_seconds is not None else 30
    return any(stop + grace - 2 <= finished <= stop + grace + 5 for stop in pod.stopped_at)


def _while_ready(event: EventCount, pod: PodFacts) -> bool:
    """Whether the failures went on after the pod last became Ready: failures that only
    happened before (a slow start) are not flapping."""
    if event.last is None or pod.ready_since is None:
        return True
    return event.last > pod.ready_since


@rule("SVD107", "proxy-sync-outlasts-prestop", Cause.RACE, Severity.WARNING, live=True)
def proxy_sync_outlasts_prestop(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """kube-proxy's `minSyncPeriod` delays endpoint removal longer than preStop sleeps last.

    ## What it does
    Reads kube-proxy's configuration (`kube-system/kube-proxy` ConfigMap, `config.conf`) and
    flags it when `minSyncPeriod` of the active mode plus one second for the controller, the
    watch and applying the rules is longer than the propagation time the checks assume
    (`--propagation-seconds`, default 5) and Service-backed containers sleep less than that
    in preStop. Live only (`svcdoctor scan`).

    ## Why it matters
    kube-proxy rewrites a node's iptables/IPVS rules at most once per `minSyncPeriod`: an
    endpoint removal can wait that long on every node, so it is the floor of the race window.
    A preStop sleep shorter than the floor leaves pods closing their listeners while nodes
    still send them new connections: resets at every rollout, even with a "correct" preStop.

    ## Example
    Bad:
    ```yaml
    # kube-system/kube-proxy config.conf
    mode: iptables
    iptables:
      minSyncPeriod: 10s
    ---
    # a Service-backed container
    lifecycle:
      preStop:
        sleep: {seconds: 5}
    ```
    Good:
    ```yaml
    mode: iptables
    iptables:
      minSyncPeriod: 1s
    ```

    ## Fix
    Lower `minSyncPeriod` (1 s is the default; large values only pay off on nodes with tens
    of thousands of rules), or lint and scan with `--propagation-seconds` set to the floor so
    SVD101 and SVD103 compute preStop sleeps that cover it.

    ## References
    - https://kubernetes.io/docs/reference/config-api/kube-proxy-config.v1alpha1/
    - https://kubernetes.io/docs/reference/networking/virtual-ips/#minsyncperiod
    """
    live = inventory.live
    if live is None or live.proxy is None:
        return
    proxy = live.proxy
    floor = proxy.removal_floor
    if floor <= settings.propagation_seconds:
        return
    # the containers whose plan for a window of the floor raises or adds their sleep
    short = [
        (w, c.name, _prestop_sleep(w, c.name))
        for w, c in racing(inventory)
        if {"SVD101", "SVD103"}
        & set(
            plan_shutdown(
                shutdown_facts(
                    w, c, settings, current_prestop=_prestop_sleep(w, c.name) or None, window=floor
                )
            ).rules
        )
    ]
    if not short:
        return
    listed = _names(f"{w.ref.name}/{name} {sleep:g} s" for w, name, sleep in short)
    lower = max(0.0, settings.propagation_seconds - 1.0)
    yield Hit(
        proxy,
        f"kube-proxy ({proxy.mode}) applies endpoint changes at most every "
        f"{proxy.min_sync_seconds:g} s (minSyncPeriod): a removal can reach a node "
        f"{floor:g} s after the deletion, but {len(short)} Service-backed container(s) sleep "
        f"less in preStop ({listed})",
        fix=Fix(
            ObjectPatch({proxy.mode: {"minSyncPeriod": f"{lower:g}s"}}),
            note="\n# in config.conf of ConfigMap kube-system/kube-proxy, then restart "
            "kube-proxy;\n# or keep it and size preStop for it: svcdoctor scan "
            f"--propagation-seconds {seconds(floor)}",
        ),
    )


@rule("SVD108", "killed-at-grace-period", Cause.RACE, Severity.ERROR, live=True)
def killed_at_grace_period(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Containers were SIGKILLed at the end of their grace period (exit 137).

    ## What it does
    Flags Service-backed containers whose last termination was exit code 137 with reason
    `Error` (not `OOMKilled`) while their pod was being deleted, or after a `Killing` event
    told the kubelet to stop them: the process was still running when the grace period ran
    out. Live only (`svcdoctor scan`).

    ## Why it matters
    The kubelet sends SIGKILL when `terminationGracePeriodSeconds` (counted from the
    deletion, preStop included) is over. Requests still in flight are cut: the preStop delay
    that closed the endpoint race was bought with truncated requests at every rollout.

    ## Example
    Bad:
    ```yaml
    terminationGracePeriodSeconds: 15   # preStop 10 s leaves 5 s for 30 s uploads
    containers:
      - {name: upload, lifecycle: {preStop: {sleep: {seconds: 10}}}}
    ```
    Good:
    ```yaml
    terminationGracePeriodSeconds: 45   # preStop 10 + uploads 30 + margin 5
    containers:
      - {name: upload, lifecycle: {preStop: {sleep: {seconds: 10}}}}
    ```

    ## Fix
    Set the grace period to preStop + the longest request + a margin
    (`--max-request-seconds`, `--margin-seconds`). When it already covers that, the app does
    not exit on SIGTERM: make it stop accepting, finish in-flight requests and exit (and
    check SVD105: a shell wrapper swallows SIGTERM).

    ## References
    - https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination
    - https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/
    """
    live = inventory.live
    if live is None:
        return
    for w, c in racing(inventory):
        killed = [
            (p, t)
            for p in live.pods_of(w.ref)
            for t in p.terminations
            if t.container == c.name
            and t.exit_code == SIGKILL_EXIT
            and t.reason != "OOMKilled"
            and _killed_at_grace(p, t.finished_at)
        ]
        if not killed:
            continue
        grace = w.template.effective_grace_seconds
        sleep = _prestop_sleep(w, c.name)
        plan = plan_shutdown(shutdown_facts(w, c, settings, current_prestop=sleep, window=sleep))
        needed = plan.grace_seconds
        pods = _names(f"{p.ref.name} at {_clock(t.finished_at)}" for p, t in killed)
        if needed > grace:
            fix = Fix(PodPatch(w.ref.kind, grace_seconds=needed))
            why = (
                f"the grace period does not cover preStop {seconds(sleep)} s + requests up to "
                f"{seconds(settings.max_request_seconds)} s; set {needed}"
            )
        else:
            # requests outlived what the grace period leaves after SIGTERM: the plan for
            # requests that long plus --max-request-seconds
            longer = plan_shutdown(
                shutdown_facts(
                    w,
                    c,
                    settings,
                    current_prestop=sleep,
                    window=sleep,
                    longest_request=grace - seconds(sleep) + settings.max_request_seconds,
                )
            )
            fix = Fix(
                PodPatch(w.ref.kind, grace_seconds=longer.grace_seconds),
                lead=f"# the grace period leaves {grace - seconds(sleep)} s after SIGTERM: the "
                "app must stop accepting,\n# finish in-flight requests and exit on SIGTERM; if "
                "requests legitimately run longer:\n",
            )
            why = f"the app did not exit within {grace - seconds(sleep)} s of SIGTERM"
        yield Hit(
            w,
            f"{len(killed)} pod(s) of {w.ref} had container {c.name!r} SIGKILLed at the end "
            f"of the {grace} s grace period (exit 137, reason Error): {pods}; {why}",
            fix=fix,
            container=c.name,
        )


def _events_by_workload(
    live: LiveFacts, reason: str, workloads: dict[ObjectRef, Workload]
) -> dict[tuple[ObjectRef, str | None], list[EventCount]]:
    out: dict[tuple[ObjectRef, str | None], list[EventCount]] = {}
    for e in live.events:
        if e.reason == reason and e.workload in workloads:
            out.setdefault((e.workload, e.container), []).append(e)
    return out


def _span(events: list[EventCount]) -> str:
    first = min((e.first for e in events if e.first is not None), default=None)
    last = max((e.last for e in events if e.last is not None), default=None)
    return f"between {_clock(first)} and {_clock(last)}"


def _latest(events: list[EventCount]) -> EventCount:
    return max(events, key=lambda e: e.last or 0.0)


@rule("SVD109", "prestop-hook-failing", Cause.RACE, Severity.ERROR, live=True)
def prestop_hook_failing(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The preStop hook fails again and again (`FailedPreStopHook` events).

    ## What it does
    Counts `FailedPreStopHook` events of each workload's pods (the pods may be gone: events
    are matched through their ReplicaSet) and flags workloads with 2 or more. Live only
    (`svcdoctor scan`).

    ## Why it matters
    When the hook fails the kubelet sends SIGTERM at once: the pod gets no delay, and the
    endpoint race the hook was written to close is open at every rollout while the manifest
    looks correct. The usual reasons are an `exec` of `sh` or `sleep` in an image without
    them, or an `httpGet` to a port that is already closed.

    ## Example
    Bad:
    ```yaml
    # /app/drain.sh is not in this image: the hook exits 126 or 127
    lifecycle: {preStop: {exec: {command: ["/app/drain.sh"]}}}
    ```
    Good:
    ```yaml
    # nothing to find in the image
    lifecycle: {preStop: {sleep: {seconds: 5}}}
    ```

    ## Fix
    Use the native `sleep` action (Kubernetes 1.30 and later), which needs nothing in the
    image; on older clusters ship a static `sleep` binary and call it by path.

    ## References
    - https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/#hook-handler-execution
    - https://github.com/kubernetes/enhancements/issues/3960
    """
    live = inventory.live
    if live is None:
        return
    workloads = _workloads(inventory)
    for (ref, container), events in _events_by_workload(
        live, "FailedPreStopHook", workloads
    ).items():
        total = sum(e.count for e in events)
        if total < REPEATED:
            continue
        w = workloads[ref]
        name = container or (w.template.containers[0].name if w.template.containers else "app")
        found = next((c for c in w.template.containers if c.name == name), None)
        have = _prestop_sleep(w, name) or None
        # the hook fails: plan as for an image without a shell (the native sleep needs none)
        plan = (
            plan_shutdown(shutdown_facts(w, found, settings, current_prestop=have, shell=False))
            if found is not None
            else None
        )
        sleep = (plan.prestop_seconds if plan else 0) or have or settings.propagation_seconds
        if hook_kind(settings.kube_version, has_shell=False) is HookKind.IMPOSSIBLE:
            hook = PreStopHook(Handler.BINARY, seconds(sleep))
            note = (
                f"\n# Kubernetes {settings.kube_version_text} has no native sleep action: copy "
                "a static sleep binary to /sleep in the image"
            )
        else:
            hook, note = PreStopHook(Handler.SLEEP, seconds(sleep)), ""
        pods = _names(sorted({e.object.name for e in events}))
        yield Hit(
            w,
            f"FailedPreStopHook {total} times on {len({e.object for e in events})} pod(s) of "
            f"{w.ref} {_span(events)} ({pods}); last: {_latest(events).message.strip()!r}: "
            f"container {name!r} gets no delay before SIGTERM",
            fix=Fix(PodPatch(w.ref.kind, name, prestop=hook), note=note),
            container=name,
        )


@rule("SVD208", "readiness-flapping", Cause.BACKEND, Severity.WARNING, live=True)
def readiness_flapping(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Ready pods keep failing their readiness probe (repeated `Unhealthy` events).

    ## What it does
    Flags Service-backed workloads with pods that are Ready now but whose readiness probe
    failed 3 or more times recently (`Unhealthy` events, "Readiness probe failed"). Live
    only (`svcdoctor scan`).

    ## Why it matters
    A pod that flaps leaves and rejoins the Service's endpoints every few probe periods.
    Each flip is an endpoint change that every node and load balancer must apply: requests
    race the removal, and the failures that made the probe fail hit real traffic in
    between. One flapping pod of eight is a steady slice of errors.

    ## Example
    Bad:
    ```yaml
    readinessProbe:
      httpGet: {path: /readyz, port: 8080}
      timeoutSeconds: 1     # the app answers in 1.2 s under load
      failureThreshold: 1
    ```
    Good:
    ```yaml
    readinessProbe:
      httpGet: {path: /readyz, port: 8080}
      timeoutSeconds: 3
      periodSeconds: 5
      failureThreshold: 3
    ```

    ## Fix
    Find why the probe fails (`kubectl describe pod` shows the message: timeouts, 5xx from a
    dependency): fix the pod, or, when the failures are short hiccups, give the probe a
    timeout above the app's slow responses and a `failureThreshold` of 3.

    ## References
    - https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/
    - https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/#configure-probes
    """
    del settings
    live = inventory.live
    if live is None:
        return
    workloads = _workloads(inventory)
    grouped = _events_by_workload(live, "Unhealthy", workloads)
    for (ref, container), events in grouped.items():
        w = workloads[ref]
        if not inventory.services_of(w):
            continue
        flapping = [
            e
            for e in events
            if e.message.startswith("Readiness probe failed")
            and e.count >= FLAPPING
            and (pod := live.pod(e.object)) is not None
            and pod.ready
            and pod.deleted_at is None
            and _while_ready(e, pod)
        ]
        if not flapping:
            continue
        name = container or (w.template.containers[0].name if w.template.containers else "app")
        pods = _names(f"{e.object.name} {e.count}x" for e in flapping)
        yield Hit(
            w,
            f"readiness of container {name!r} failed {sum(e.count for e in flapping)} times "
            f"on {len(flapping)} Ready pod(s) of {w.ref} {_span(flapping)} ({pods}); last: "
            f"{_latest(flapping).message.strip()!r}: the pods flap in and out of Service "
            f"{service_names(inventory, w)}",
            fix=Fix(
                PodPatch(w.ref.kind, name, readiness=STEADIER_PROBE),
                note="\n# keep the probe's handler; first read why it fails: kubectl describe "
                "pod " + flapping[0].object.name,
            ),
            container=name,
        )


@rule("SVD209", "stale-endpoints", Cause.BACKEND, Severity.WARNING, live=True)
def stale_endpoints(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A Service keeps endpoints that stay not ready, or terminating past the grace period.

    ## What it does
    Flags Services whose EndpointSlices hold an endpoint that is `ready: false` (not
    terminating) whose pod has been not Ready for more than 5 minutes, or one that is
    `serving: true, terminating: true` after its pod's grace period has ended. Live only
    (`svcdoctor scan`).

    ## Why it matters
    A long not-ready endpoint is a backend that is broken rather than starting: the Service
    runs with less capacity than its replica count says, and clients or proxies that use
    endpoints regardless of readiness hit it. A terminating endpoint still marked serving
    after its grace period belongs to a pod the kubelet should have killed (a lost node, a
    stuck finalizer): kube-proxy still uses it when no ready endpoint is left, and ingress
    controllers and load balancers that track `serving` keep sending it traffic.

    ## Example
    Bad:
    ```yaml
    # kubectl get endpointslices -l kubernetes.io/service-name=api -o yaml
    endpoints:
      - addresses: ["10.244.1.7"]
        conditions: {ready: false, serving: true, terminating: true}
        targetRef: {kind: Pod, name: api-7d9f8b6c5-x2x9q}  # deleted 20 min ago, grace 30 s
    ```
    Good:
    ```yaml
    endpoints:
      - addresses: ["10.244.1.8"]
        conditions: {ready: true, serving: true, terminating: false}
    ```

    ## Fix
    Read why the pod is not ready (`kubectl describe pod`) and fix or delete it; for a pod
    stuck terminating, check its node (`kubectl get node`) and finalizers.

    ## References
    - https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#conditions
    - https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination-forced
    """
    del settings
    live = inventory.live
    if live is None:
        return
    for svc in inventory.services:
        slices = live.endpoints_of(svc.ref)
        if slices is None:
            continue
        stale: list[str] = []
        lingering: list[str] = []
        first: dict[str, str] = {}
        for ep in slices.endpoints:
            pod = live.pod(ObjectRef("Pod", svc.ref.namespace, ep.pod)) if ep.pod else None
            if pod is None:
                continue
            if ep.terminating and ep.serving and pod.grace_ends is not None:
                over = live.now - pod.grace_ends
                if over > LINGER_TOLERANCE:
                    lingering.append(f"{pod.ref.name} {_ago(over)} past its grace period")
                    first.setdefault("lingering", pod.ref.name)
            elif not ep.ready and not ep.terminating and pod.ready is False:
                since = pod.ready_since
                if since is not None and live.now - since > NOT_READY_SECONDS:
                    stale.append(f"{pod.ref.name} not ready for {_ago(live.now - since)}")
                    first.setdefault("stale", pod.ref.name)
        if not stale and not lingering:
            continue
        total = len(slices.endpoints)
        parts, fixes = [], []
        kubectl = f"kubectl -n {svc.ref.namespace}"
        if stale:
            parts.append(f"{len(stale)} of {total} endpoints not ready ({_names(stale)})")
            fixes.append(
                f"{kubectl} describe pod {first['stale']}\n# fix what its readiness probe "
                "reports, or delete the pod so that its controller replaces it"
            )
        if lingering:
            parts.append(f"{len(lingering)} terminating but still serving ({_names(lingering)})")
            fixes.append(
                f"{kubectl} get pod {first['lingering']} -o jsonpath='{{.spec.nodeName}} "
                "{.metadata.finalizers}'\n# stuck terminating: check that node (kubectl get "
                "node) and the finalizers;\n# only when the node is gone for good: "
                f"{kubectl} delete pod {first['lingering']} --grace-period=0 --force"
            )
        yield Hit(
            svc,
            f"Service {svc.ref.name} keeps stale endpoints: " + "; ".join(parts),
            fix=Fix(note="\n".join(fixes)),
        )


@rule(
    "SVD210",
    "endpoints-miss-ready-pods",
    Cause.BACKEND,
    Severity.WARNING,
    live=True,
    absence=True,
)
def endpoints_miss_ready_pods(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The Service's EndpointSlices hold fewer ready endpoints than its workload has ready pods.

    ## What it does
    For each Service, compares the ready pods of the workloads behind it (the owners of the
    pods in its endpoints, or the workloads its selector matches when it has none) with the
    ready endpoints of its EndpointSlices, and names the Ready pods that are missing, with
    the likely reason: pod labels that the selector does not match, or a `targetPort` the
    pod does not expose. Live only (`svcdoctor scan`).

    ## Why it matters
    A Ready pod missing from the endpoints takes no traffic: the Service runs below the
    capacity the replica count promises, and when the missing pods are the new ones of a
    rollout, every old pod removed takes capacity that is not replaced. It is the cluster's
    view of a selector or port mistake that manifests alone may not show (labels changed by
    hand, a template edited outside Git).

    ## Example
    Bad:
    ```yaml
    kind: Service
    spec:
      selector: {app: api, track: stable}
    ---
    kind: Deployment
    spec:
      template:
        metadata:
          labels: {app: api}          # new pods lack track: stable
    ```
    Good:
    ```yaml
    kind: Deployment
    spec:
      template:
        metadata:
          labels: {app: api, track: stable}
    ```

    ## Fix
    Give the pod template every label of the selector (or narrow the selector), and make
    `targetPort` a port (number or name) every backing container declares.

    ## References
    - https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/
    - https://kubernetes.io/docs/concepts/services-networking/service/#defining-a-service
    """
    del settings
    live = inventory.live
    if live is None:
        return
    for svc in inventory.services:
        if svc.selector is None or svc.type == "ExternalName":
            continue
        slices = live.endpoints_of(svc.ref)
        in_slices = {e.pod for e in slices.ready if e.ported} if slices else set()
        for w in inventory.targeted(svc):
            running = [p for p in live.pods_of(w.ref) if p.ready and p.deleted_at is None]
            # a Service may select some pods on purpose (one StatefulSet pod, a canary
            # track): only when it matches none of them are the labels the problem
            matching = [p for p in running if selector_matches(svc.selector, p.labels)]
            ready = matching or running
            missing = [p for p in ready if p.ref.name not in in_slices]
            if not missing:
                continue
            count = len([e for e in slices.ready if e.ported]) if slices else 0
            unmatched = [] if matching else missing
            why, fix = _missing_reason(svc, w, unmatched)
            yield Hit(
                svc,
                f"EndpointSlices of Service {svc.ref.name} hold {count} ready endpoint(s) "
                f"with a port, but {w.ref} has {len(ready)} ready pod(s); not in the Service: "
                f"{_names(p.ref.name for p in missing)} ({why})",
                fix=fix,
            )


def _missing_reason(svc: Service, w: Workload, unmatched: list[PodFacts]) -> tuple[str, Fix]:
    assert svc.selector is not None
    if unmatched:
        labels = unmatched[0].labels
        lacking = {k: v for k, v in svc.selector.items() if labels.get(k) != v}
        shown = ", ".join(f"{k}={v}" for k, v in lacking.items())
        return (
            f"their labels lack {shown} of the selector",
            Fix(
                ObjectPatch({"spec": {"template": {"metadata": {"labels": lacking}}}}),
                note=f"\n# on {w.ref} (and relabel running pods), or drop {shown} from the "
                "selector",
            ),
        )
    ports = [
        p
        for p in svc.ports
        if isinstance(p.target, str) and not any(serves(c, p.target) for c in w.template.containers)
    ]
    if ports:
        names = ", ".join(str(p.target) for p in ports)
        declared = [cp for c in w.template.containers for cp in c.ports]
        target: int | str = (declared[0].name or declared[0].number) if declared else "PORT"
        return (
            f"targetPort {names} is not a port of the pods",
            Fix(ObjectPatch({"spec": {"ports": [{"port": ports[0].port, "targetPort": target}]}})),
        )
    return (
        "the endpoints lag the pods: if it persists, check the EndpointSlice controller",
        Fix(
            note=f"kubectl -n {svc.ref.namespace} get endpointslices "
            f"-l kubernetes.io/service-name={svc.ref.name} -o yaml"
        ),
    )


@rule("SVD403", "conntrack-limits-lowered", Cause.INFRA, Severity.WARNING, live=True)
def conntrack_limits_lowered(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """kube-proxy sets the conntrack table smaller than its defaults.

    ## What it does
    Reads `conntrack` of kube-proxy's configuration (`kube-system/kube-proxy` ConfigMap) and
    flags `maxPerCore` below 32768 or `min` below 131072 (0 leaves the kernel's limit and is
    fine). Live only (`svcdoctor scan`).

    ## Why it matters
    kube-proxy sizes `nf_conntrack_max` from these values at start. Every Service connection
    through a node takes a conntrack entry; when the table is full the kernel drops new
    connections (`nf_conntrack: table full, dropping packet`): random, node-local failures
    that look like a flaky network and spike with traffic, not with deployments.

    ## Example
    Bad:
    ```yaml
    conntrack:
      maxPerCore: 8192
      min: 32768
    ```
    Good:
    ```yaml
    conntrack:
      maxPerCore: 32768
      min: 131072
    ```

    ## Fix
    Restore the defaults (or size them for your connection rate) in the ConfigMap and
    restart kube-proxy; `svcdoctor diagnose` on `dmesg` output shows whether tables filled.

    ## References
    - https://kubernetes.io/docs/reference/config-api/kube-proxy-config.v1alpha1/#kubeproxy-config-k8s-io-v1alpha1-KubeProxyConntrackConfiguration
    - https://www.kernel.org/doc/html/latest/networking/nf_conntrack-sysctl.html
    """
    del settings
    live = inventory.live
    if live is None or live.proxy is None:
        return
    proxy = live.proxy
    low: dict[str, int] = {}
    found: list[str] = []
    per_core, minimum = proxy.conntrack_max_per_core, proxy.conntrack_min
    if per_core and per_core < DEFAULT_CONNTRACK_MAX_PER_CORE:
        low["maxPerCore"] = DEFAULT_CONNTRACK_MAX_PER_CORE
        found.append(f"maxPerCore {per_core}")
    if minimum and minimum < DEFAULT_CONNTRACK_MIN:
        low["min"] = DEFAULT_CONNTRACK_MIN
        found.append(f"min {minimum}")
    if not low:
        return
    yield Hit(
        proxy,
        f"kube-proxy's conntrack {' and '.join(found)} are below the defaults: nodes drop new "
        "connections once the table is full (nf_conntrack: table full)",
        fix=Fix(
            ObjectPatch({"conntrack": low}),
            note="\n# in config.conf of ConfigMap kube-system/kube-proxy, then restart kube-proxy",
        ),
    )
