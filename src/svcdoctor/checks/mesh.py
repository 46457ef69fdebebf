"""Mesh and datapath checks (``SVD113``-``SVD115``): the pod's own proxy must outlive the
app's shutdown, its settings must be readable, and Cilium's kube-proxy replacement changes
the race.

The facts (each cited where it is used): Istio's agent, on SIGTERM, drains Envoy's inbound
listeners and kills Envoy when ``terminationDrainDuration`` ends, whatever the app does
(istio/istio pkg/envoy/agent.go; istio #36631); with ``EXIT_ON_ZERO_ACTIVE_CONNECTIONS`` it
waits ``MINIMUM_DRAIN_DURATION`` and exits at the first moment no connection is open
(istio #44690). Linkerd's ``proxy-wait-before-exit-seconds`` is a preStop sleep on the
proxy; after it the proxy refuses new requests (linkerd.io graceful-shutdown; linkerd2
#11084). A native sidecar (an init container with ``restartPolicy: Always``) is stopped
after the app: no drain setting is needed (Istio: ``sidecar.istio.io/nativeSidecar``, the
default from 1.27 on kubelets >= 1.33, istio/istio pilot/pkg/features/pilot.go; Linkerd:
``config.linkerd.io/proxy-enable-native-sidecar``, the default from 2.20 / edge-26.5.2,
linkerd2 commit 009a25fa3).
"""

from __future__ import annotations

from collections.abc import Iterator

from svcdoctor.checks._backends import service_names
from svcdoctor.checks._carrying import racing
from svcdoctor.checks._shutdown import container_drain, run_paths, seconds, shutdown_facts
from svcdoctor.checks.race import no_delay_helps, race_plan
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.model import Cause, Container, Inventory, Severity, Workload
from svcdoctor.model.hops import ISTIO_NATIVE, LINKERD_NATIVE, Hop, Implementation
from svcdoctor.model.patch import Fix, FixAvailability, ObjectPatch, note, pod_path
from svcdoctor.model.remedy import (
    HopChange,
    HopSetting,
    plan_hops,
    sidecar_drain_needed,
)

# Kubernetes' native sidecar containers: beta and on by default in 1.29 (linkerd2 commit
# 009a25fa3: "requires Kubernetes v1.29 or later"), GA in 1.33 (Istio's `auto` threshold,
# istio/istio pkg/kube/inject/webhook.go DetectNativeSidecar).
NATIVE_SIDECAR_VERSION = (1, 29)
_WHAT_FAILS = {
    Implementation.ISTIO_SIDECAR: "Envoy is gone: later requests and the app's outbound calls "
    "fail (istio #36631), unless the proxy runs as a native sidecar (Istio's default from "
    "1.27 on kubelets >= 1.33)",
    Implementation.LINKERD_PROXY: "the proxy refuses new requests: later requests and the "
    "app's outbound calls fail (linkerd2 #11084), unless the proxy runs as a native sidecar "
    "(Linkerd's default from 2.20)",
}
_NATIVE = {
    Implementation.ISTIO_SIDECAR: (
        ISTIO_NATIVE,
        "Istio's default from 1.27 on kubelets >= 1.33",
    ),
    Implementation.LINKERD_PROXY: (
        LINKERD_NATIVE,
        "Linkerd's default from 2.20 / edge-26.5.2; it ignores proxy-wait-before-exit-seconds",
    ),
}


def _by_workload(inventory: Inventory) -> dict[int, tuple[Workload, list[Container]]]:
    """The serving containers of each workload that may outlive the proxy: not one without
    a preStop that no delay would help (SVD101 adds none: a lone Redis stops at SIGTERM;
    demo-servicemesh, judge146)."""
    out: dict[int, tuple[Workload, list[Container]]] = {}
    for w, c in racing(inventory):
        if c.prestop is None and no_delay_helps(inventory, w, c):
            continue
        out.setdefault(id(w), (w, []))[1].append(c)
    return out


def _drain_setting(
    w: Workload, containers: list[Container], hop: Hop, settings: Settings
) -> tuple[HopSetting, bool, int] | None:
    """The sidecar's drain setting the most demanding serving container needs, whether it
    is short only of the requests the app may still finish after SIGTERM (its preStop
    and known drain covered, the app not known to drain: it may exit at once, katib-ui,
    hotrod; judge201, judge216) and the grace period the pod then needs (``None``: the drain
    is long enough)."""
    best: tuple[HopSetting, bool, int] | None = None
    for c in containers:
        sleep = c.prestop.sleep_seconds if c.prestop else None
        plan = race_plan(w, c, settings, sleep)
        facts = shutdown_facts(w, c, settings, sleep)
        for s in plan_hops(plan, facts, (hop,), w.ref, w.template.annotations):
            if s.change is not HopChange.SIDECAR_DRAIN:
                continue
            need = sidecar_drain_needed(plan, facts, hop)
            # the kubelet must not SIGKILL the proxy before its drain ends
            grace = max(plan.grace_seconds, seconds(need + settings.margin_seconds))
            taking = plan.prestop_seconds + (facts.drain_seconds or 0.0)
            have = hop.drain.seconds if hop.drain else 0.0
            tail = have >= taking and container_drain(settings, w, c) is None
            if best is None or grace > best[2]:
                best = (s, tail, grace)
    return best


