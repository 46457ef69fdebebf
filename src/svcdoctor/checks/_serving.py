"""Shared facts for the serving checks: which containers serve, how a shell runs a
``-c`` script, and fix snippets."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from svcdoctor.checks.settings import Drain, Settings
from svcdoctor.model import Container, Inventory, Resource, Service, ServicePort, Workload, remedy
from svcdoctor.model.hops import Hop
from svcdoctor.model.inventory import components
from svcdoctor.model.path import Paths, trace_paths
from svcdoctor.model.route import Route

SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh", "ksh", "mksh"})
# Programs that never listen: a container running only these serves nothing (a pod kept
# alive for `kubectl exec`, a test client, a loop writing files).
IDLE_PROGRAMS = frozenset(
    {
        "sleep", "tail", "cat", "true", ":", "echo", "printf", "date", "touch", "mkdir",
        "ls", "env", "hostname", "wait", "trap", "set", "export", "read", "[", "test",
        "curl", "wget", "nslookup", "dig", "ping", "pause", "/pause", "exit",
    }
)  # fmt: skip
# Wrappers that run their arguments: look through them for the program.
_WRAPPERS = frozenset({"tini", "dumb-init", "busybox", "nohup", "exec", "command", "catatonit"})
_KEYWORDS = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "{", "time"})
_CLOSERS = frozenset({"fi", "done", "}", "esac", "for", "case", "in", ";;", "function"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_POSITIONAL = re.compile(r"\$(?:[@*1-9]|\{[@*1-9#])")
_PAUSE_IMAGE = re.compile(r"(^|/)pause(:|@|$)")
# Images known to ship no shell (and no sleep binary). Distroless ":debug" tags have busybox.
NO_SHELL_IMAGE = re.compile(
    r"(^|/)distroless/(?!.*:debug)|^cgr\.dev/chainguard/(?!.*-dev\b)|(^|/)scratch(:|$)"
    r"|^(registry\.k8s\.io|k8s\.gcr\.io)/(metrics-server|kube-state-metrics|pause)"
)


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command of a script: its words (quotes removed) and whether it redirects."""

    words: tuple[str, ...]
    redirected: bool = False
    before: str = ""  # the operator that precedes it ("" at the start)
    after: str = ""  # the operator that follows it ("" at the end)
    start: int = 0  # index of its first character in the script

    @property
    def program(self) -> str | None:
        """The program it runs (path stripped), looking past keywords, ``VAR=x``, ``exec``
        and init wrappers; ``None`` for loop/case headers and closers."""
        words = list(self.words)
        while words and (words[0] in _KEYWORDS or _ASSIGNMENT.match(words[0])):
            words.pop(0)
        while words and words[0].rsplit("/", 1)[-1] in _WRAPPERS:
            words.pop(0)
            while words and words[0].startswith("-"):
                words.pop(0)
        if not words or words[0] in _CLOSERS:
            return None
        return words[0].rsplit("/", 1)[-1]

    @property
    def execs(self) -> bool:
        words = [w for w in self.words if not _ASSIGNMENT.match(w)]
        while words and words[0] in _KEYWORDS:
            words.pop(0)
        return bool(words) and words[0] == "exec" and len(words) > 1


@dataclass(frozen=True, slots=True)
class Script:
    """A ``-c`` script reduced to what decides whether the shell stays the app's parent."""

    text: str
    commands: tuple[SimpleCommand, ...]
    compound: bool  # if/while/for/case, braces or a subshell
    trailing_newlines: int  # newlines after the last word (comments skipped)
    positional: bool  # runs "$@" / $1…: the program comes from the arguments

    @property
    def lone(self) -> bool:
        """One simple command, no list, pipe, background job or compound command."""
        return len(self.commands) == 1 and not self.compound and self.commands[0].after != "&"

    @property
    def last(self) -> SimpleCommand | None:
        return self.commands[-1] if self.commands else None


