"""Backend checks (``SVD2xx``): a pod that fails requests stays in the Service."""

from __future__ import annotations

import re
from collections.abc import Iterator

from svcdoctor.checks._serving import backed, dump, pod_patch, serves, service_names
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.model import Cause, Inventory, Severity

_ALWAYS_TRUE = re.compile(r"^\s*(true|:|exit\s+0|echo\b.*|/bin/true|/usr/bin/true)\s*;?\s*$")


@rule("SVD201", "no-readiness-probe", Cause.BACKEND, Severity.WARNING)
def no_readiness_probe(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A Service-backed container has no readiness probe.

    ## What it does
    Flags containers behind a Service without a `readinessProbe`.

    ## Why it matters
    Without a readiness probe a container is Ready as soon as it starts: new pods get traffic
    before they listen (refused connections at every scale-up and rollout), and a pod that
    stops serving is never taken out of the Service. One such pod of eight is 12.5 % of
    requests failing.

    ## Example
    Bad:
    ```yaml
    containers:
      - name: api
        ports: [{containerPort: 8080}]
    ```
    Good:
    ```yaml
    containers:
      - name: api
        ports: [{containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /readyz, port: 8080}
          periodSeconds: 5
          failureThreshold: 2
    ```

    ## Fix
    Add a readiness probe that exercises what a request needs (an HTTP endpoint that checks
    the app's own dependencies it cannot serve without), on the port the Service targets.

    ## References
    - https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/
    - https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/
    """
    del settings
    for w, c in backed(inventory):
        if c.readiness is not None:
            continue
        port: int | str = c.ports[0].number if c.ports else 8080
        for svc in inventory.services_of(w):
            for p in svc.ports:
                if serves(c, p.target):
                    port = p.target
        probe = {
            "httpGet": {"path": "/readyz", "port": port},
            "periodSeconds": 5,
            "failureThreshold": 2,
        }
        yield Hit(
            w,
            f"container {c.name!r} behind Service {service_names(inventory, w)} has no "
            "readinessProbe: it gets traffic before it listens and keeps it when it stops "
            "serving",
            fix=pod_patch(w, c.name, {"readinessProbe": probe})
            + "\n# /readyz: an endpoint that fails when this pod cannot serve requests",
            container=c.name,
            line=c.line,
        )


@rule("SVD202", "readiness-equals-liveness", Cause.BACKEND, Severity.INFO)
def readiness_equals_liveness(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """Readiness and liveness probes check the same thing.

    ## What it does
    Flags containers whose readiness and liveness probes use the same handler and target
    (path, port — named ports resolved — scheme, host, headers, command). Timing fields
    (`periodSeconds`, `failureThreshold`, …) are ignored: probes that differ only in timing
    are still the same check.

    ## Why it matters
    The two probes answer different questions. Readiness: "should this pod get traffic now?";
    liveness: "is this process beyond repair?". When they are the same check, either
    readiness is too shallow to see what breaks requests, or liveness is deep enough that a
    shared dependency's hiccup restarts every replica at once.

    ## Example
    Bad:
    ```yaml
    readinessProbe: {httpGet: {path: /healthz, port: http}}
    livenessProbe: {httpGet: {path: /healthz, port: 8080}, failureThreshold: 5}
    ```
    Good:
    ```yaml
    readinessProbe: {httpGet: {path: /readyz, port: http}}
    livenessProbe: {httpGet: {path: /livez, port: http}, failureThreshold: 5}
    ```

    ## Fix
    Point readiness at an endpoint that checks what requests need, and liveness at a cheap
    "the process is not wedged" endpoint.

    ## References
    - https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/
    - https://srcco.de/posts/kubernetes-liveness-probes-are-dangerous.html
    """
    del settings
    for w, c in backed(inventory):
        if c.readiness is None or c.liveness is None or c.readiness.target != c.liveness.target:
            continue
        r = c.readiness
        suggestion = (
            {
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": r.port}},
                "livenessProbe": {"httpGet": {"path": "/livez", "port": r.port}},
            }
            if r.handler == "httpGet"
            else None
        )
        yield Hit(
            w,
            f"container {c.name!r}: readinessProbe and livenessProbe are the same "
            f"{r.handler} check; readiness cannot see more than liveness does",
            fix=(
                pod_patch(w, c.name, suggestion)
                if suggestion
                else "# give readiness a check of what requests need and liveness a cheaper one"
            ),
            container=c.name,
            line=r.line,
        )


@rule("SVD203", "shallow-readiness-probe", Cause.BACKEND, Severity.WARNING)
def shallow_readiness_probe(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The readiness probe cannot see a wedged app.

    ## What it does
    Flags Service-backed containers whose readiness probe is `tcpSocket` only (the kernel
    accepts connections for a process whose threads are all stuck) or an `exec` that always
    succeeds (`true`, `exit 0`, `echo …`).

    ## Why it matters
    "Bad" backends are usually alive and listening but not serving: an exhausted connection
    pool, a deadlocked worker pool, a stale config. A probe shallower than the failure keeps
    the pod Ready, and its share of requests keeps failing.

    ## Example
    Bad:
    ```yaml
    readinessProbe:
      tcpSocket: {port: 8080}
    ```
    Good:
    ```yaml
    readinessProbe:
      httpGet: {path: /readyz, port: 8080}
    ```

    ## Fix
    Probe through the same code path as a request: an `httpGet` (or `grpc` health check)
    handled by the app's request workers.

    ## References
    - https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/
    - https://github.com/grpc/grpc/blob/master/doc/health-checking.md
    """
    del settings
    for w, c in backed(inventory):
        r = c.readiness
        if r is None:
            continue
        if r.handler == "tcpSocket":
            why = "is tcpSocket only: a process that accepts connections but serves nothing passes"
        elif r.handler == "exec" and _always_succeeds(r.command):
            why = f"exec {' '.join(r.command)!r} always succeeds"
        else:
            continue
        port = r.port if r.port is not None else (c.ports[0].number if c.ports else 8080)
        yield Hit(
            w,
            f"container {c.name!r}: readinessProbe {why}",
            fix=pod_patch(
                w, c.name, {"readinessProbe": {"httpGet": {"path": "/readyz", "port": port}}}
            ),
            container=c.name,
            line=r.line,
        )


def _always_succeeds(command: tuple[str, ...]) -> bool:
    if not command:
        return False
    program = command[0].rsplit("/", 1)[-1]
    if program in ("true", "echo", ":"):
        return True
    if program in ("sh", "bash", "ash") and "-c" in command:
        return bool(_ALWAYS_TRUE.match(" ".join(command[command.index("-c") + 1 :])))
    return False


@rule("SVD204", "single-replica-service", Cause.BACKEND, Severity.WARNING)
def single_replica_service(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The Service is backed by exactly one pod.

    ## What it does
    Flags Services whose backing workloads add up to one replica (an unset `replicas` counts
    as the API default of 1; a HorizontalPodAutoscaler in the inputs supplies its
    `minReplicas`).

    ## Why it matters
    With one backend, "one bad pod" is 100 % of traffic, and every restart, eviction, node
    drain or rollout is an outage: there is nothing for the Service to balance to.

    ## Example
    Bad:
    ```yaml
    kind: Deployment
    spec:
      replicas: 1
    ```
    Good:
    ```yaml
    kind: Deployment
    spec:
      replicas: 2
    ---
    kind: PodDisruptionBudget
    spec:
      minAvailable: 1
    ```

    ## Fix
    Run at least two replicas (spread across nodes) and add a PodDisruptionBudget.

    ## References
    - https://kubernetes.io/docs/concepts/workloads/pods/disruptions/
    - https://kubernetes.io/docs/tasks/run-application/configure-pdb/
    """
    del settings
    for svc in inventory.services:
        workloads = inventory.targeted(svc)
        counts = [inventory.replicas(w) for w in workloads]
        if not workloads or None in counts or sum(c or 0 for c in counts) != 1:
            continue
        w = workloads[0]
        if w.ref.kind == "Pod":
            how = "a bare Pod"
        elif w.replicas is None and inventory.replicas(w) == 1:
            how = "replicas unset, the API default is 1"
        else:
            how = "1 replica"
        fix = (
            "# a bare Pod cannot be replicated: run it as a Deployment with replicas: 2"
            if w.ref.kind == "Pod"
            else dump({"spec": {"replicas": 2}})
            + f"\n# on {w.ref}, plus a PodDisruptionBudget with minAvailable: 1"
        )
        yield Hit(
            svc,
            f"Service {svc.ref.name} is backed by a single pod ({w.ref}: {how}): one bad pod "
            "fails 100 % of requests and every rollout or eviction is an outage",
            fix=fix,
        )


@rule("SVD205", "service-port-mismatch", Cause.BACKEND, Severity.ERROR)
def service_port_mismatch(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The Service targets a port that no selected container exposes.

    ## What it does
    For each Service port, checks that the `targetPort` (default: `port`) exists on the
    selected containers: a named `targetPort` must match a container port name; a numeric
    one is flagged (as a warning) only when the containers declare ports and none has it.

    ## Why it matters
    A named `targetPort` that no container defines leaves the endpoint without that port, so
    connections fail; when only some workloads behind the Service define it, only some
    backends fail: a partial, "intermittent" failure.

    ## Example
    Bad:
    ```yaml
    kind: Service
    spec:
      ports: [{port: 80, targetPort: http}]
    ---
    # container
    ports: [{name: web, containerPort: 8080}]
    ```
    Good:
    ```yaml
    kind: Service
    spec:
      ports: [{port: 80, targetPort: web}]
    ```

    ## Fix
    Set `targetPort` to a port name or number the containers declare.

    ## References
    - https://kubernetes.io/docs/concepts/services-networking/service/#field-spec-ports
    """
    del settings
    for svc in inventory.services:
        workloads = inventory.targeted(svc)
        if not workloads:
            continue
        for p in svc.ports:
            missing = [
                w for w in workloads if not any(serves(c, p.target) for c in w.template.containers)
            ]
            if not missing:
                continue
            declared = sorted(
                {
                    (cp.name or str(cp.number)) if isinstance(p.target, str) else str(cp.number)
                    for w in workloads
                    for c in w.template.containers
                    for cp in c.ports
                }
            )
            if isinstance(p.target, int):
                if any(not c.ports for w in missing for c in w.template.containers):
                    continue  # undeclared ports are allowed: the app may listen anyway
                severity = Severity.WARNING
            else:
                severity = Severity.ERROR
            names = ", ".join(str(w.ref) for w in missing)
            choice = declared[0] if declared else "PORT"
            value: int | str = int(choice) if choice.isdigit() else choice
            yield Hit(
                svc,
                f"port {p.port} targets {p.target!r}, which no container of {names} exposes"
                f" (declared: {', '.join(declared) or 'none'})",
                fix=dump({"spec": {"ports": [{"port": p.port, "targetPort": value}]}}),
                line=p.line,
                severity=severity,
            )


@rule("SVD206", "service-selects-mixed-workloads", Cause.BACKEND, Severity.WARNING)
def service_selects_mixed_workloads(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """One Service selects the pods of two or more workloads.

    ## What it does
    Flags Services whose selector matches the pod templates of more than one workload.

    ## Why it matters
    The Service balances over all of them as one backend set: a version skew, a canary, a
    debug copy or a different app with a common label silently takes its share of requests.
    If one of them is broken, that share fails: a stable, round-looking error rate.

    ## Example
    Bad:
    ```yaml
    kind: Service
    spec:
      selector: {app: shop}
    # selects Deployment shop-api and Deployment shop-worker (both labelled app: shop)
    ```
    Good:
    ```yaml
    kind: Service
    spec:
      selector: {app: shop, component: api}
    ```

    ## Fix
    Add a label that only the intended workload's pods carry to the selector. For deliberate
    canaries, suppress with a reason: `ignore.svcdoctor.io/SVD206: "canary by design"`.

    ## References
    - https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/
    """
    del settings
    for svc in inventory.services:
        workloads = inventory.targeted(svc)
        if len(workloads) < 2:
            continue
        assert svc.selector is not None
        first = workloads[0]
        extra = {k: v for k, v in first.template.labels.items() if k not in svc.selector}
        fix_selector = dict(svc.selector)
        for k, v in extra.items():
            if all(w.template.labels.get(k) != v for w in workloads[1:]):
                fix_selector[k] = v
                break
        yield Hit(
            svc,
            f"Service {svc.ref.name} selects pods of {len(workloads)} workloads: "
            + ", ".join(str(w.ref) for w in workloads),
            fix=dump({"spec": {"selector": fix_selector}})
            + f"\n# (and the same label on the pod template of {first.ref} only)"
            if fix_selector != svc.selector
            else "# add a label that only the intended workload carries, and select on it",
        )


@rule("SVD207", "service-selects-nothing", Cause.BACKEND, Severity.WARNING)
def service_selects_nothing(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The Service's selector matches no workload in the inputs.

    ## What it does
    Flags Services with a selector that matches no pod template in the same namespace. When
    the inputs hold no workload of that namespace at all (partial inputs), the finding is
    `info`.

    ## Why it matters
    A Service with no endpoints refuses every connection; a typo in a selector label is the
    usual cause. When the workload exists elsewhere, lint them together so the serving
    checks can run.

    ## Example
    Bad:
    ```yaml
    kind: Service
    spec:
      selector: {app: chekout}   # typo
    ```
    Good:
    ```yaml
    kind: Service
    spec:
      selector: {app: checkout}
    ```

    ## Fix
    Make the selector match the pod template's labels (`kubectl get pods -l KEY=VALUE` must
    list the backends), or lint the Service together with its workload.

    ## References
    - https://kubernetes.io/docs/concepts/services-networking/service/#services-without-selectors
    """
    del settings
    for svc in inventory.services:
        if not svc.selector or inventory.targeted(svc) or svc.type == "ExternalName":
            continue
        same_ns = [
            w for w in inventory.workloads if w.serving and w.ref.namespace == svc.ref.namespace
        ]
        selector = ", ".join(f"{k}={v}" for k, v in svc.selector.items())
        if same_ns:
            yield Hit(
                svc,
                f"selector {selector} matches no pod template of the {len(same_ns)} "
                "workload(s) of this namespace in the inputs: the Service has no endpoints",
                fix="# make spec.selector match the pod template labels of the backing workload",
            )
        else:
            yield Hit(
                svc,
                f"selector {selector} matches no workload in the inputs (none of this "
                "namespace was given); lint the Service with its workload",
                fix=f"# lint them together: svcdoctor lint {svc.location.file} WORKLOAD.yaml",
                severity=Severity.INFO,
            )
