"""Race checks (``SVD1xx``): the pod stops serving before every node stops routing to it."""

from __future__ import annotations

import re
from collections.abc import Iterator

from svcdoctor.checks._serving import (
    backed,
    dump,
    needed_grace,
    pod_patch,
    seconds,
    service_names,
    sleep_hook,
    sleep_note,
)
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.model import Cause, Inventory, Severity, Workload

_SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh", "ksh"})
# Images known to ship no shell (and no sleep binary). Distroless ":debug" tags have busybox.
_NO_SHELL = re.compile(
    r"(^|/)distroless/(?!.*:debug)|^cgr\.dev/chainguard/(?!.*-dev\b)|(^|/)scratch(:|$)"
    r"|^(registry\.k8s\.io|k8s\.gcr\.io)/(metrics-server|kube-state-metrics|pause)"
)


def _prestop_seconds(w: Workload, container: str) -> float:
    for c in w.template.containers:
        if c.name == container and c.prestop and c.prestop.sleep_seconds:
            return c.prestop.sleep_seconds
    return 0.0


@rule("SVD101", "no-prestop-delay", Cause.RACE, Severity.WARNING)
def no_prestop_delay(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A Service-backed container stops serving as soon as it is told to stop.

    ## What it does
    Flags containers behind a Service that have no preStop delay: no
    `lifecycle.preStop.sleep`, no `exec` hook that sleeps, and no `httpGet` hook.

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
    later, `exec: {command: [sh, -c, "sleep 5"]}` before that.

    ## References
    - https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/
    - https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination
    - https://learnk8s.io/graceful-shutdown
    """
    for w, c in backed(inventory):
        hook = c.prestop
        if hook and (hook.handler in ("sleep", "httpGet") or hook.sleep_seconds):
            continue
        sleep = settings.propagation_seconds
        pod = {}
        if w.template.effective_grace_seconds < needed_grace(sleep, settings):
            pod["terminationGracePeriodSeconds"] = needed_grace(sleep, settings)
        what = (
            "no preStop hook"
            if hook is None
            else (
                f"a preStop {hook.handler} hook that does not wait"
                + (f" ({' '.join(hook.command)})" if hook.command else "")
            )
        )
        yield Hit(
            w,
            f"container {c.name!r} behind Service {service_names(inventory, w)} has {what}: "
            f"it stops serving at SIGTERM while nodes still route to it",
            fix=pod_patch(w, c.name, {"lifecycle": {"preStop": sleep_hook(sleep, settings)}}, pod)
            + sleep_note(settings),
            container=c.name,
            line=hook.line if hook else c.line,
        )


@rule("SVD102", "grace-period-too-short", Cause.RACE, Severity.ERROR)
def grace_period_too_short(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The grace period ends before the preStop sleep and the longest request do.

    ## What it does
    Flags Service-backed workloads whose `terminationGracePeriodSeconds` (default 30) is not
    longer than the container's preStop sleep plus `--max-request-seconds` (default 10).

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
    Set `terminationGracePeriodSeconds` to preStop + longest request + a margin
    (`--margin-seconds`, default 5): 45 for a 10 s preStop and 30 s requests.

    ## References
    - https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination
    - https://cloud.google.com/blog/products/containers-kubernetes/kubernetes-best-practices-terminating-with-grace
    """
    for w, c in backed(inventory):
        sleep = _prestop_seconds(w, c.name)
        grace = w.template.effective_grace_seconds
        if grace > sleep + settings.max_request_seconds:
            continue
        needed = needed_grace(sleep, settings)
        given = "default " if w.template.grace_seconds is None else ""
        yield Hit(
            w,
            f"{given}terminationGracePeriodSeconds {grace} does not cover preStop "
            f"{seconds(sleep)} s + requests up to {seconds(settings.max_request_seconds)} s: "
            f"the kubelet SIGKILLs container {c.name!r} mid-request (exit 137); set {needed}",
            fix=pod_patch(w, pod_fields={"terminationGracePeriodSeconds": needed}),
            container=c.name,
            line=w.template.line,
        )


@rule("SVD103", "prestop-sleep-too-short", Cause.RACE, Severity.WARNING)
def prestop_sleep_too_short(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The preStop sleep is shorter than endpoint removal takes to propagate.

    ## What it does
    Flags preStop sleeps (native `sleep` or a `sleep` command) shorter than
    `--propagation-seconds` (default 5).

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
    for w, c in backed(inventory):
        sleep = c.prestop.sleep_seconds if c.prestop else None
        if not sleep or sleep >= settings.propagation_seconds:
            continue
        assert c.prestop is not None
        want = settings.propagation_seconds
        pod = {}
        if w.template.effective_grace_seconds < needed_grace(want, settings):
            pod["terminationGracePeriodSeconds"] = needed_grace(want, settings)
        hook = (
            sleep_hook(want, settings)
            if c.prestop.handler == "sleep"
            else {"exec": {"command": _with_sleep(c.prestop.command, seconds(want))}}
        )
        yield Hit(
            w,
            f"container {c.name!r} sleeps {sleep:g} s in preStop, less than the "
            f"{want:g} s endpoint removal can take to reach every node",
            fix=pod_patch(w, c.name, {"lifecycle": {"preStop": hook}}, pod),
            container=c.name,
            line=c.prestop.line,
        )


def _with_sleep(command: tuple[str, ...], sleep: int) -> list[str]:
    return [re.sub(r"\bsleep\s+\d+(\.\d+)?[smh]?", f"sleep {sleep}", w) for w in command]


@rule("SVD104", "prestop-needs-shell", Cause.RACE, Severity.ERROR)
def prestop_needs_shell(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """An `exec` preStop runs `sh` or `sleep` in an image that has neither.

    ## What it does
    Flags `exec` preStop hooks whose command starts with a shell or `sleep` when the image
    ships no shell: distroless (except `:debug`), `scratch`, Chainguard images other than
    `-dev`, and a few known static Kubernetes images.

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
        if not (hook and hook.handler == "exec" and hook.command):
            continue
        program = hook.command[0].rsplit("/", 1)[-1]
        if program not in _SHELLS | {"sleep"} or not _NO_SHELL.search(c.image):
            continue
        sleep = hook.sleep_seconds or settings.propagation_seconds
        if settings.native_sleep() is False:
            fix = (
                f"# Kubernetes {settings.kube_version_text} has no native sleep action: "
                "copy a static sleep binary into the image\n# (e.g. COPY --from=busybox:musl "
                "/bin/sleep /sleep) and call it by path:\n"
                + pod_patch(
                    w,
                    c.name,
                    {
                        "lifecycle": {
                            "preStop": {"exec": {"command": ["/sleep", str(seconds(sleep))]}}
                        }
                    },
                )
            )
        else:
            fix = pod_patch(
                w, c.name, {"lifecycle": {"preStop": {"sleep": {"seconds": seconds(sleep)}}}}
            ) + sleep_note(settings)
        yield Hit(
            w,
            f"preStop of container {c.name!r} runs {program!r}, but image {c.image!r} has no "
            f"shell: the hook fails (FailedPreStopHook) and the pod gets no delay",
            fix=fix,
            container=c.name,
            line=hook.line,
        )


@rule("SVD105", "shell-wrapped-entrypoint", Cause.RACE, Severity.WARNING)
def shell_wrapped_entrypoint(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The app is started through `sh -c` without `exec`, so SIGTERM never reaches it.

    ## What it does
    Flags Service-backed containers whose `command`/`args` run a shell with `-c` and a script
    that neither `exec`s the app nor traps signals.

    ## Why it matters
    The shell is PID 1 and receives SIGTERM; PID 1 ignores signals it has no handler for, so
    the app never hears about the shutdown, keeps its listeners open until the grace period
    ends, and is then SIGKILLed with requests in flight (exit 137). Graceful shutdown code in
    the app never runs.

    ## Example
    Bad:
    ```yaml
    command: ["sh", "-c", "./migrate && ./server --port 8080"]
    ```
    Good:
    ```yaml
    command: ["sh", "-c", "./migrate && exec ./server --port 8080"]
    ```

    ## Fix
    Prefix the last command of the script with `exec`, or run the binary directly in
    `command`, or use an init such as `tini` that forwards signals.

    ## References
    - https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination
    - https://github.com/krallin/tini
    """
    del settings
    for w, c in backed(inventory):
        argv = [*c.command, *c.args]
        if not argv or argv[0].rsplit("/", 1)[-1] not in _SHELLS or "-c" not in argv[1:3]:
            continue
        script = " ".join(argv[argv.index("-c") + 1 :]).strip()
        if not script or re.search(r"\btrap\b", script):
            continue
        last = re.split(r"\n|;|&&|\|\|", script.rstrip("; \n"))[-1].strip()
        if last.startswith("exec ") or last == "exec":
            continue
        fixed = script[: len(script) - len(script.lstrip())] + _exec_last(script)
        yield Hit(
            w,
            f"container {c.name!r} starts its app through '{argv[0]} -c' without exec: "
            "SIGTERM goes to the shell, the app is SIGKILLed at the end of the grace period",
            fix=f"# make the shell replace itself with the app:\n{argv[0]} -c {fixed!r}",
            container=c.name,
            line=c.line,
        )


def _exec_last(script: str) -> str:
    body = script.strip().rstrip(";")
    for sep in ("\n", ";", "&&"):
        if sep in body:
            head, _, tail = body.rpartition(sep)
            joiner = sep if sep == "\n" else f"{' ' if sep == '&&' else ''}{sep} "
            return f"{head.rstrip()}{joiner}exec {tail.strip()}"
    return f"exec {body}"


def _effective(value: int | str | None, replicas: int, default: int | str) -> int:
    value = default if value is None else value
    if isinstance(value, int):
        return value
    percent = float(value.rstrip("%") or 0) if value.rstrip("%").replace(".", "").isdigit() else 0
    return int(percent * replicas / 100)  # maxUnavailable rounds down


@rule("SVD106", "rollout-drops-capacity", Cause.RACE, Severity.WARNING)
def rollout_drops_capacity(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Every rollout takes all serving pods of a Service away at once.

    ## What it does
    Flags Service-backed Deployments and Argo Rollouts with `strategy: Recreate`, and
    workloads with one replica whose update removes it before its replacement is ready
    (`maxUnavailable` of 1 or more, or a StatefulSet, which always deletes first).

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
    replicas (with a PodDisruptionBudget) for anything behind a Service.

    ## References
    - https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#strategy
    - https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#rolling-updates
    """
    del settings
    for w in inventory.workloads:
        services = inventory.services_of(w)
        if not services:
            continue
        names = ", ".join(s.ref.name for s in services)
        replicas = inventory.replicas(w)
        rolling = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        if w.strategy == "Recreate":
            yield Hit(
                w,
                f"strategy Recreate stops every pod before starting new ones: Service {names} "
                "has no ready endpoint during each rollout",
                fix=_dump_spec({"strategy": rolling}),
            )
        elif replicas == 1 and w.ref.kind in ("Deployment", "Rollout"):
            if w.strategy == "BlueGreen":
                continue
            if _effective(w.max_unavailable, 1, "25%") >= 1:
                yield Hit(
                    w,
                    f"1 replica with maxUnavailable {w.max_unavailable}: the only pod of Service "
                    f"{names} is removed before its replacement is ready",
                    fix=_dump_spec({"replicas": 2, "strategy": rolling}),
                )
        elif replicas == 1 and w.ref.kind == "StatefulSet":
            yield Hit(
                w,
                f"a 1-replica StatefulSet deletes its pod before recreating it: Service {names} "
                "has no endpoint during each rollout",
                fix=_dump_spec({"replicas": 2}),
            )


def _dump_spec(spec: dict[str, object]) -> str:
    return dump({"spec": spec})