def ash_execs_last(script: Script) -> bool:
    """Whether busybox ash execs the last command of a ``-c`` list (after `&&`, `;` or a line,
    nothing after it): ``evalstring(minusc, EV_EXIT)`` in https://git.busybox.net/busybox
    shell/ash.c evaluates that command with EV_EXIT, and ``evalcommand`` then forks not."""
    last = script.last
    ends = script.trailing_newlines == 0 and not script.compound
    return ends and last is not None and last.after == "" and last.before in ("&&", ";", "\n")


def shell_script(argv: tuple[str, ...] | list[str]) -> tuple[str, str] | None:
    """``(shell, script)`` when ``argv`` is ``SHELL [options] -c SCRIPT [arg0 args…]``
    (``-c`` may be clustered, ``-ec``, ``-lc``); arguments after the script are ``$0``,
    ``$1``…, not part of it."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in SHELLS:
        return None
    shell = argv[0].rsplit("/", 1)[-1]
    command_mode = False
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if word.startswith("--"):
            i += 1
            continue
        if len(word) > 1 and word[0] in "-+":
            command_mode = command_mode or (word[0] == "-" and "c" in word[1:])
            i += 1
            continue
        break
    if not command_mode or i >= len(argv):
        return None
    return shell, argv[i]


def parse_script(text: str) -> Script:
    """Split a POSIX shell script into simple commands, honouring quotes, ``$(…)``,
    backquotes, comments and redirections (enough to find the commands, not a full parser)."""
    commands: list[SimpleCommand] = []
    words: list[str] = []
    word: list[str] | None = None
    redirected = False
    target = False  # the next word is a redirection target
    compound = False
    before = ""
    newlines = 0
    start = 0
    i, n = 0, len(text)

    def end_word() -> None:
        nonlocal word, target
        if word is not None:
            if target:
                target = False
            else:
                words.append("".join(word))
            word = None

    def begin(at: int) -> list[str]:
        nonlocal start
        if word is None and not words and not redirected:
            start = at
        return word or []

    def end_command(op: str) -> None:
        nonlocal words, redirected, before
        end_word()
        if words:
            commands.append(SimpleCommand(tuple(words), redirected, before, op, start))
            before = op
        elif op in ("&&", "||", "|"):
            before = op
        words, redirected = [], False

    def scan(start: int, close: str, open_: str = "") -> int:
        """Index just past the ``close`` that ends a quoted or nested part from ``start``."""
        depth, j = 1, start
        while j < n:
            ch = text[j]
            if ch == "\\" and close != "'":
                j += 2
                continue
            if open_ and ch == open_:
                depth += 1
            elif ch == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return n

    while i < n:
        ch = text[i]
        if ch in " \t\r":
            end_word()
            i += 1
            continue
        if ch == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2
                continue
            word = [*begin(i), text[i + 1 : i + 2]]
            newlines = 0
            i += 2
            continue
        if ch == "#" and word is None:
            while i < n and text[i] != "\n":
                i += 1
            continue
        newlines = newlines + 1 if ch == "\n" else (newlines if ch in ";&|" else 0)
        if ch in "'\"`":
            j = scan(i + 1, ch)
            word = [*begin(i), text[i + 1 : j - 1]]
            i = j
            continue
        if ch == "$" and text[i + 1 : i + 2] in ("(", "{"):
            opener = text[i + 1]
            j = scan(i + 2, ")" if opener == "(" else "}", opener)
            word = [*begin(i), text[i:j]]
            i = j
            continue
        if ch in "<>" or (ch == "&" and text[i + 1 : i + 2] == ">"):
            if word is not None and "".join(word).isdigit():
                word = None  # 2>&1: the fd number belongs to the redirection
            end_word()
            j = i + 1
            while j < n and text[j] in "<>&|-":
                j += 1
            while j < n and text[j].isdigit() and text[j - 1] == "&":
                j += 1
            redirected = True
            target = not text[i:j].endswith("&") and not text[j - 1].isdigit()
            i = j
            continue
        if ch in ";&|\n()":
            if ch in "()":
                compound = True
                end_command(ch)
                i += 1
                continue
            op = text[i : i + 2] if text[i : i + 2] in ("&&", "||", ";;", "|&") else ch
            end_command(op)
            i += len(op)
            continue
        word = [*begin(i), ch]
        i += 1
    end_command("")
    if any(c.words[0] in _KEYWORDS | _CLOSERS for c in commands):
        compound = True
    return Script(
        text=text,
        commands=tuple(commands),
        compound=compound,
        trailing_newlines=newlines,
        positional=bool(_POSITIONAL.search(text)),
    )


def _argv(container: Container) -> list[str]:
    return [*container.command, *container.args]


def serves_nothing(container: Container) -> bool:
    """Whether the container runs only programs that never listen: ``sleep infinity``,
    ``tail -f /dev/null``, a bare ``cat`` or shell (kept open by stdin/tty), a
    ``while true; do sleep …; done`` loop, a curl/wget test client, or the pause image.
    A script that runs its arguments (``"$@"``) or anything else counts as serving."""
    argv = _argv(container)
    if not argv:
        return bool(_PAUSE_IMAGE.search(container.image))
    first = SimpleCommand(tuple(argv))
    program = first.program
    if program is None:
        return False
    if program in SHELLS:
        wrapped = argv[argv.index(next(w for w in argv if w.rsplit("/", 1)[-1] == program)) :]
        if len(wrapped) == 1:
            return True  # an interactive shell: serves nothing, with or without a tty
        found = shell_script(wrapped)
        if found is None:
            return False  # runs a script file
        script = parse_script(found[1])
        programs = [c.program for c in script.commands]
        return (
            not script.positional
            and any(programs)
            and all(p is None or p in IDLE_PROGRAMS for p in programs)
        )
    if program in ("cat", "sh"):
        return len(argv) == 1
    return program in IDLE_PROGRAMS and program not in ("echo", "printf", "true", "env")


def serves(container: Container, target: int | str) -> bool:
    """Whether the container declares the port a Service targets (by number or name)."""
    if isinstance(target, int):
        return any(p.number == target for p in container.ports)
    return any(p.name == target for p in container.ports)


def serving_containers(inventory: Inventory, workload: Workload) -> tuple[Container, ...]:
    """Containers behind the workload's Services: those exposing a targeted port, else the
    first container (the app, by convention, when ports are not declared). Containers that
    serve nothing (``serves_nothing``) are never serving, even when a Service selects them
    or they declare the port: a pod of only those gets no serving check."""
    services = inventory.services_of(workload)
    containers = [c for c in workload.template.containers if not serves_nothing(c)]
    if not services or not containers:
        return ()
    ports = [p for s in services for p in s.ports]
    # a metrics sidecar (an exporter, or kube-rbac-proxy behind a `*-metrics` Service) is
    # scraped, not called: when other ports are targeted too, only the containers behind
    # those serve requests
    called = [
        p for s in services if not scrape_only(s) for p in s.ports if not uncalled(p)
    ] or ports
    wanted = [p.target for p in called]
    matched = tuple(c for c in containers if any(serves(c, t) for t in wanted))
    return matched or (containers[0],)


# Ports no client sends requests to: a scraper's (Prometheus' conventions: `metrics`,
# `http-metrics`; https://github.com/prometheus/prometheus/wiki/Default-port-allocations),
# a profiler's (Go's net/http/pprof, https://pkg.go.dev/net/http/pprof) and the kubelet's
# probes (`healthz`, `probes`; https://kubernetes.io/docs/reference/using-api/health-checks/),
# and a placeholder a StatefulSet's governing Service needs (`dummy`: the CSI sidecars'
# examples, deploy/kubernetes/csi-snapshotter in kubernetes-csi/external-snapshotter).
# By name only: 9090, 9100 or 8080 serve requests as often as metrics.
_SCRAPE_PORT = re.compile(
    r"(^|[-_])(metrics|prom|prometheus|monitoring|profiling|pprof|exporter|telemetry|"
    r"probes?|healthz?|livez|readyz|dummy|placeholder)$",
    re.IGNORECASE,
)
# A Service named for metrics (`*-metrics`, kubebuilder's `controller-manager-metrics-service`
# with its one `https` port: config/default/metrics_service.yaml of its scaffold,
# https://book.kubebuilder.io/reference/metrics) whose ports have no name of their own.
_SCRAPE_SERVICE = re.compile(r"[-_](metrics|monitoring|exporter)([-_](service|svc))?$")
# ... or labelled as one (`app.kubernetes.io/component: exporter`, kube-prometheus'
# node-exporter: https://github.com/prometheus-operator/kube-prometheus manifests)
_SCRAPE_COMPONENTS = frozenset({"metrics", "exporter"})
_GENERIC_PORT = frozenset({"http", "https"})


def uncalled(port: ServicePort) -> bool:
    """Whether a Service port is a metrics, profiling or probe port (by its name, or by
    the container port name it targets): scraped or probed, never sent requests."""
    names = (port.name, port.target if isinstance(port.target, str) else None)
    return any(n and _SCRAPE_PORT.search(n) for n in names)


def scrape_only(service: Service) -> bool:
    """Whether the Service only exposes metrics, profiling and probe ports (every port named
    ``metrics``, ``http-metrics``, ``http-profiling``, ``probes``…, or a ``*-metrics`` or
    ``*-exporter`` Service, or one labelled component ``metrics``/``exporter``, whose ports
    are unnamed or only ``http``/``https``): its client is a scraper
    reading pod endpoints, for which a shutdown race costs one scrape."""
    if service.ports and all(uncalled(p) for p in service.ports):
        return True
    named = bool(_SCRAPE_SERVICE.search(service.ref.name))
    labelled = service.labels.get("app.kubernetes.io/component") in _SCRAPE_COMPONENTS
    return (named or labelled) and all(
        p.name is None or p.name in _GENERIC_PORT or uncalled(p) for p in service.ports
    )


def carries_requests(inventory: Inventory, service: Service) -> bool:
    """Whether clients send requests through the Service: a route sends to it, or one of its
    ports is not a metrics, profiling or probe port (by its name, or because a
    ServiceMonitor scrapes it). The one answer every serving rule asks (SVD101-106,
    SVD201-204): a Service only scraped or probed has no request to fail."""
    if routed(inventory, service):
        return True
    return (
        not scrape_only(service)
        and not monitored_only(inventory, service)
        and not ignored_webhook(inventory, service)
    )


def ignored_webhook(inventory: Inventory, service: Service) -> bool:
    """Whether the Service's clients are admission webhooks that all have `failurePolicy:
    Ignore`: when it does not answer, the API server admits the request without it
    (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#failure-policy),
    so a rollout fails no request. One webhook with `Fail` (the default) keeps it serving."""
    cached = _WEBHOOKS[0] if _WEBHOOKS else None
    if cached is None or cached[0] is not inventory.resources:
        calls: dict[tuple[str, str], set[str]] = {}
        for r in inventory.resources:
            for namespace, name, policy in r.webhooks:
                calls.setdefault((namespace or inventory.namespace, name), set()).add(policy)
        _WEBHOOKS[:] = [(inventory.resources, calls)]
    policies = _WEBHOOKS[0][1].get((inventory.namespace_of(service.ref), service.ref.name))
    return policies == {"Ignore"}


# the Services admission webhooks call and their failure policies, for the last resources
_WEBHOOKS: list[tuple[tuple[Resource, ...], dict[tuple[str, str], set[str]]]] = []


def monitored_only(inventory: Inventory, service: Service) -> bool:
    """Whether Prometheus ServiceMonitors in the inputs select the Service and scrape every
    one of its named ports (the prometheus-operator's own Service names its metrics port
    `http`: example/rbac/prometheus-operator in prometheus-operator/prometheus-operator;
    https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.ServiceMonitor)."""
    monitors = _monitors(inventory)
    if not monitors:
        return False
    scraped = {
        port
        for r in monitors
        if inventory.same_namespace(r.ref, service.ref)
        and all(service.labels.get(k) == v for k, v in r.selector.items())
        for port in r.scrapes
    }
    names = [p.name for p in service.ports]
    return bool(scraped) and bool(names) and all(n in scraped for n in names)


_MONITORS: list[tuple[tuple[Resource, ...], tuple[Resource, ...]]] = []


def _monitors(inventory: Inventory) -> tuple[Resource, ...]:
    """The ServiceMonitors with a selector, kept for the last inventory's resources: the
    rules ask once per Service, and scanning every resource each time was most of lint's
    time on the corpus."""
    cached = _MONITORS[0] if _MONITORS else None
    if cached is None or cached[0] is not inventory.resources:
        found = tuple(
            r for r in inventory.resources if r.ref.kind == "ServiceMonitor" and r.selector
        )
        _MONITORS[:] = [(inventory.resources, found)]
    return _MONITORS[0][1]


_ROUTED: list[tuple[tuple[Route, ...], str, frozenset[tuple[str, str]]]] = []


def routed(inventory: Inventory, service: Service) -> bool:
    """Whether a route (an Ingress, a Gateway API route, a TargetGroupBinding) sends to the
    Service: its clients send requests, however its ports are named and even when it is
    headless (the controller balances over its endpoints). The set of routed Services is
    kept for the last inventory's routes: the rules ask once per Service."""
    if not inventory.routes:
        return False
    cached = _ROUTED[0] if _ROUTED else None
    if cached is None or cached[0] is not inventory.routes or cached[1] != inventory.namespace:
        names = frozenset(
            (b.namespace or inventory.namespace_of(r.ref), b.name)
            for r in inventory.routes
            for b in r.backends
            if b.kind == "Service"
        )
        _ROUTED[:] = [(inventory.routes, inventory.namespace, names)]
    return (inventory.namespace_of(service.ref), service.ref.name) in _ROUTED[0][2]


def backed(inventory: Inventory) -> list[tuple[Workload, Container]]:
    """Every (workload, serving container) pair behind some Service."""
    return [(w, c) for w in inventory.workloads for c in serving_containers(inventory, w)]


def racing(inventory: Inventory) -> list[tuple[Workload, Container]]:
    """Serving containers behind a Service that carries requests (``carries_requests``): not
    only metrics-only Services no route sends to (a scraper that misses one scrape during a
    rollout is no failed request)."""
    return [
        (w, c)
        for w, c in backed(inventory)
        if any(carries_requests(inventory, s) for s in inventory.services_of(w))
    ]


def fewest_pods(
    inventory: Inventory, workloads: Sequence[Workload], count: Callable[[Workload], int | None]
) -> list[tuple[Workload, int | None]]:
    """One ``(workload, pods)`` per component (``model.inventory.components``): of a
    component's alternatives (its variants in other folders, whose pods do not add up), the
    one that keeps the fewest known pods; ``None`` pods when none is known (a DaemonSet)."""
    found: list[tuple[Workload, int | None]] = []
    for group in components(workloads, inventory.namespace):
        counts = [(w, count(w)) for w in group]
        known = [(w, c) for w, c in counts if c is not None]
        found.append(min(known, key=lambda wc: wc[1] or 0) if known else counts[0])
    return found


def service_names(inventory: Inventory, workload: Workload) -> str:
    return ", ".join(dict.fromkeys(s.ref.name for s in inventory.services_of(workload)))


def seconds(value: float) -> int:
    """Whole seconds, rounded up (the API takes integers)."""
    return remedy.seconds(value)


def container_drain(settings: Settings, workload: Workload, container: Container) -> Drain | None:
    """How long the container's app keeps serving after SIGTERM (``Settings.drain_of``)."""
    argv = (*container.command, *container.args)
    return settings.drain_of(
        workload.ref.kind, workload.ref.name, container.image, argv, container.config_drain
    )


def has_shell(container: Container) -> bool | None:
    """``False`` for images known to ship no shell, else unknown."""
    return False if NO_SHELL_IMAGE.search(container.image) else None


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
            "clusters use\n#   exec: {command: [sh, -c, 'sleep N']}  (pass --kubernetes-version)"
        )
    return ""


# Images of data stores and brokers: a second replica is a second, separate store (or needs
# the store's own clustering), and stopping the old pod first is deliberate (one writer of
# a ReadWriteOnce volume). Replica and rollout advice does not apply to them.
_DATA_STORE = re.compile(
    r"(?:^|[/_.-])(?:postgres(?:ql)?|postgis|mysql|mariadb|percona|mongo(?:db)?|redis|valkey|"
    r"keydb|rabbitmq|elasticsearch|opensearch|influxdb|cassandra|scylla|kafka|zookeeper|etcd|db|"
    r"memcached|couchdb|couchbase|neo4j|clickhouse|cockroach|documentdb|nats|minio)"
    r"(?:$|[_.-])"
)


_STORE_TOOL = re.compile(
    r"(?:^|[_.-])(?:exporter|ui|commander|operator|proxy|admin|dashboard|client|cli|console|"
    r"browser|web|gui|manager|insight|backup|express|migrat\w*)(?:$|[_.-])"
)


def data_store(workload: Workload) -> bool:
    """Whether the workload runs a data store or broker, by its containers' image names
    (not the tools around one: exporters, UIs, operators, proxies)."""
    for c in workload.template.containers:
        name = c.image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0].lower()
        if _DATA_STORE.search(name) and not _STORE_TOOL.search(name):
            return True
    return False


# Flags that turn leader election on: `--leader-elect` in kube-controller-manager,
# kube-scheduler and most client-go controllers
# (https://kubernetes.io/docs/reference/command-line-tools-reference/kube-controller-manager/)
# and in kubebuilder's scaffold (https://book.kubebuilder.io/cronjob-tutorial/empty-main),
# others `--enable-leader-election` / `--leader-election`; some read LEADER_ELECT.
_LEADER_FLAG = re.compile(
    r"^--?(leader-elect|enable-leader-election|leader-election|leader-elect-enabled)"
    r"(=(?P<value>\S*))?$"
)
_LEADER_ENV = frozenset({"LEADER_ELECT", "LEADER_ELECTION", "ENABLE_LEADER_ELECTION"})
# A controller-runtime manager (kubebuilder's flags) serves webhooks and metrics on every
# replica: its webhook server does not need leader election (NeedLeaderElection false,
# pkg/webhook/server.go in kubernetes-sigs/controller-runtime), only its controllers do.
# The same for a manager that names its webhook port (cloudnative-pg's `--webhook-port`).
_EVERY_REPLICA_SERVES = re.compile(
    r"^--(health-probe-bind-address|metrics-bind-address|webhook-port|webhook-bind-address)(=|$)"
)
_FALSE = frozenset({"false", "0", "no", "off"})


def leader_elected(container: Container) -> str | None:
    """The flag or variable that makes the container leader-elected (only the elected
    replica does the work, standbys wait for its lease), or ``None``; ``None`` too for a
    controller-runtime manager, whose every replica serves its webhooks and metrics."""
    argv = _argv(container)
    if any(_EVERY_REPLICA_SERVES.match(word) for word in argv) or any(
        p.name and p.name.startswith("webhook") for p in container.ports
    ):
        return None
    for i, word in enumerate(argv):
        if m := _LEADER_FLAG.match(word):
            value = m.group("value")
            if value is None and i + 1 < len(argv) and argv[i + 1].lower() in ("true", "false"):
                value = argv[i + 1]
            if (value or "true").lower() not in _FALSE:
                return word if value is None or "=" in word else f"{word} {value}"
    for name, value in container.env:
        if name in _LEADER_ENV and value.lower() not in _FALSE:
            return f"{name}={value}"
    return None


# Servers that keep their data in the one process or its local files, so that a second
# replica would hold data of its own rather than share it (and, last, controllers that
# must run once: ``_UNELECTED_CONTROLLER``):
# - Jaeger all-in-one keeps traces in memory ("not for production", in-memory storage):
#   https://www.jaegertracing.io/docs/1.62/getting-started/#all-in-one
# - Zipkin's server defaults to in-memory storage (STORAGE_TYPE=mem):
#   https://github.com/openzipkin/zipkin/tree/master/zipkin-server#in-memory-storage
# - syslog-ng and rsyslog sinks write what they receive to local files:
#   https://syslog-ng.github.io/admin-guide/070_Destinations/030_File/README
#   https://www.rsyslog.com/doc/configuration/modules/omfile.html
# - Keycloak's `start-dev` uses an embedded H2 file database ("development mode"):
#   https://www.keycloak.org/server/configuration#_starting_keycloak_in_development_mode
# - Argo CD's Dex (`argocd-dex rundex`) "uses an in-memory database, and two or more
#   instances would have inconsistent data":
#   https://argo-cd.readthedocs.io/en/stable/operator-manual/high_availability/
# - MetalLB's controller allocates addresses in memory and runs without leader election
#   (`LeaderElection: false` in internal/k8s/k8s.go, the allocator in controller/main.go of
#   metallb/metallb): two replicas would be two allocators
# - Zalando's postgres-operator has no leader election (no leaderelection in its code) and
#   ships with `replicas: 1`, `strategy: Recreate` (manifests/postgres-operator.yaml of
#   zalando/postgres-operator): two replicas would be two operators on the same clusters
_SINGLE_INSTANCE_IMAGE = re.compile(
    r"(^|/)(jaegertracing/all-in-one|openzipkin/zipkin(-slim)?|[\w.-]*syslog-ng[\w.-]*|"
    r"[\w.-]*rsyslog[\w.-]*)(:|@|$)"
)
_UNELECTED_CONTROLLER = re.compile(r"(^|/)(metallb/controller|zalando/postgres-operator)(:|@|$)")
# Alertmanager keeps silences and its notification log in the process and its data
# directory; replicas share them only as a cluster (`--cluster.peer`), and Prometheus must
# send every alert to each, not through one Service address:
# https://github.com/prometheus/alertmanager#high-availability
_ALERTMANAGER = re.compile(r"(^|/)(prom|prometheus)/alertmanager(:|@|$)")
# The Docker registry image (Docker Hub `registry`, distribution/distribution) stores what
# is pushed on its filesystem, /var/lib/registry, unless configured for another storage
# driver (`storage: filesystem` in the image's config: config-example.yml of
# https://github.com/distribution/distribution-library-image; REGISTRY_STORAGE overrides
# it: https://distribution.github.io/distribution/about/configuration/): a second replica
# would hold other images.
_REGISTRY = re.compile(r"(^|/)((library/)?registry|distribution/distribution)(:|@|$)")
_KEYCLOAK = re.compile(r"(^|/)keycloak(/keycloak)?(:|@|$)")
# A writable mount holds state when its path says data (`/data`, `/var/lib/grafana`,
# `/badger`, `/exports`…) and neither its path nor its volume's name says scratch, sockets,
# certificates, rendered config, logs or plugins (an emptyDir there is often only there
# because the root filesystem is read-only). `istio-data` is the proxy's scratch, added to
# every injected pod (manifests/charts/istio-control/istio-discovery/files/injection-template.yaml
# in istio/istio).
_DATA_PATH = re.compile(
    r"(^|[/_-])(data|db|database|storage|store|state|badger|wal|tsdb|registry|uploads?|"
    r"spool|queue|persist\w*|exports?)($|[/_-])|^/var/(lib/)?\w|^/var/?$",
    re.IGNORECASE,
)
_SCRATCH = re.compile(
    r"(^|[/_.-])(tmp|temp|cache|run|lock|shm|sockets?|certs?|tls|ssl|secrets?|etc|conf(ig)?|"
    r"logs?|plugins?|scripts?|bin|home|shared|static|output|working|istio)($|[/_-])",
    re.IGNORECASE,
)
_LOCAL_VOLUMES = frozenset({"emptyDir", "hostPath", "persistentVolumeClaim"})
# A claim is persistence the user asked for, whatever its path (logs, config, uploads): a
# plain claim is one volume for every replica, and a ReadWriteOnce one attaches to one
# node only (https://kubernetes.io/docs/concepts/storage/persistent-volumes/#access-modes).
# Only true scratch on a claim is no state (e.g. vmware-tanzu/velero
# examples/nginx-app/with-pv.yaml keeps nginx's logs on a ReadWriteOnce claim).
_CLAIM_SCRATCH = re.compile(r"(^|[/_.-])(tmp|temp|cache|run|lock|shm)($|[/_-])", re.IGNORECASE)


def local_state(workload: Workload, container: Container) -> str | None:
    """Why the container keeps state of its own that a second replica would not share (a
    known single-instance image, a writable claim mount (not scratch), a writable
    emptyDir/hostPath mount at a data path (``_DATA_PATH``), a
    single-replica StatefulSet with volumeClaimTemplates), or ``None`` for a server with no
    such sign."""
    image = container.image.split("@", 1)[0]
    in_memory = "zipkin" not in image or dict(container.env).get("STORAGE_TYPE", "mem") == "mem"
    if _SINGLE_INSTANCE_IMAGE.search(image) and in_memory:
        return f"image {image} keeps its data in the one process or its local files"
    if _UNELECTED_CONTROLLER.search(image):
        return f"image {image} is a controller without leader election, its state in the process"
    if _KEYCLOAK.search(image) and "start-dev" in _argv(container):
        return "Keycloak in start-dev mode keeps an embedded database"
    if "rundex" in _argv(container):
        return "Argo CD's Dex keeps its data in memory"
    if workload.template.config_state:
        return workload.template.config_state
    argv = _argv(container)
    if _ALERTMANAGER.search(image) and not any(a.startswith("--cluster.peer") for a in argv):
        return "Alertmanager without --cluster.peer keeps silences and notifications in itself"
    storage = dict(container.env).get("REGISTRY_STORAGE", "filesystem")
    if _REGISTRY.search(image) and storage == "filesystem":
        return "the registry stores pushed images on its own filesystem (/var/lib/registry)"
    volumes = workload.template.volumes
    for m in container.mounts:
        source = volumes.get(m.volume)
        if (
            source == "persistentVolumeClaim"
            and not m.read_only
            and not _CLAIM_SCRATCH.search(m.path)
            and not _CLAIM_SCRATCH.search(m.volume)
        ):
            return f"it writes to claim volume {m.volume!r} at {m.path}"
        if (
            source in _LOCAL_VOLUMES
            and not m.read_only
            and _DATA_PATH.search(m.path)
            and not _SCRATCH.search(m.path)
            and not _SCRATCH.search(m.volume)
        ):
            return f"it writes to {source} volume {m.volume!r} at {m.path}"
    if workload.claim_templates and (workload.replicas or 1) == 1:
        claim = workload.claim_templates[0]
        return f"a single-replica StatefulSet with volumeClaimTemplates ({claim!r})"
    return None


def daemon_gap(w: Workload, services: list[Service]) -> str | None:
    """How a DaemonSet's rolling update leaves a Service without its pods: all nodes at
    once (``maxUnavailable: 100%``), or, when the Service keeps a node's external traffic on
    the node's own pod (``externalTrafficPolicy: Local``), each node while its one pod is
    replaced (``maxSurge`` 0, the default, deletes before it creates; a pod with a hostPort
    cannot surge: two cannot bind one node's port, so it is not flagged)."""
    if w.strategy != "RollingUpdate":  # OnDelete: nothing rolls by itself
        return None
    if w.max_unavailable == "100%":
        return "maxUnavailable 100% replaces every pod of Service {names} at once"
    local = any(
        s.type in ("NodePort", "LoadBalancer") and s.external_traffic_policy == "Local"
        for s in services
    )
    hostport = any(p.host for c in w.template.containers for p in c.ports)
    if local and w.max_surge in (None, 0, "0", "0%") and not hostport:
        return (
            "Service {names} keeps each node's external traffic on the node's own pod "
            "(externalTrafficPolicy Local), and maxSurge 0 deletes that pod before its "
            "replacement is ready: every rollout drops each node's traffic in turn, unless "
            "the pod's preStop outlasts the load balancer's health check"
        )
    return None
