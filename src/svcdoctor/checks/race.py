"""Race checks (``SVD1xx``): the pod stops serving before every node stops routing to it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from svcdoctor.checks._backends import service_names
from svcdoctor.checks._carrying import (
    carrying_services,
    racing,
    unserved,
    webhook_budget,
)
from svcdoctor.checks._clients import found_by_clients
from svcdoctor.checks._scripts import SHELLS
from svcdoctor.checks._serving import argv_of, backed, upstreams
from svcdoctor.checks._shutdown import (
    container_drain,
    image_shell,
    readiness_first,
    seconds,
    shutdown_facts,
    sleep_note,
)
from svcdoctor.checks.drains import KnownDrain
from svcdoctor.checks.election import leader_served
from svcdoctor.checks.images import image_pid1
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.rollout import (
    lone_keeper,
    lone_pod,
    stops_first_on_purpose,
    until_replicated,
)
from svcdoctor.checks.settings import Settings, known_app
from svcdoctor.checks.shells import shell_parent
from svcdoctor.checks.signals import unhandled_pid1
from svcdoctor.model import MIN_SHUTDOWN_WINDOW, Cause, Container, Inventory, Severity, Workload
from svcdoctor.model.patch import Fix, FixAvailability, Handler, PodPatch, PreStopHook
from svcdoctor.model.remedy import (
    HookKind,
    ShutdownPlan,
    cuts_requests,
    hook_kind,
    meet_plan,
    needed_grace,
    plan_shutdown,
    planned_hook,
)

# A preStop command that starts the app's own drain: NATS' lame duck mode keeps the server's
# clients while it moves them to the other servers, then exits; the NATS chart's preStop
# (https://docs.nats.io/running-a-nats-service/nats_admin/lame_duck_mode)
_DRAIN_HOOK = re.compile(r"(^|[/\s])nats-server\s.*(-sl|--signal)[= ]ldm\b")


def _delays(c: Container) -> bool:
    """Whether the container's preStop hook waits (a sleep, an httpGet the app answers, or a
    command that starts the app's own drain: ``_DRAIN_HOOK``)."""
    hook = c.prestop
    return bool(
        hook
        and (
            hook.handler in ("sleep", "httpGet")
            or hook.sleep_seconds
            or _DRAIN_HOOK.search(" ".join(hook.command))
        )
    )


def no_delay_helps(inventory: Inventory, w: Workload, c: Container) -> bool:
    """Whether a preStop delay would lose no fewer requests: the Services reach no listener
    of the container, its clients find its pods themselves (``found_by_clients``), or no
    endpoint that holds its data ever takes over (``lone_keeper``: a data store's surge pod
    starts empty, a stateful lone pod goes first or cannot share its claim)."""
    return (
        unserved(inventory, w, c)
        or found_by_clients(inventory, w, c)
        or (lone_pod(inventory, w) and stops_first_on_purpose(w))
        or lone_keeper(inventory, w)
        or _node_local(inventory, w)
    )


def _node_local(inventory: Inventory, w: Workload) -> bool:
    """Whether each node's clients reach only the node's own pod (every Service that
    carries requests to it is ``internalTrafficPolicy: Local``) and that pod is a DaemonSet's
    that cannot surge (``maxSurge`` 0, the default, or a pod that cannot share its node): its
    replacement starts after it is gone, and kube-proxy keeps sending a node's clients to its
    terminating pod while it serves, having no other (KEP-1669), so a delay only moves the
    node's gap (Splunk's OpenTelemetry agent, on the host's network; judge326)."""
    if w.ref.kind != "DaemonSet" or (
        w.max_surge not in (None, 0, "0", "0%") and not w.template.apart
    ):
        return False
    carrying = carrying_services(inventory, w)
    return bool(carrying) and all(s.internal_traffic_policy == "Local" for s in carrying)


def race_plan(
    w: Workload,
    c: Container,
    settings: Settings,
    current_prestop: float | None = None,
    *,
    shell: bool | None = None,
) -> ShutdownPlan:
    """The plan the race rules fix to: the plan the settings carry (a diagnosis', taken as
    given and met with the container's facts: no window planned again), else lint's plan
    under its assumptions."""
    facts = shutdown_facts(w, c, settings, current_prestop, shell=shell)
    return plan_shutdown(facts) if settings.plan is None else meet_plan(settings.plan, facts)


