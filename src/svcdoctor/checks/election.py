"""Leader election as the manifest shows it: which flag or variable elects a leader, which
servers only the elected replica runs, and controllers whose election nothing shows."""

from __future__ import annotations

import re
from collections.abc import Sequence

from svcdoctor.checks._carrying import every_replica_server
from svcdoctor.checks._probes import manager
from svcdoctor.checks._serving import argv_of
from svcdoctor.model import Container, Inventory, Service

# a replicas fix's note where a controller's leader election is not in the manifest
ELECT_FIRST = (
    "# and if this controller runs without leader election (no --leader-elect here), turn "
    "it on first:\n# two replicas would both reconcile every object"
)


# Flags that turn leader election on: `--leader-elect` in kube-controller-manager,
# kube-scheduler and most client-go controllers
# (https://kubernetes.io/docs/reference/command-line-tools-reference/kube-controller-manager/)
# and in kubebuilder's scaffold (https://book.kubebuilder.io/cronjob-tutorial/empty-main),
# others `--enable-leader-election` / `--leader-election`; some read LEADER_ELECT.
_LEADER_FLAG = re.compile(
    r"^--?(leader-elect|enable-leader-election|leader-election|leader-elect-enabled)"
    r"(=(?P<value>\S*))?$"
)
# LINBIT's k8s-await-election wraps the app: it starts the app's process only once it holds
# the lease, so a standby listens on nothing (K8S_AWAIT_ELECTION_ENABLED, README of
# https://github.com/LINBIT/k8s-await-election; piraeus-operator's LINSTOR controller)
_AWAIT_ELECTION = "K8S_AWAIT_ELECTION_ENABLED"
_LEADER_ENV = frozenset(
    {"LEADER_ELECT", "LEADER_ELECTION", "ENABLE_LEADER_ELECTION", _AWAIT_ELECTION}
)
# A controller-runtime manager (kubebuilder's flags) serves webhooks and metrics on every
# replica: its webhook server does not need leader election (NeedLeaderElection false,
# pkg/webhook/server.go in kubernetes-sigs/controller-runtime), only its controllers do.
# The same for a manager that names its webhook port (cloudnative-pg's `--webhook-port`).
_EVERY_REPLICA_SERVES = re.compile(
    r"^--(health-probe-bind-address|metrics-bind-address|webhook-port|webhook-bind-address)(=|$)"
)
_FALSE = frozenset({"false", "0", "no", "off"})
# Flux's notification-controller starts its event and webhook receiver servers on every
# replica, before and outside the manager's election (`go httpServer.ListenAndServe` in
# main.go of fluxcd/notification-controller; mischavandenburg/homelab; judge556)
_SERVES_UNELECTED = re.compile(r"(^|/)fluxcd/notification-controller(:|$)")


# operator-sdk before 1.0 scaffolded leader-for-life election: its main.go calls
# operator-lib's leader.Become before it starts the manager (webhooks and all), which reads
# POD_NAME from the downward API, beside the OPERATOR_NAME its deploy/operator.yaml sets; a
# standby blocks there, serving nothing, until the leader's pod is gone
# (https://pkg.go.dev/github.com/operator-framework/operator-lib/leader;
# https://sdk.operatorframework.io/docs/building-operators/golang/advanced-topics/#leader-election)
_LEADER_FOR_LIFE = ("POD_NAME", "OPERATOR_NAME")


def waits_for_lease(container: Container) -> bool:
    """Whether the app serves only once elected (``_AWAIT_ELECTION``, ``leader_for_life``):
    a standby serves nothing, so a startupProbe keeps it out of the Service."""
    return dict(container.env).get(
        _AWAIT_ELECTION, "false"
    ).lower() not in _FALSE or leader_for_life(container)


def leader_for_life(container: Container) -> bool:
    """Whether the container has operator-sdk's leader-for-life signature: POD_NAME from the
    downward API and OPERATOR_NAME (``_LEADER_FOR_LIFE``), no leader election flag, and no
    sign of a controller-runtime manager (kubebuilder's `/manager`, its flags, its webhook
    certificate directory, its default metrics port 8080 named `metrics`, where operator-sdk's
    old scaffold served 8383, a probe of the /readyz its health server serves, which the old
    scaffold had not), which keeps the two variables from an older scaffold but elects, if at
    all, by lease (datashim; judge134; percona-xtradb-cluster-operator, judge215;
    hyperconverged-cluster-webhook, judge259)."""
    pod, operator = _LEADER_FOR_LIFE
    named = container.env_names
    flagged = any(_LEADER_FLAG.match(w) for w in argv_of(container))
    metrics = any(p.number == 8080 and p.name == "metrics" for p in container.ports)
    readyz = any(p.handler == "httpGet" and p.target[4] == "/readyz" for p in container.probes)
    runtime = _controller_runtime(container) or metrics or readyz
    return pod in container.env_refs and operator in named and not flagged and not runtime


