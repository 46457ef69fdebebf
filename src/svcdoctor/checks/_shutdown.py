"""The shutdown facts the serving checks share: a container's drain and shell, its
shutdown plan's inputs (``shutdown_facts``) and the paths in front of it, and fix snippets."""

from __future__ import annotations

from svcdoctor.checks._scripts import parse_script, shell_script
from svcdoctor.checks._serving import NO_SHELL_IMAGE
from svcdoctor.checks.settings import Drain, Settings
from svcdoctor.model import Container, Inventory, Service, Workload, remedy
from svcdoctor.model.hops import Hop
from svcdoctor.model.path import Paths, trace_paths


def seconds(value: float) -> int:
    """Whole seconds, rounded up (the API takes integers)."""
    return remedy.seconds(value)


def container_drain(settings: Settings, workload: Workload, container: Container) -> Drain | None:
    """How long the container's app keeps serving after SIGTERM (``Settings.drain_of``); the
    flags of the command a `sh -c` script ends with count as the container's (the
    oauth-apiserver's `exec oauth-apiserver start --shutdown-delay-duration=50s`; judge272)."""
    argv: tuple[str, ...] = (*container.command, *container.args)
    if (found := shell_script(argv)) and (last := parse_script(found[1]).last):
        argv = (*argv, *last.words)
    return settings.drain_of(
        workload.ref.kind,
        workload.ref.name,
        container.image,
        argv,
        container.config_drain,
        dict(container.env),
        container.probe_headers,
    )


def has_shell(container: Container) -> bool | None:
    """``False`` for images known to ship no shell, else unknown."""
    return False if NO_SHELL_IMAGE.search(container.image) else None


def image_shell(inventory: Inventory, container: Container) -> tuple[bool | None, str]:
    """``has_shell``, also ``False`` for an image a Dockerfile of the inputs builds on a base
    with no shell (``FROM gcr.io/distroless/static``, ``scratch``), with that base ("" when
    the image's own name says it)."""
    if has_shell(container) is False:
        return False, ""
    facts = inventory.images.get(container.image)
    if facts is not None and facts.base and NO_SHELL_IMAGE.search(facts.base):
        return False, facts.base
    return None, ""


def shutdown_facts(
    workload: Workload,
    container: Container,
    settings: Settings,
    current_prestop: float | None = None,
    window: float | None = None,
    *,
    drain: bool = True,
    shell: bool | None = None,
    longest_request: float | None = None,
) -> remedy.ShutdownFacts:
    """What the remedy model knows of a serving container under lint's assumptions:
    ``window`` the race window to cover (``--propagation-seconds`` by default), the app's
    own drain from ``drains`` (unless ``drain`` is false), its probes, ``shell`` when the
    caller knows the image has a shell or not, ``longest_request``
    (``--max-request-seconds``)."""
    found = container_drain(settings, workload, container)
    hop_window, window_hop, sidecar_drain = _path_facts(workload, settings, window)
    return remedy.ShutdownFacts(
        window_seconds=settings.propagation_seconds if window is None else window,
        source=remedy.WindowSource.ASSUMED,
        longest_request_seconds=(
            settings.max_request_seconds if longest_request is None else longest_request
        ),
        margin_seconds=settings.margin_seconds,
        drain_seconds=found.seconds if found is not None and drain else 0.0,
        kube_version=settings.kube_version,
        current_prestop_seconds=current_prestop,
        current_grace_seconds=workload.template.effective_grace_seconds,
        has_shell=has_shell(container) if shell is None else shell,
        readiness=container.readiness,
        liveness=container.liveness,
        hop_window_seconds=hop_window,
        window_hop=window_hop,
        sidecar_drain_seconds=sidecar_drain,
    )


def _path_facts(
    workload: Workload, settings: Settings, window: float | None
) -> tuple[float | None, str, float | None]:
    """From the run's paths: the leg of the slowest hop in front of the workload when it is
    slower than the cluster's propagation (and the window is lint's assumption), the hop's
    name, and how long the pod's own proxy drains (a native sidecar outlives the app)."""
    paths = settings.paths
    if paths is None:
        return None, "", None
    hop = paths.slower_than(workload, settings.propagation_seconds) if window is None else None
    hop_window, name = (hop.leg.seconds, hop.name) if hop else (None, "")
    sidecar = paths.sidecar(workload)
    drain = sidecar.drain.seconds if sidecar and sidecar.drain and not sidecar.native else None
    return hop_window, name, drain


def run_paths(inventory: Inventory, settings: Settings) -> Paths:
    """The run's paths: traced once by ``run_checks``, or here for a rule run alone."""
    return settings.paths or trace_paths(inventory, settings.path_settings)


def readiness_first(hop: Hop | None, sleep: int | None = None) -> str:
    """``problem.md``'s complementary tactic, as comment lines: readiness flipped to failing
    first, by the app's own shutdown endpoint called from a preStop ``httpGet`` (the kubelet
    waits for the answer before SIGTERM: no shell needed). For a load balancer that
    health-checks its targets (``hop``) it stops sending once its check fails (interval x
    unhealthy threshold), sooner than deregistration when the check is tight (Google's KB on
    NEG 502s: tighter health checks); to kube-proxy a terminating pod is not ready already."""
    if hop is None:
        wait = f"{sleep} s" if sleep else "the propagation time"
        return (
            "\n# or, with no sleep in the image: a preStop httpGet to an endpoint of the app "
            f"that fails its readiness, waits {wait}, then answers (SIGTERM waits for it)"
        )
    return (
        f"# {hop.label} health-checks its targets: a preStop httpGet to the app's own shutdown "
        "endpoint (it fails\n# that check, then answers after the sleep) takes the pod out "
        "after the check's interval x unhealthy\n# threshold, sooner than deregistration when "
        "the check is tight; kube-proxy gains nothing (a terminating\n# pod is not ready to it "
        "already)\n"
    )


def sleep_note(settings: Settings) -> str:
    if settings.native_sleep() is None:
        return (
            "\n# lifecycle.preStop.sleep needs Kubernetes >= 1.30 (GA in 1.34); on older "
            "clusters, if the image\n# has a shell (not distroless): exec: {command: [sh, -c, "
            "'sleep N']}  (pass --kubernetes-version)"
        )
    return ""


def daemon_gap(w: Workload, services: list[Service]) -> str | None:
    """How a DaemonSet's rolling update leaves a Service without its pods: all nodes at
    once (``maxUnavailable: 100%``), or, when the Service keeps a node's external traffic on
    the node's own pod (``externalTrafficPolicy: Local``), each node while its one pod is
    replaced (``maxSurge`` 0, the default, deletes before it creates; a pod that cannot share
    its node, ``PodTemplate.apart``, cannot surge: two cannot bind one node's ports, with a
    hostPort or on the host's network (loxilb's DaemonSets; judge294), so it is not flagged)."""
    if w.strategy != "RollingUpdate":  # OnDelete: nothing rolls by itself
        return None
    if w.max_unavailable == "100%":
        return "maxUnavailable 100% replaces every pod of Service {names} at once"
    local = any(
        s.type in ("NodePort", "LoadBalancer") and s.external_traffic_policy == "Local"
        for s in services
    )
    if local and w.max_surge in (None, 0, "0", "0%") and not w.template.apart:
        return (
            "Service {names} keeps each node's external traffic on the node's own pod "
            "(externalTrafficPolicy Local), and maxSurge 0 deletes that pod before its "
            "replacement is ready: every rollout drops each node's traffic in turn, unless "
            "the pod's preStop outlasts the load balancer's health check"
        )
    return None