# Images a build step names later: a variable (`${HISTORY_SERVER_IMAGE}`; kuberay, judge211),
# ko's import path (`ko://github.com/...`; kube-green, tektoncd/dashboard: judge205, judge208),
# kubebuilder's `controller` that `kustomize edit set image` replaces (mariadb-operator;
# judge187)
_PLACEHOLDER_IMAGE = re.compile(r"[${}]|^ko://|^controller$")


def _own_wait(known: KnownDrain, seconds: float) -> str:
    """The app's own flag for its wait after SIGTERM, instead of the sleep (no shell needed:
    OPA's --shutdown-wait-period), or ""."""
    if known.flag is None:
        return ""
    value = f"{seconds:g}s" if known.flag.endswith("-duration") else f"{seconds:g}"
    return f"\n# or, instead of the sleep, let the app wait by itself: {known.flag}={value}"


def _drains_hint(w: Workload, c: Container) -> str:
    """How to tell svcdoctor that this app waits by itself (the ``drains`` config key): by
    its image, or by its workload where the image is a placeholder a build fills in."""
    repo = c.image.split("@", 1)[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    if _PLACEHOLDER_IMAGE.search(repo):
        repo = ""
    pattern = repo or f"{w.ref.kind.lower()}/{w.ref.name}"
    return (
        "\n# or, if the app itself keeps serving for a while after SIGTERM, say so in the "
        f'config:\n#   [tool.svcdoctor]\n#   drains = ["{pattern}"]'
    )


@rule("SVD101", "no-prestop-delay", Cause.RACE, Severity.WARNING, fix=FixAvailability.SAFE)
def no_prestop_delay(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A Service-backed container stops serving as soon as it is told to stop.

    ## What it does
    Flags containers behind a Service that have no preStop delay: no `lifecycle.preStop.sleep`, no
    `exec` hook that sleeps (`sleep $DRAIN_SECONDS` counts the value the container's `env` gives the
    variable), no `httpGet` hook, and no hook that starts the app's own drain (NATS' lame duck mode:
    `nats-server --signal ldm=PIDFILE`, as the NATS chart's preStop runs it:
    https://docs.nats.io/running-a-nats-service/nats_admin/lame_duck_mode). Apps listed under
    `drains` in the configuration (they keep serving for a while after SIGTERM by themselves) are
    not flagged, unless the configuration gives their seconds (`drains = {"deployment/payments-*" =
    3}`) and those are shorter than `--propagation-seconds`: then the sleep asked for is the
    difference. Apps the configuration does not name are looked up in svcdoctor's list of well-known
    apps that drain by themselves, read from their code (Knative webhooks, activator and Eventing
    servers 45 s, skipper 45 s, Istio's proxy 5 s (also pilot-agent started as `proxy
    router|sidecar` from another image), the KEDA HTTP add-on's interceptor 5 s, podinfo 3 s from
    2.0.0, Argo's rollouts-demo 10 s, kube-ops-view 10 s, Sourcegraph's frontend 5 s, kubenurse 5 s,
    parapet's ingress controller and edge proxy 30 s, ingress-nginx with `--shutdown-grace-period`,
    agnhost's netexec with `--delay-shutdown`, OPA with `--shutdown-wait-period` (where such an app
    has a flag for it, the fix offers it in place of the sleep), Agones' extensions and allocator
    with `READINESS_SHUTDOWN_DURATION`, any server whose probes send knative.dev/pkg's
    `K-Kubelet-Probe` header, built on that library's Drainer, 45 s, and any given the Kubernetes
    API server library's `--shutdown-delay-duration`, also in the `sh -c` script it execs; see the
    configuration docs), and the drain a mounted configuration in the same files sets (CoreDNS's
    `health { lameduck 5s }` in the Corefile ConfigMap its container mounts:
    https://coredns.io/plugins/health/; an API server's `shutdown-delay-duration` in the config file
    its ConfigMap holds). Whether any other app keeps serving after SIGTERM cannot be seen in a
    manifest: the message says so rather than asserting that it stops. Behind headless Services
    only, no node routes: the message says the clients that resolved the pod's address from DNS
    still connect to it. Containers that serve nothing (`sleep infinity`, `tail -f /dev/null`, test
    clients, a chart's `helm.sh/hook` Pods) are not flagged, nor are pods behind Services that carry
    no requests (every port a metrics, profiling or probe port: `metrics`, `http-metrics`,
    `metrics-https`, `prometheus`, `http-profiling`, `pprof`, `diagnostics`, `probes`, `healthz`…,
    by port or target name, or kube-scheduler's and kube-controller-manager's secure ports 10259 and
    10257, or the port of the pod's `--metrics-bind-address` (kubebuilder v2's `--metrics-addr`,
    `:8080` by default), or a kube-rbac-proxy port whose upstream is it, or the
    prometheus-operator's own port, which no webhook calls, or kubebuilder v1's leftover
    `controller-manager-service` (or a Service with its `controller-tools.k8s.io` selector) that no
    webhook calls and whose port no container declares, or one in front of knative.dev/pkg
    controllers that declare no port and no webhook calls; or a headless Service of the members' own
    ports only, `transport`, `peer`, `gossip`, `intra-node`…, peer discovery; or a headless Service
    without ports (or only ports its pods do not declare) that nothing in the inputs dials, which
    only names its pods in DNS; or an xDS port, `grpc-xds`, whose Envoys keep their last
    configuration while the stream is down; or an exporter's, cAdvisor's, kube-state-metrics', an
    ingress default backend's or Locust's), and no route sends to it: a scraper that misses one
    scrape is no failed request), nor containers the Service cannot reach (SVD205: a `targetPort`
    name no container declares, or a number a stock image as shipped does not listen on, or a port
    its server leaves off by default: Kong's ingress controller's admission port without
    `--admission-webhook-listen`), nor behind Services whose only clients are admission webhooks
    with `failurePolicy: Ignore` (the API server then admits without them; the VPA admission
    controller, Kubeflow Pipelines' cache server, numaflow's and Argo Events' webhooks, OpenShift's
    cluster-autoscaler-operator and cluster-baremetal-operator register theirs so at run time), nor
    NFS and SMB servers (kernel mounts retry by themselves), nor a DaemonSet that cannot surge whose
    Services are all `internalTrafficPolicy: Local` (a node's clients have no pod but the node's
    own, which kube-proxy keeps sending to while it terminates): a delay fixes nothing there. When
    the grace period is also too short for the longest request, the message and the fix say so
    (SVD102 then stays quiet). Nor are Cassandra and ScyllaDB members and Memcached servers (their
    clients hash keys over the servers they list and take an error for a miss) behind headless
    Services only (their drivers find the members and follow them, the Service only seeds them), nor
    MongoDB replica set members (`--replSet`) behind any Service (the drivers connect to the hosts
    the set's configuration lists), nor the ingesters, store-gateways and compactors of Loki, Mimir,
    Cortex, Pyroscope and Phlare (`-target=ingester`: their clients dial the members their hash ring
    lists, and a stopping one leaves the ring while it still answers; compactors serve no client),
    nor Redis Cluster nodes (`--cluster-enabled yes`, or `--cluster-announce-ip`, which only cluster
    mode reads) behind any Service (clients send each key to the node that owns its slot, at its
    announced address), nor apps found through a service registry (as for SVD201), nor pods whose
    Services publish not-ready addresses (as for SVD201), nor a StatefulSet's pods that the inputs
    dial by their own names (`etcd-0.etcd:2379` in a ConfigMap or an argument) while no address
    names its Services: each client picks its pod; nor a kubebuilder manager's webhook port (9443,
    or named for webhooks) when it runs with `ENABLE_WEBHOOKS=false`: its scaffold then sets up no
    webhook, so no server listens. Nor are containers whose image's Dockerfile, in the same
    repository, starts a PID 1 that ignores SIGTERM (SVD117: they do not stop at SIGTERM). A PID 1
    the manifest starts (SVD116: `node app.js`) is flagged as an `info`: whether the app installs a
    handler is not in the manifest, and an app that does stops at SIGTERM. The only pod of a
    workload whose rollout removes it before a replacement is ready (one replica with `strategy:
    Recreate` or `maxUnavailable: 1`, or a one-replica StatefulSet) is an `info`: no endpoint takes
    over while it stops, so today a delay only moves the outage SVD106 reports; once SVD106's fix
    lets a replacement take over, the delay is due (fixed together, they leave no race); it is not
    flagged where stopping first is deliberate (a data store, pods that keep local state, or an app
    k8s-await-election starts once elected, which SVD106 leaves alone too), nor where such a single
    pod rolls with a surge: a surge pod of a data store cannot hold the same volume at once (a
    PostgreSQL Deployment on a ReadWriteOnce claim) or starts empty (a MongoDB without a volume): no
    replacement that holds the data takes over, and persisting the data is the owner's fix, not a
    delay. A server that keeps state of its own (an in-memory Jaeger, a Dex on memory storage) and
    rolls with a surge is flagged: its surge pod serves the requests the delay saves, if with state
    of its own. The same for the only pod of a kind that never rolls (a ReplicaSet,
    ReplicationController or bare Pod: SVD204). Only where no other workload's pods serve behind the
    same Service: with them, the race is there today (a warning). A container whose `sh -c` keeps
    SIGTERM from the app (SVD105) is an `info` too: it serves until SIGKILLed, until SVD105's fix
    execs it.

    ## Why it matters
    When a pod is deleted, the kubelet sends SIGTERM while the EndpointSlice controller, the
    kube-proxy of every node and every ingress or load balancer are still removing the pod
    from their lists. An app that stops listening at SIGTERM gets requests for a few more
    seconds and answers them with connection resets or refusals: the low error rate that
    spikes during every deployment.

    ## Example
    Bad:
    ```yaml
    containers:
      - name: api
        image: example/api:1.4
    ```
    Good:
    ```yaml
    terminationGracePeriodSeconds: 30
    containers:
      - name: api
        image: example/api:1.4
        lifecycle:
          preStop:
            sleep: {seconds: 5}
    ```

    ## Fix
    Add a preStop sleep at least as long as endpoint propagation takes
    (`--propagation-seconds`, default 5) and keep `terminationGracePeriodSeconds` above the
    sleep plus the longest request. Use the native `sleep` action on Kubernetes 1.30 and
    later, `exec: {command: [sh, -c, "sleep 5"]}` before that. If the app already keeps
    serving after SIGTERM (it waits before closing its listeners), list
    its image or workload under `drains` in the configuration instead
    (`drains = ["ghcr.io/example/api*", "deployment/payments-*"]`), with the
    seconds it keeps serving when you know them
    (`drains = {"ghcr.io/example/api*" = 3}`).

    ## References
    - https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/
    - https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination
    - https://learnk8s.io/graceful-shutdown
    """
    for w, c in racing(inventory):
        hook = c.prestop
        if _delays(c) or image_pid1(inventory, w, c) or no_delay_helps(inventory, w, c):
            continue  # SVD117: its PID 1 ignores SIGTERM, it does not stop at it
        alone = lone_pod(inventory, w)
        shell = image_shell(inventory, c)[0]
        plan = race_plan(w, c, settings, shell=shell)
        if "SVD101" not in plan.rules:
            continue  # no delay needed: the app drains long enough by itself
        drain = container_drain(settings, w, c)
        grace_to = (
            plan.grace_seconds if plan.grace_seconds != w.template.effective_grace_seconds else None
        )
        what = (
            "no preStop hook"
            if hook is None
            else (
                f"a preStop {hook.handler} hook that does not wait"
                + (f" ({' '.join(hook.command)})" if hook.command else "")
            )
        )
        grace = w.template.effective_grace_seconds
        drained = seconds(drain.seconds or 0.0) if drain is not None else 0
        # as it is, without a sleep: the grace period against the app's drain and requests
        cuts = cuts_requests(grace, (drain and drain.seconds) or 0.0, settings.max_request_seconds)
        also = (
            f"; terminationGracePeriodSeconds {grace} also cuts requests longer than "
            f"{grace - drained} s (set {plan.grace_seconds} with the sleep)"
            if cuts
            else ""
        )
        if drain is not None and drain.seconds is not None:
            told = (
                f"known drain {drain.pattern!r}, {drain.source}"
                if drain.source
                else f"drains {drain.pattern!r}"
            )
            # the longer of the two: the endpoint removal, or a hop's leg beyond it
            short = (
                f"the {plan.window_seconds:g} s {plan.window_hop} keeps sending it new requests"
                if plan.window_hop and plan.window_seconds > settings.propagation_seconds
                else f"the {settings.propagation_seconds:g} s endpoint removal can take to "
                "reach every node"
            )
            stops = (
                f"its app keeps serving {drain.seconds:g} s after SIGTERM ({told}), less than "
                f"{short}"
            )
            hint = ""
        elif (known := known_app(c.image, tuple(argv_of(c)))) is not None:  # not draining as run
            stops = (
                f"it stops serving at SIGTERM while {_still_sent(inventory, w)} (its app "
                f"{known.why}: {known.source})"
            )
            hint = _own_wait(known, plan.prestop_seconds) or _drains_hint(w, c)
        else:
            stops = (
                "unless its app keeps serving after SIGTERM by itself or ignores it, which "
                f"the manifest does not show, it stops serving while {_still_sent(inventory, w)}"
            )
            hint = _drains_hint(w, c)
        if plan.window_hop and not (drain is not None and drain.seconds is not None):
            stops += (
                f"; {plan.window_hop} keeps sending it new requests for up to "
                f"{plan.window_seconds:g} s"
            )
        if today := _until_fixed(inventory, w, c, alone):
            stops = today + stops
        if waiting := [u.name for u in upstreams(w, c) if not _delays(u)]:
            hint += (
                f"\n# and the same preStop on container {', '.join(map(repr, waiting))}, which "
                f"{c.name!r} forwards to on loopback: it gets SIGTERM at the same time and would "
                "stop first"
            )
        if leader := _leader_only(inventory, w, c):
            stops += (
                f"; but if only the elected leader serves this port ({leader}), a new pod "
                "serves it only once the lease passes to it (after the old pod exits and, "
                "unless it releases the lease, the lease's duration: 15 s by default): the "
                "sleep covers the endpoint removal, not that gap (release the lease on "
                "shutdown, or serve the port on every replica)"
            )
        yield Hit(
            w,
            f"container {c.name!r} behind Service {service_names(inventory, w)} has {what}: "
            f"{stops}{also}",
            fix=_prestop_fix(w, c, plan, grace_to, settings, hint, shell),
            container=c.name,
            line=hook.line if hook else c.line,
            severity=Severity.INFO if today or leader else None,
        )


def _leader_only(inventory: Inventory, w: Workload, c: Container) -> str | None:
    """What makes the container leader-elected, when the Services that carry its requests
    reach a server only the leader runs (KEDA's metrics-service gRPC port, judge176), as
    SVD204 tells them; else ``None``."""
    services = carrying_services(inventory, w)
    leaders = [leader_served(inventory, s, [c]) for s in services]
    return leaders[0] if leaders and all(leaders) else None


def _still_sent(inventory: Inventory, w: Workload) -> str:
    """Who still sends to a stopping pod: the nodes' rules, or, behind headless Services
    only (no node routes them), the clients that resolved its address before DNS dropped it."""
    services = carrying_services(inventory, w)
    if services and all(s.headless for s in services):
        return "clients that resolved its address from DNS still connect to it"
    return "nodes still route to it"


def _until_fixed(inventory: Inventory, w: Workload, c: Container, alone: str | None) -> str:
    """Why the container does not race today, until another rule's fix makes it (then
    SVD101 is an info, fixed with that one), or ""."""
    found = None if w.template.share_process_namespace else unhandled_pid1(inventory, c)
    # the runtime that ignores SIGTERM as PID 1 (npm and yarn pass it on: they race)
    runtime = found.runtime if found is not None and found.runtime in ("node", "python") else ""
    if shell_parent(c, inventory.image_base(c.image)) is not None:
        return (
            "today its shell keeps SIGTERM from the app, which serves on until SIGKILLed "
            "(SVD105); once the shell execs it (SVD105's fix)"
            + (
                f" and, as PID 1, {runtime} handles SIGTERM (SVD116: none by default), "
                if runtime
                else ", "
            )
        )
    if runtime:
        return (
            f"as PID 1, {runtime} ignores SIGTERM unless the app installs a handler "
            "(SVD116), and then it serves on until SIGKILLed; if it does, "
        )
    return until_replicated(w, alone)


def _prestop_fix(
    w: Workload,
    c: Container,
    plan: ShutdownPlan,
    grace: int | None,
    settings: Settings,
    hint: str,
    shell: bool | None = None,
) -> Fix:
    """The patch adding the plan's preStop (and grace), or the manual step when the cluster
    has no native sleep and the image no shell (``shell``: whether it has one)."""
    hook = prestop_hook(c, plan, shell=shell)
    if hook is None:
        return Fix(
            PodPatch(
                w.ref.kind, c.name, grace, prestop=PreStopHook(Handler.BINARY, plan.prestop_seconds)
            ),
            lead=f"# Kubernetes {settings.kube_version_text} has no native sleep action and "
            f"image {c.image!r} has no shell: copy a static sleep binary into the image\n# "
            "(e.g. COPY --from=busybox:musl /bin/sleep /sleep) and call it by path:\n",
            note=readiness_first(None, plan.prestop_seconds) + hint,
        )
    note = sleep_note(settings) if hook.handler is Handler.SLEEP else ""
    return Fix(PodPatch(w.ref.kind, c.name, grace, prestop=hook), note=note + hint)


@rule("SVD102", "grace-period-too-short", Cause.RACE, Severity.ERROR, fix=FixAvailability.SAFE)
def grace_period_too_short(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The grace period ends before the preStop sleep and the longest request do.

    ## What it does
    Flags Service-backed workloads whose `terminationGracePeriodSeconds` (default 30) is not longer
    than the time before SIGTERM plus `--max-request-seconds` (default 10): the container's preStop
    delay (sleep or `httpGet` hook), plus, for an app listed under `drains` with its seconds, the
    time it keeps serving after SIGTERM. Severity error when a preStop sleep of known length leaves
    less than the longest request after SIGTERM, warning when the delay before SIGTERM is unknown
    (an `httpGet` hook) or the app is a declared draining one. A container with no preStop delay
    that is not a declared draining app is left to SVD101, whose message and fix cover the grace
    period too; nor is a hook that drains the app before its sleep (NATS' lame duck mode,
    `nats-server --signal ldm`: its clients move away while it sleeps). An `exec` sleep its image
    cannot run (SVD104) counts as the sleep SVD104's fix makes run, and the message says it fails
    today. For a pod whose only callers are admission webhooks (every Service that carries
    requests to it is called by webhooks alone: a controller's webhook Service), the longest
    request is their longest `timeoutSeconds` (10 by default), and a grace period that ends
    as such a call would is enough: the API server has given up on it by then.

    ## Why it matters
    The grace period counts from the deletion, preStop included. When it runs out the kubelet
    sends SIGKILL: requests still in flight are cut (the container ends with exit code 137,
    reason `Error`), trading the endpoint race for another truncation.

    ## Example
    Bad:
    ```yaml
    terminationGracePeriodSeconds: 10
    containers:
      - name: api
        lifecycle:
          preStop:
            sleep: {seconds: 10}
    ```
    Good:
    ```yaml
    terminationGracePeriodSeconds: 25
    containers:
      - name: api
        lifecycle:
          preStop:
            sleep: {seconds: 10}
    ```

    ## Fix
    Set `terminationGracePeriodSeconds` to preStop + the app's own drain (when `drains`
    gives it) + longest request + a margin (`--margin-seconds`, default 5): 45 for a 10 s
    preStop and 30 s requests.

    ## References
    - https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination
    - https://cloud.google.com/blog/products/containers-kubernetes/kubernetes-best-practices-terminating-with-grace
    """
    for w, c in racing(inventory):
        drain = container_drain(settings, w, c)
        if not _delays(c) and (not drain or "SVD101" in race_plan(w, c, settings).rules):
            continue  # SVD101 reports it, grace period included
        if c.prestop and _DRAIN_HOOK.search(" ".join(c.prestop.command)):
            continue  # the hook drains the app's clients before SIGTERM (NATS; judge401)
        sleep = (c.prestop.sleep_seconds if c.prestop else None) or 0.0
        grace = w.template.effective_grace_seconds
        # the delay it has (and its own drain) is what the grace period must cover here;
        # a sleep shorter than propagation is SVD103's
        own = (drain and drain.seconds) or 0.0
        if drain is not None and drain.quiet:  # idle once endpoints are gone: a SIGKILL
            own = min(own, settings.propagation_seconds)  # then cuts no request
        stops = seconds(sleep) + own  # stops taking requests
        longest: float = settings.max_request_seconds
        budget = webhook_budget(inventory, w)
        if budget is not None:  # the API server's calls: it gives up on one after its timeout,
            longest = budget  # so one that ends with the grace period has failed anyway
            if grace >= stops + longest:
                continue
        elif not cuts_requests(grace, stops, longest):
            continue
        needed = max(needed_grace(stops, longest, settings.margin_seconds), grace)
        if settings.plan is not None:  # a diagnosis' plan: its grace at least
            needed = max(needed, settings.plan.grace_seconds)
        given = "default " if w.template.grace_seconds is None else ""
        drained = f"{own:g} s of its own drain + " if own else ""
        if sleep and grace <= sleep + MIN_SHUTDOWN_WINDOW:
            severity, what = (
                Severity.ERROR,
                f"the preStop sleep of {seconds(sleep)} s uses it up: container {c.name!r} "
                "gets SIGKILL at most 2 s after SIGTERM, in-flight requests are cut (exit 137)",
            )
        else:
            before = (
                (f"preStop {seconds(sleep)} s + " if sleep else "the preStop hook + ")
                if c.prestop
                else ""
            )
            bound = (
                "the webhooks' timeoutSeconds" if budget is not None else "--max-request-seconds"
            )
            severity, what = (
                Severity.ERROR if sleep else Severity.WARNING,
                f"it does not cover {before}{drained}"
                f"{'admission calls' if budget is not None else 'requests'} up to "
                f"{seconds(longest)} s ({bound}): the kubelet SIGKILLs container {c.name!r} "
                "mid-request (exit 137)",
            )
        if _hook_fails(inventory, c):  # no delay today; SVD104's fix makes the sleep run
            what = f"once its preStop runs (today it fails: SVD104), {what}"
        yield Hit(
            w,
            f"{given}terminationGracePeriodSeconds {grace}: {what}; set {needed}",
            fix=Fix(PodPatch(w.ref.kind, grace_seconds=needed)),
            container=c.name,
            line=w.template.grace_line or w.template.line,
            severity=severity,
        )


@rule("SVD103", "prestop-sleep-too-short", Cause.RACE, Severity.WARNING, fix=FixAvailability.SAFE)
def prestop_sleep_too_short(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The preStop sleep is shorter than endpoint removal takes to propagate.

    ## What it does
    Flags preStop sleeps (native `sleep` or a `sleep` command) shorter than
    `--propagation-seconds` (default 5). Apps listed under `drains` in the configuration
    keep serving after SIGTERM, which adds to the sleep: they are flagged only when the
    configuration gives their seconds and sleep + seconds is still shorter.

    ## Why it matters
    The sleep exists to outlast the moment the last node, ingress controller or cloud load
    balancer stops sending new connections to the pod. A sleep shorter than that leaves the
    end of the race window open: fewer resets, not none.

    ## Example
    Bad:
    ```yaml
    lifecycle:
      preStop:
        sleep: {seconds: 1}
    ```
    Good:
    ```yaml
    lifecycle:
      preStop:
        sleep: {seconds: 5}
    ```

    ## Fix
    Raise the sleep to the propagation time you measured (`svcdoctor diagnose` reports the
    observed window) and keep the grace period above sleep + longest request.

    ## References
    - https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/
    - https://github.com/kubernetes/kubernetes/issues/106476
    """
    for w, c in racing(inventory):
        if (hit := short_sleep(w, c, settings, "SVD103")) is not None:
            yield hit


def short_sleep(w: Workload, c: Container, settings: Settings, rule_id: str) -> Hit | None:
    """The hit of ``rule_id`` (SVD103: the cluster's propagation; SVD110: a slower hop's
    leg) for a container whose preStop sleep is shorter than the plan's, if that is the
    rule the plan names."""
    sleep = c.prestop.sleep_seconds if c.prestop else None
    if not sleep or c.prestop is None:
        return None
    plan = race_plan(w, c, settings, current_prestop=sleep)
    if rule_id not in plan.rules:
        return None  # long enough, with the app's own drain
    drain = container_drain(settings, w, c)
    own = (
        f" (+ {drain.seconds:g} s its app drains by itself)"
        if drain is not None and drain.seconds is not None
        else ""
    )
    grace = plan.grace_seconds if plan.grace_seconds != w.template.effective_grace_seconds else None
    hook = (
        PreStopHook(Handler.SLEEP, plan.prestop_seconds)  # the action it already uses
        if c.prestop.handler == "sleep"
        else PreStopHook(Handler.EDIT, plan.prestop_seconds, c.prestop.command)
    )
    if plan.window_hop and rule_id != "SVD103":
        than = (
            f"less than the {plan.window_seconds:g} s {plan.window_hop} keeps sending new "
            "requests to a deleted pod (its leg of the race)"
        )
    else:
        than = (
            f"less than the {settings.propagation_seconds:g} s endpoint removal can take to "
            "reach every node"
        )
    return Hit(
        w,
        f"container {c.name!r} sleeps {sleep:g} s in preStop{own}, {than}",
        fix=Fix(PodPatch(w.ref.kind, c.name, grace, prestop=hook)),
        container=c.name,
        line=c.prestop.line,
    )


def prestop_hook(
    c: Container, plan: ShutdownPlan, *, shell: bool | None = None
) -> PreStopHook | None:
    """The plan's preStop for a container, in the handler it already has (a patch must not
    add a second handler beside it), unless that is an ``exec`` in an image with no shell
    (``shell`` false: its command cannot run anyway, SVD104); ``None`` when the plan has no
    hook."""
    planned = planned_hook(plan)
    if planned.handler is Handler.NONE:
        return None
    n = plan.prestop_seconds
    hook = c.prestop
    if hook is None:
        return planned
    if hook.handler == "sleep":
        return PreStopHook(Handler.SLEEP, n)
    if hook.handler == "exec" and hook.command and shell is not False:
        # keep its command: its sleep set, or a sleep first so the command still runs
        return PreStopHook(Handler.EDIT if hook.sleep_seconds else Handler.SHELL, n, hook.command)
    return replace(planned, replaces=hook.handler)


def _hook_fails(inventory: Inventory, c: Container) -> bool:
    """Whether the container's `exec` preStop runs a shell or `sleep` its image lacks
    (SVD104): the hook fails at once, and delays nothing (DeathStarBench's distroless
    daprApps run `/bin/sleep 30`; judge166)."""
    hook = c.prestop
    if not (hook and hook.handler == "exec" and hook.command):
        return False
    program = hook.command[0].rsplit("/", 1)[-1]
    return program in SHELLS | {"sleep"} and image_shell(inventory, c)[0] is False


@rule("SVD104", "prestop-needs-shell", Cause.RACE, Severity.ERROR, fix=FixAvailability.SAFE)
def prestop_needs_shell(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """An `exec` preStop runs `sh` or `sleep` in an image that has neither.

    ## What it does
    Flags `exec` preStop hooks whose command starts with a shell or `sleep` when the image
    ships no shell: distroless (except `:debug`), `scratch`, Chainguard images other than
    `-dev`, a few known static Kubernetes images, and an image a Dockerfile of the
    repository builds from such a base.

    ## Why it matters
    The hook fails at once (`FailedPreStopHook` event), the kubelet goes straight to SIGTERM,
    and the pod has no delay at all: the race the hook was written to close is wide open,
    while the manifest looks correct.

    ## Example
    Bad:
    ```yaml
    image: gcr.io/distroless/static-debian12
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "sleep 5"]}
    ```
    Good:
    ```yaml
    image: gcr.io/distroless/static-debian12
    lifecycle:
      preStop:
        sleep: {seconds: 5}
    ```

    ## Fix
    Use the native `lifecycle.preStop.sleep.seconds` action (beta and on by default in
    Kubernetes 1.30, GA in 1.34). On older clusters, ship a static `sleep` binary in the image
    and call it by absolute path, or implement the delay in the app's SIGTERM handler.

    ## References
    - https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/#hook-handler-implementations
    - https://github.com/kubernetes/enhancements/issues/3960
    - https://github.com/GoogleContainerTools/distroless
    """
    for w, c in backed(inventory):
        hook = c.prestop
        if not (hook and hook.command and _hook_fails(inventory, c)):
            continue
        program = hook.command[0].rsplit("/", 1)[-1]
        base = image_shell(inventory, c)[1]
        plan = race_plan(w, c, settings, current_prestop=hook.sleep_seconds, shell=False)
        sleep = plan.prestop_seconds or hook.sleep_seconds or settings.propagation_seconds
        if hook_kind(settings.kube_version, has_shell=False) is HookKind.IMPOSSIBLE:
            fix = Fix(
                PodPatch(w.ref.kind, c.name, prestop=PreStopHook(Handler.BINARY, seconds(sleep))),
                lead=f"# Kubernetes {settings.kube_version_text} has no native sleep action: "
                "copy a static sleep binary into the image\n# (e.g. COPY --from=busybox:musl "
                "/bin/sleep /sleep) and call it by path:\n",
                note=readiness_first(None, seconds(sleep)),
            )
        else:
            fix = Fix(
                PodPatch(w.ref.kind, c.name, prestop=PreStopHook(Handler.SLEEP, seconds(sleep))),
                note=sleep_note(settings),
            )
        yield Hit(
            w,
            f"preStop of container {c.name!r} runs {program!r}, but image {c.image!r}"
            + (f" (built here FROM {base})" if base else "")
            + " has no shell: the hook fails (FailedPreStopHook) and the pod gets no delay",
            fix=fix,
            container=c.name,
            line=hook.line,
        )