def _native_note(hop: Hop, settings: Settings) -> str:
    key, default = _NATIVE[hop.implementation]
    version = settings.kube_version
    where = (
        f"not on Kubernetes {settings.kube_version_text}: it needs >= 1.29"
        if version is not None and version < NATIVE_SIDECAR_VERSION
        else "Kubernetes >= 1.29"
    )
    return (
        f"\n# better, where the cluster has them ({where}): run the proxy as a native sidecar, "
        f'stopped after the app,\n#   {key}: "true"  ({default})'
    )


def _annotations_patch(w: Workload, key: str, value: str, grace: int | None) -> ObjectPatch:
    """The pod template's annotation (and grace period) as a strategic merge."""
    pod = pod_path(w.ref.kind)
    template: dict[str, object] = {"metadata": {"annotations": {key: value}}}
    if grace is not None:
        template[pod[-1]] = {"terminationGracePeriodSeconds": grace}
    body: dict[str, object] = template
    for part in reversed(pod[:-1]):
        body = {part: body}
    return ObjectPatch(body)


@rule("SVD113", "sidecar-stops-before-app", Cause.RACE, Severity.WARNING, fix=FixAvailability.SAFE)
def sidecar_stops_before_app(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The pod's mesh proxy stops before the app has finished its shutdown.

    ## What it does
    Flags Service-backed workloads whose pods get an Istio or Linkerd proxy as a regular
    (not native) sidecar, when the proxy's drain ends before the app is done: before the
    preStop sleep, the app's own drain (`drains`) and the longest request
    (`--max-request-seconds`) have passed. Injection is seen on the pod (label
    `sidecar.istio.io/inject: "true"`, an `istio.io/rev` label, annotation
    `linkerd.io/inject: enabled`) or on its Namespace (label `istio-injection: enabled` or
    `istio.io/rev`, annotation `linkerd.io/inject: enabled`). The drain read is Istio's
    `terminationDrainDuration` (default 5 s) from `proxy.istio.io/config`, or, with
    `EXIT_ON_ZERO_ACTIVE_CONNECTIONS`, its `MINIMUM_DRAIN_DURATION` (default 5 s), which
    must cover the preStop and the app's drain; Linkerd's
    `config.alpha.linkerd.io/proxy-wait-before-exit-seconds` (default 0). Pods that ask
    for a native sidecar (`sidecar.istio.io/nativeSidecar: "true"`,
    `config.linkerd.io/proxy-enable-native-sidecar: "true"`) are not flagged, nor a
    container without a preStop that SVD101 asks none of (a lone Redis: no delay would
    help, so it stops at SIGTERM while the proxy still drains); a setting that cannot be
    read is SVD114's; nor a drain that covers the preStop and the app's known drain and is
    short only of the longest request, for an app not known to drain (`drains`): one that
    exits at SIGTERM finishes no request, and gains nothing (as an info worded as a
    condition, judged right 29 times in 58 on public repositories).

    ## Why it matters
    A regular sidecar gets SIGTERM at the same moment as the app, while the app's preStop
    is still sleeping. Istio's agent then drains Envoy and kills it when
    `terminationDrainDuration` ends, whatever the app does; with
    `EXIT_ON_ZERO_ACTIVE_CONNECTIONS` it exits at the first moment no connection is open,
    even while new requests are still on their way. Linkerd's proxy refuses new requests
    once its wait is over. Either way the requests that still reach the pod during the
    preStop, and the app's own outbound calls while it finishes its last requests, fail
    with 503s or connection errors: the race the preStop was written to close reopens
    one hop further in.

    ## Example
    Bad:
    ```yaml
    template:
      metadata:
        labels: {sidecar.istio.io/inject: "true"}
      spec:
        containers:
          - name: api
            lifecycle: {preStop: {sleep: {seconds: 10}}}
    ```
    Good:
    ```yaml
    template:
      metadata:
        labels: {sidecar.istio.io/inject: "true"}
        annotations:
          proxy.istio.io/config: "terminationDrainDuration: 20s"
      spec:
        containers:
          - name: api
            lifecycle: {preStop: {sleep: {seconds: 10}}}
    ```

    ## Fix
    Set the proxy's drain to preStop + the app's drain + the longest request (Istio
    `terminationDrainDuration` in `proxy.istio.io/config`, the annotation's other
    ProxyConfig fields kept; Linkerd `config.alpha.linkerd.io/proxy-wait-before-exit-seconds`),
    or, with `EXIT_ON_ZERO_ACTIVE_CONNECTIONS`, `MINIMUM_DRAIN_DURATION` to preStop + the
    app's drain; and keep `terminationGracePeriodSeconds` above it with a margin. Better,
    on Kubernetes 1.29 and later: run the proxy as a native sidecar
    (`sidecar.istio.io/nativeSidecar: "true"`, Istio's default from 1.27 on 1.33 kubelets;
    `config.linkerd.io/proxy-enable-native-sidecar: "true"`, Linkerd's default from 2.20),
    which the kubelet stops after the app.

    ## References
    - https://github.com/istio/istio/issues/36631
    - https://github.com/istio/istio/issues/44690
    - https://istio.io/latest/docs/reference/config/istio.mesh.v1alpha1/#ProxyConfig
    - https://istio.io/latest/blog/2023/native-sidecars/
    - https://linkerd.io/2-edge/tasks/graceful-shutdown/
    - https://github.com/linkerd/linkerd2/issues/11084
    - https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/
    """
    paths = run_paths(inventory, settings)
    for w, containers in _by_workload(inventory).values():
        hop = paths.sidecar(w)
        if hop is None or hop.native or hop.problems:
            continue
        found = _drain_setting(w, containers, hop, settings)
        if found is None:
            continue
        setting, tail, grace = found
        if tail:
            continue  # short only of a request the app may not finish: not shown (judge489)
        have = w.template.effective_grace_seconds
        raise_grace = grace if grace > have else None
        also = f" and terminationGracePeriodSeconds {grace}" if raise_grace else ""
        fails = _WHAT_FAILS[hop.implementation]
        yield Hit(
            w,
            f"Service {service_names(inventory, w)}: {setting.why}: "
            f"{fails}; set {setting.key}: {setting.value!r}{also}",
            fix=Fix(
                _annotations_patch(w, setting.key, setting.value, raise_grace),
                note=_native_note(hop, settings),
            ),
            line=w.template.line,
        )


@rule("SVD114", "unreadable-mesh-setting", Cause.RACE, Severity.WARNING)
def unreadable_mesh_setting(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A mesh proxy setting on the pod cannot be read.

    ## What it does
    Flags pod template annotations of a mesh-injected workload that svcdoctor (and the
    mesh) cannot read: `proxy.istio.io/config` that is not YAML or not a mapping of
    ProxyConfig fields, a `terminationDrainDuration` or `MINIMUM_DRAIN_DURATION` that is
    not a duration with a unit (`20s`, not `20`), a
    `config.alpha.linkerd.io/proxy-wait-before-exit-seconds` that is not whole seconds.
    The finding names the object and the annotation; the proxy's drain is then not
    checked (SVD113 skips the workload) rather than guessed.

    ## Why it matters
    These annotations decide how long the pod's proxy keeps working after the pod is
    deleted. Written wrong, the value the author meant cannot be the one in force: at best
    the proxy keeps its default drain (Istio 5 s, Linkerd none) and cuts the app's last
    requests and outbound calls, while the manifest looks as though it was handled.

    ## Example
    Bad:
    ```yaml
    annotations:
      proxy.istio.io/config: "terminationDrainDuration: 20"
    ```
    Good:
    ```yaml
    annotations:
      proxy.istio.io/config: "terminationDrainDuration: 20s"
    ```

    ## Fix
    Write `proxy.istio.io/config` as a YAML mapping of ProxyConfig fields with Go
    durations (`terminationDrainDuration: 20s`; `proxyMetadata` values are strings), and
    Linkerd's wait as whole seconds (`"20"`); then run svcdoctor again to check the drain
    against the app's shutdown (SVD113).

    ## References
    - https://istio.io/latest/docs/reference/config/annotations/#ProxyConfig
    - https://istio.io/latest/docs/reference/config/istio.mesh.v1alpha1/#ProxyConfig
    - https://linkerd.io/2-edge/reference/proxy-configuration/
    - https://pkg.go.dev/time#ParseDuration
    """
    paths = run_paths(inventory, settings)
    for w in inventory.workloads:
        seen: set[str] = set()
        for path in paths.of(w):
            for hop in path.hops:
                for problem in hop.problems:
                    if problem in seen:
                        continue
                    seen.add(problem)
                    yield Hit(
                        w,
                        f"{problem}: the value meant cannot be the one in force, and the "
                        "proxy's drain is not checked against the app's shutdown (SVD113)",
                        fix=note(_unreadable_hint(hop)),
                        line=w.template.line,
                    )


def _unreadable_hint(hop: Hop) -> str:
    if hop.implementation is Implementation.LINKERD_PROXY:
        return (
            "# whole seconds, quoted:\n"
            '#   config.alpha.linkerd.io/proxy-wait-before-exit-seconds: "20"'
        )
    return (
        "# a YAML mapping of ProxyConfig fields with Go durations, e.g.\n"
        "#   proxy.istio.io/config: |\n"
        "#     terminationDrainDuration: 20s\n"
        "#     proxyMetadata: {EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true', "
        "MINIMUM_DRAIN_DURATION: 15s}"
    )


@rule("SVD115", "ebpf-datapath-terminating-endpoints", Cause.RACE, Severity.INFO, live=True)
def ebpf_datapath_terminating_endpoints(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Cilium replaces kube-proxy: terminating pods get no new connections at all.

    ## What it does
    On a live cluster (`scan`) whose `cilium-config` ConfigMap turns on Cilium's
    kube-proxy replacement (`kube-proxy-replacement: "true"`, or `strict` before Cilium
    1.14), notes for each Service-backed workload what changes for the shutdown race, and
    what it means for the workload's rollouts. `lint` finds nothing for it: the datapath is
    a fact of the cluster, not of the manifests.

    ## Why it matters
    kube-proxy sends new connections to terminating endpoints when a Service has no ready
    one left (KEP-1669, GA in 1.28), so a single-replica rollout still reaches the old pod
    during its preStop. Cilium's replacement removes a terminating endpoint from its
    datapath for new connections as soon as the agent sees the update, while connections
    already open keep their backend (socket-LB picks it at `connect()`) and may finish:
    a Service whose every pod is terminating drops new connections (cilium #32815), and
    the agent still learns of the deletion at the same time as the kubelet sends SIGTERM,
    so the preStop delay is still needed. Cilium 1.18 keeps terminating backends in its
    BPF state to avoid disrupting their connections (cilium #42708). Its Envoy-based
    layer-7 load balancer (`service.cilium.io/lb-l7`) was seen sending to terminating pods
    during rollouts (cilium #34991).

    ## Example
    Bad:
    ```yaml
    # cilium-config: kube-proxy-replacement: "true"
    replicas: 1
    strategy: {rollingUpdate: {maxUnavailable: 1, maxSurge: 0}}
    ```
    Good:
    ```yaml
    # cilium-config: kube-proxy-replacement: "true"
    replicas: 2
    strategy: {rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
    ```

    ## Fix
    Keep the preStop sleep (SVD101, SVD103): Cilium's agent learns of the deletion no
    sooner than kube-proxy would. Make sure a ready replica exists through every rollout
    (`maxUnavailable: 0`, at least two replicas, a PodDisruptionBudget): under Cilium no
    new connection reaches a terminating pod, even when it is the last one. Clients with
    long-lived connections should reconnect on errors: their connections stay on the old
    pod until it closes them.

    ## References
    - https://docs.cilium.io/en/stable/network/kubernetes/kubeproxy-free/#graceful-termination
    - https://github.com/cilium/cilium/issues/32815
    - https://github.com/cilium/cilium/issues/34991
    - https://github.com/cilium/cilium/pull/42708
    - https://github.com/kubernetes/enhancements/tree/master/keps/sig-network/1669-proxy-terminating-endpoints
    """
    live = inventory.live
    if live is None or live.datapath != Implementation.CILIUM.value:
        return
    paths = run_paths(inventory, settings)
    for w, _ in _by_workload(inventory).values():
        if not any(h.implementation is Implementation.CILIUM for p in paths.of(w) for h in p.hops):
            continue
        replicas = inventory.replicas(w)
        alone = (replicas is not None and replicas <= 1) or w.strategy == "Recreate"
        rollout = (
            f"with {replicas} replica(s) and strategy {w.strategy or 'RollingUpdate'},"
            " its rollouts leave no ready pod, and new connections are dropped until the "
            "new pod is ready (kube-proxy would still send them to the terminating one)"
            if alone
            else "a ready replica stays through its rollouts, so new connections go there"
        )
        yield Hit(
            w,
            f"Cilium's kube-proxy replacement serves Service {service_names(inventory, w)}: "
            "a terminating pod gets no new connections, open ones stay on it until closed; "
            f"{rollout}; the preStop delay is still needed (the agent learns of the deletion "
            "as SIGTERM is sent)",
            fix=note(_cilium_hint(alone)),
            line=w.template.line,
        )


def _cilium_hint(alone: bool) -> str:
    steps = [
        "# keep the preStop sleep (SVD101/SVD103): Cilium learns of the deletion no sooner "
        "than kube-proxy would"
    ]
    if alone:
        steps.append(
            "# keep a ready replica through rollouts: replicas >= 2, strategy.rollingUpdate "
            "{maxUnavailable: 0, maxSurge: 1}, a PodDisruptionBudget"
        )
    steps.append("# clients on long-lived connections: reconnect on errors (connections stay)")
    return "\n".join(steps)