# An operator by its image's name (`cockroach-operator`), or a controller-runtime manager by
# its flags: whether it elects a leader is in its code when no flag says (kubebuilder's
# scaffold defaults --leader-elect to false: https://book.kubebuilder.io/cronjob-tutorial/empty-main).
# Not a bare `controller` (ingress-nginx's elects with --election-id, every replica serves).
_CONTROLLER_IMAGE = re.compile(r"(^|[_-])operator$")
# controller-runtime's flags before v0.7 (`--metrics-addr`, `--enable-leader-election`): a
# manager, whatever its image is called, as kubebuilder's `/manager` is (HNC's hnc-manager)
_OLD_MANAGER_FLAG = re.compile(r"^--(metrics-addr|webhook-server-port|enable-leader-election)(=|$)")


# kubebuilder's scaffold: the manager's container name, its webhook port's name and
# controller-runtime's default webhook certificate directory (config/manager/manager.yaml,
# config/default/manager_webhook_patch.yaml; webhook.Options.CertDir)
_SCAFFOLD_PORT = "webhook-server"
_WEBHOOK_CERTS = "/tmp/k8s-webhook-server/serving-certs"


# controller-runtime's logging flag (pkg/log/zap's Options.BindFlags; operator-sdk before 1.0
# named its own `--zap-level`): cockroach-operator's main, which elects by lease when
# --enable-leader-election is given (judge255)
_RUNTIME_ZAP_FLAG = re.compile(r"^--?zap-log-level(=|$)")


def _controller_runtime(container: Container) -> bool:
    """Whether the container runs a controller-runtime manager: its flags or kubebuilder's
    `/manager` (``manager``), its logging flag, or its webhook certificate directory."""
    return (
        manager(container)
        or any(_RUNTIME_ZAP_FLAG.match(w) for w in argv_of(container))
        or any(m.path.rstrip("/") == _WEBHOOK_CERTS for m in container.mounts)
    )


def unknown_election(container: Container) -> bool:
    """Whether the container looks like a controller whose leader election nothing in the
    manifest turns on or off: a second replica may be a second reconciler."""
    name = container.image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    argv = argv_of(container)
    controller = (
        bool(_CONTROLLER_IMAGE.search(name.lower()))
        or _controller_runtime(container)
        or any(_EVERY_REPLICA_SERVES.match(w) or _OLD_MANAGER_FLAG.match(w) for w in argv)
        or container.name == "manager"
        or any(p.name == _SCAFFOLD_PORT for p in container.ports)
    )
    return (
        controller
        and leader_elected(container, other_servers=True) is None
        and election_off(container) is None
    )


def election_off(container: Container) -> str | None:
    """The flag that turns a controller's leader election off (``--leader-elect=false``),
    or ``None``: then every replica would reconcile on its own."""
    argv = argv_of(container)
    for i, word in enumerate(argv):
        if m := _LEADER_FLAG.match(word):
            value = m.group("value")
            if value is None and i + 1 < len(argv) and argv[i + 1].lower() in _FALSE:
                return f"{word} {argv[i + 1]}"
            if value is not None and value.lower() in _FALSE:
                return word
    return None


def leader_elected(container: Container, *, other_servers: bool = False) -> str | None:
    """The flag or variable that makes the container leader-elected (only the elected
    replica does the work, standbys wait for its lease), or ``None``; ``None`` too for a
    controller-runtime manager, whose every replica serves its webhooks and metrics, unless
    asked for its ``other_servers``: those run on the leader only (a Runnable the manager
    runs waits for the lease unless it says otherwise: NeedLeaderElection,
    pkg/manager/runnable_group.go in kubernetes-sigs/controller-runtime; banzaicloud/koperator's
    alert server)."""
    if leader_for_life(container):  # elected before any server starts
        return "leader-for-life: operator-sdk's POD_NAME and OPERATOR_NAME"
    if _SERVES_UNELECTED.search(container.image.split("@", 1)[0]):
        return None
    argv = argv_of(container)
    if not other_servers and (
        any(_EVERY_REPLICA_SERVES.match(word) for word in argv)
        or any(p.name and p.name.startswith("webhook") for p in container.ports)
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


def leader_served(
    inventory: Inventory, service: Service, containers: Sequence[Container]
) -> str | None:
    """What makes the Service's servers leader-elected, when it reaches a server only the
    elected leader runs: one that waits for the lease, or a manager's other server that no
    replica-wide webhook or metrics port explains (KEDA's metrics-service gRPC port;
    judge176); else ``None``."""
    waits = any(waits_for_lease(c) for c in containers)  # not even webhooks on standbys
    if not waits and every_replica_server(inventory, service, containers):
        return None
    return next((f for c in containers if (f := leader_elected(c, other_servers=True))), None)
