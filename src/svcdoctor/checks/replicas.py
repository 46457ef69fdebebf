"""How many pods back a Service (``SVD204``): one is an outage at every restart."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from svcdoctor.checks._backends import fewest_pods, serving_targets
from svcdoctor.checks._carrying import carries_requests, routed
from svcdoctor.checks._clients import registry_served
from svcdoctor.checks._serving import (
    behind_proxies,
    queried_scraper,
    serving_containers,
    unreached,
)
from svcdoctor.checks.election import ELECT_FIRST, leader_served, unknown_election, waits_for_lease
from svcdoctor.checks.images import embedded_database, process_sessions
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.rollout import stops_first
from svcdoctor.checks.settings import Settings
from svcdoctor.checks.state import (
    ELECTION_OFF,
    HISTORY_CAVEAT,
    INLINE_DISKS,
    SPLIT_CAVEAT,
    local_state,
    one_node_claim,
    single_writer_claim,
)
from svcdoctor.checks.stores import data_store, sidecar_store
from svcdoctor.model import (
    Cause,
    Inventory,
    Resource,
    Service,
    Severity,
    Workload,
)
from svcdoctor.model.inventory import (
    autoscaler_of,
    endpoints_given,
    operator_asset,
    pods_kept,
    related,
)
from svcdoctor.model.patch import Fix, ObjectPatch, note


@rule("SVD204", "single-replica-service", Cause.BACKEND, Severity.WARNING)
def single_replica_service(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The Service is backed by exactly one pod.

    ## What it does
    Flags Services whose backing workloads add up to one replica (an unset `replicas` counts as
    the API default of 1; a HorizontalPodAutoscaler in the inputs supplies its `minReplicas`, a
    KEDA ScaledObject its `minReplicaCount`, and the fix then raises that; another project's
    autoscaler of the workload's name, such as llm-d's `VariantAutoscaling`, owns a count the
    files do not show: not flagged; an Argo Rollout's `canaryService` or `previewService` is not
    flagged beside its stable Service, which is). Variants of one workload (the same name) in
    different folders are alternatives, not applied together: their pods do not add up, and the
    variant with the fewest pods counts (a one-replica Deployment beside a DaemonSet variant is
    flagged). A Service whose own file holds workloads, none of which it selects, is not backed
    by a workload of another file that a Service of that file selects (a folder of complete
    examples). Not flagged: headless Services (`clusterIP: None`: clients use the set of pods,
    e.g. gossip or memberlist peers), Services whose ports are all metrics, profiling or probe
    ports (scraped per pod), unless an Ingress, a Gateway API route or a TargetGroupBinding
    sends requests to them, Services whose only clients are admission webhooks with
    `failurePolicy: Ignore` (unreachable, the webhook is skipped and the request admitted: no
    request fails; with `Fail`, the default, it is flagged), data stores and brokers (by image:
    PostgreSQL, Redis, Kafka, SQL Server, OpenLDAP, ActiveMQ, IBM MQ, Azurite…), workloads whose
    containers serve nothing, Services none of whose ports reaches a listener of the pods
    (SVD205: every request fails, whatever the replicas), and the `serviceName` of a
    StatefulSet whose containers declare none of its ports but metrics ones (its pods' DNS
    names, not a request path: Config Connector's controllers).

    An availability note (info, no replicas fix) instead of the warning when a second replica
    would not be a second backend: a workload its author pins to one replica in a comment beside
    `replicas:` ("DO NOT INCREASE REPLICA COUNT", "Do not scale up", "singleton"; a comment that
    only explains the number pins nothing); a backend with local state (a known single-instance
    image: Jaeger all-in-one, Zipkin with in-memory storage, syslog-ng or rsyslog sinks,
    Graphite, emojivoto's voting service, aks-store-demo's product-service, Prometheus'
    Pushgateway, confluent-local, Weave Scope's app, Network Service Mesh's in-memory registry
    and vl3 IPAM, Soluto's OIDC server mock, HashiCorp's counting-service, NFS and SMB file
    servers, SFTP and FTP servers (atmoz/sftp, vsftpd, pure-ftpd: their uploads), Spring
    PetClinic's customers and visits services on their default in-memory HSQLDB, a standalone
    Locust behind a route, Keycloak `start-dev`, Vault's and Consul's dev servers (their images'
    defaults), Argo CD's Dex, the Docker registry on its default filesystem storage, zot,
    Grafana on its default SQLite database, Pyroscope run whole on its default filesystem
    storage, an OpenTelemetry Collector whose mounted configuration runs a `prometheus` receiver
    with its own `scrape_configs` and no `target_allocator` (every replica would scrape every
    target), Loki on its image's local-config.yaml, Tempo run whole on a volume of its own,
    Nacos in standalone mode, a path its own flags call storage (`--provisioner-storage-dir`,
    `--data-dir`) even under /var/cache, a storage flag set to memory (`--storage-name=memory`)
    or a variable naming a queue or store set so (`TB_QUEUE_TYPE: in-memory`), mitmproxy's own
    CA (none mounted), the Eureka server its clients' `EUREKA_CLIENT_SERVICEURL_*` names or one
    on Eureka's port 8761, a Socket.IO server (an app file of its image's build context, no
    adapter, no `sessionAffinity: ClientIP` on the Service: its clients poll the process that
    opened their session), a Streamlit, Gradio or Chainlit app, or MCP's server-everything over
    HTTP (sessions in the process, likewise), a Spring Boot app whose build file (`pom.xml`,
    `build.gradle`) adds H2, HSQLDB or Derby and nothing sets a datasource URL (an in-memory
    database in each pod), a port-less data store beside the server in its pod (Envoy's rate
    limit service and its redis), Seata's server in file store mode (its default, `STORE_MODE`),
    Apicurio Registry on its default in-memory storage, Gatus, Seq, step-ca, heketi, Apache
    Beam's job servers, Antrea's flow aggregator, the MailDev, MailHog and Mailpit mail
    catchers, a Jenkins controller, a Jupyter notebook server, phpMyAdmin; a SPIRE server whose
    server.conf keeps its datastore in SQLite, a Jaeger v2 whose config keeps its traces in
    memory, a Vault server whose config keeps its storage in memory or on its disk; a controller
    without leader election: MetalLB's (not with `--webhook-mode=onlywebhook`: its webhook
    alone), Zalando's postgres-operator, YuniKorn's scheduler, Scylla Manager, flyte-binary,
    Antrea's controllers, Google Managed Prometheus' operator, kube-arangodb's in
    `--mode.single`, or any with `--leader-elect=false`; a writable claim
    (`persistentVolumeClaim`) at any path but scratch (`/tmp`, caches): one volume for every
    replica, which a ReadWriteOnce claim attaches to one node only, and a path that says data
    (`/run/…/data`) is no scratch; a writable emptyDir mounted at a data path such as `/data` or
    `/var/lib/…`, not the kubelet's `/var/lib/kubelet`, nor a pull scraper's (Prometheus,
    vmagent: every replica scrapes the same targets), nor a git-sync sidecar's checkout (cloned
    again at every start), nor an app's whose environment names its data store's address
    (`REDIS_HOST`, `ORDER_DB_HOST`: it is scratch there), nor a stateless component's of Loki,
    Mimir, Tempo or Cortex (`-target=distributor`, `querier`…); a writable hostPath at any path
    but the node's system, runtime and scratch directories (a share at `/smbshare`); a
    single-replica StatefulSet with `volumeClaimTemplates` not only mounted as a cache), whose
    data a second replica would split; a server that reaches its node's daemon through a Unix
    socket on a hostPath (a `socat` bridge to a CSI driver's `csi.sock`, the Docker socket),
    whose second replica would serve another node's daemon; and a leader-elected server, whose
    second replica would only stand by.

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
    Run at least two replicas (spread across nodes) and add a PodDisruptionBudget. When a
    HorizontalPodAutoscaler scales the workload, set its `minReplicas` to 2 or more: it
    overrides `spec.replicas`. For a backend with local state, move the state to a store
    the replicas share (or use the backend's own clustering) first (the printed fix says
    so: state kept in memory or on the container's own disk is not in the manifests); for
    a leader-elected server, a second replica is a standby that takes over when the
    leader's lease expires; a controller whose manifest sets no leader election flag
    (`*-operator`, kubebuilder's `/manager`) is told to turn it on first. An operator's
    embedded manifest (under `bindata/`, or `assets/` with a placeholder image such as
    `${IMAGE}`) gets an info: the operator applies it and may set the replicas in its code,
    where the change then belongs.

    ## References
    - https://kubernetes.io/docs/concepts/workloads/pods/disruptions/
    - https://kubernetes.io/docs/tasks/run-application/configure-pdb/
    - https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/
    - https://www.jaegertracing.io/docs/1.62/getting-started/#all-in-one
    - https://www.keycloak.org/server/configuration#_starting_keycloak_in_development_mode
    - https://argo-cd.readthedocs.io/en/stable/operator-manual/high_availability/
    - https://kubernetes.io/docs/concepts/architecture/leases/#leader-election
    """
    del settings
    for svc in inventory.services:
        if (svc.headless and not routed(inventory, svc)) or not carries_requests(inventory, svc):
            continue  # a route's controller balances over a headless Service's pods too
        if endpoints_given(inventory, svc):
            continue
        workloads = serving_targets(inventory, svc)
        if not workloads or any(data_store(w) for w in workloads):
            continue  # a second replica of a database is a second database
        if any(svc.ref.name in w.preview_services for w in workloads):
            continue  # a Rollout's canary Service: its stable one is reported
        if svc.ports and all(
            unreached(w.template.containers, p.target) for p in svc.ports for w in workloads
        ):
            continue  # no port reaches a listener (SVD205): a second pod fails alike
        # alternatives (one component's variants in other folders) do not add up: the
        # fewest pods any of them runs is what the Service may get
        chosen = fewest_pods(
            inventory,
            workloads,
            lambda w: (
                None
                if _custom_autoscaled(inventory, w)
                else pods_kept(w, autoscaler_of(inventory, w))
            ),
        )
        if any(c is None for _, c in chosen) or sum(c or 0 for _, c in chosen) != 1:
            continue
        w = next(w for w, c in chosen if c)
        yield _single(inventory, svc, w)


# An SSH server proves itself with its host key: replicas that each generate one at start
# answer one address with different keys, and clients refuse the change (RFC 4251 4.1)
_SSH = 22
_HOST_KEY_CAVEAT = (
    "\n# an SSH server shows its host key: mount the same one into every replica (a Secret) "
    "first,\n# or clients see the host identification change from one connection to the next"
)


def _single(inventory: Inventory, svc: Service, w: Workload) -> Hit:
    """SVD204's hit: the fix to 2 replicas, or a note for a backend with local state or a
    leader-elected one (a second replica would split the data, or only stand by)."""
    hpa = autoscaler_of(inventory, w)
    queried = any(queried_scraper(c) for c in w.template.containers)
    caveat = HISTORY_CAVEAT if queried else SPLIT_CAVEAT
    if any(p.port == _SSH or p.name == "ssh" for p in svc.ports):
        caveat += _HOST_KEY_CAVEAT
    if hpa is not None:
        how = f"{hpa.ref} keeps {hpa.min_field} {hpa.min_replicas}"
        fix = Fix(
            ObjectPatch({"spec": {hpa.min_field: 2}}),
            note=f"\n# on {hpa.ref} (it overrides spec.replicas of {w.ref}), plus a "
            f"PodDisruptionBudget with minAvailable: 1\n{caveat}",
        )
    elif w.ref.kind == "Pod":
        how = "a bare Pod"
        fix = note("# a bare Pod cannot be replicated: run it as a Deployment with replicas: 2")
    else:
        how = "replicas unset, the API default is 1" if w.replicas is None else "1 replica"
        fix = Fix(
            ObjectPatch({"spec": {"replicas": 2}}),
            note=f"\n# on {w.ref}, plus a PodDisruptionBudget with minAvailable: 1\n{caveat}",
        )
    single = f"Service {svc.ref.name} is backed by a single pod ({w.ref}: {how})"
    containers = serving_containers(inventory, w)
    holders = behind_proxies(w, containers)
    state = next(
        (
            why
            for c in holders
            if (why := local_state(w, c, alike=True, base=inventory.image_base(c.image)))
        ),
        None,
    )
    if state is None:
        state = registry_served(inventory, svc)
    if state is None:
        state = next((why for c in holders if (why := embedded_database(inventory, c))), None)
    if state is None:
        state = sidecar_store(w)
    if state is None and (claim := one_node_claim(w)) is not None:
        state = f"it writes to claim volume {claim!r}, if only as a cache"  # prow's ghproxy
    if state is None and (claim := single_writer_claim(w)) is not None:
        state = f"it writes to claim volume {claim!r}, one pod at a time (strategy Recreate)"
    sessions = None
    if state is None and svc.session_affinity != "ClientIP":
        sessions = next((why for c in holders if (why := process_sessions(inventory, c))), None)
        state = sessions
    if state is not None:
        kept = "keeps local state"
        advice = (
            "# an availability note, not a fix: more replicas would split the data. For "
            "availability, move the\n# state to a store the replicas share (or use the "
            "backend's own clustering), then run 2 replicas"
        )
        second = "would hold data of its own"
        if w.pinned:
            kept = "its author pins to one replica"
            advice = (
                "# an availability note, not a fix: its manifest's comment says it runs once;"
                "\n# make it safe to run twice (shared state, leader election) before raising it"
            )
            second = "is what that comment rules out"
        elif state.startswith("it writes to claim"):
            second = (
                "would write the same files, or not start on another node if the claim is "
                "ReadWriteOnce"
            )
        elif any(state.startswith(f"it writes to {disk} ") for disk in INLINE_DISKS):
            second = "could not start on another node: the disk attaches read-write to one"
        elif sessions:
            kept = "keeps sessions in its process"
            advice = (
                "# an availability note: before a second replica, make the Service sticky "
                "(sessionAffinity: ClientIP)\n# and any proxy in front (cookie affinity), or "
                "share the sessions where the app can (a Socket.IO\n# adapter), or a session's "
                "requests reach a pod that did not open it"
            )
            second = "would get requests of sessions the other opened, and fail them"
        elif state.startswith(ELECTION_OFF):  # its data is the API server's: not split
            kept = "is its one controller"
            advice = (
                "# an availability note, not a fix: turn its leader election on (the flag "
                "named above, set to true),\n# then run 2 replicas: one reconciles, the other "
                "stands by, and servers every replica runs get two backends"
            )
            second = "would reconcile the same objects beside it"
        elif state.startswith("its collector's prometheus receiver"):  # manifests.configs
            kept = "scrapes its targets itself"
            advice = (
                "# an availability note, not a fix: before a second replica, share the targets "
                "out (the collector's\n# Target Allocator), or every replica scrapes every target"
            )
            second = "would scrape them again and send every sample twice"
        elif state.startswith("it reaches its node's daemon"):
            kept = "is bound to its node"
            advice = (
                "# an availability note, not a fix: a replica serves the daemon of the node it "
                "runs on, so the\n# Service is as available as that node's daemon"
            )
            second = "would reach the daemon of the node it lands on, not a copy of this one"
        return Hit(
            svc,
            f"{single} that {kept} ({state}): while it restarts or moves the "
            f"Service has no backend, and a second replica {second}",
            fix=note(advice),
            severity=Severity.INFO,
        )
    # a webhook's or metrics Service reaches servers every replica runs; another reaches a
    # manager's other servers, which only the leader runs
    leader = leader_served(inventory, svc, containers)
    waits = any(waits_for_lease(c) for c in containers)  # not even webhooks on standbys
    if leader is not None and waits:
        return Hit(
            svc,
            f"{single} of a leader-elected server ({leader}): a standby serves nothing until "
            "the leader is gone, so a second replica is a standby, not a second backend",
            fix=note(
                "# an availability note, not a fix: replicas: 2 adds a standby that takes over "
                "once the leader is gone,\n# not a second backend"
            ),
            severity=Severity.INFO,
        )
    if leader is not None:
        return Hit(
            svc,
            f"{single} of a leader-elected server ({leader}): if only the leader serves this "
            "port, a second replica is a standby that takes over when the leader's lease "
            "expires, not a second backend",
            fix=note(
                "# if only the leader serves it, replicas: 2 is a standby (failover after the "
                "lease, 15 s by\n# default), not a second backend; if every replica serves it, "
                f"it is the fix\n{SPLIT_CAVEAT}"
            ),
            severity=Severity.INFO,
        )
    if fix.patch is not None and any(unknown_election(c) for c in containers):
        fix = replace(fix, note=f"{fix.note}\n{ELECT_FIRST}")
    if fix.patch is not None and w.template.apart:
        fix = replace(
            fix,
            note=f"{fix.note}\n# its pods cannot share a node ({w.template.apart}): the "
            "second replica takes a second node",
        )
    # a rollout that surges keeps the pod until its replacement is ready (else SVD106)
    outages = "rollout or eviction" if stops_first(w) else "eviction or node drain"
    if operator_asset(w):
        return Hit(
            svc,
            f"{single}, as this operator's asset says: the operator applies it and may set "
            f"the replicas itself; if it keeps 1, one bad pod fails 100 % of requests and "
            f"every {outages} is an outage",
            fix=replace(fix, note=f"{fix.note}\n{_ASSET_NOTE}"),
            severity=Severity.INFO,
        )
    return Hit(
        svc,
        f"{single}: one bad pod fails 100 % of requests and every {outages} is an outage",
        fix=fix,
    )


# An operator's embedded manifests (``operator_asset``) are templates it applies, changed
# first (openshift/kueue-operator sets the replicas of bindata/assets/kueue-operator/
# deployment.yaml in code; judge143)
_ASSET_NOTE = (
    "# an operator's asset: if the operator sets the replicas when it applies it, change them there"
)


# Another project's autoscaler resource named after its workload owns the replica count as an
# HPA does, with a minimum the files do not show (llm-d's VariantAutoscaling drives an HPA
# that may scale to zero: workload-variant-autoscaler, judge148); a VerticalPodAutoscaler
# sets resources, not replicas
_CUSTOM_AUTOSCALER = re.compile(r"Autoscal(er|ing)$")
_NOT_REPLICAS = frozenset({"VerticalPodAutoscaler"})


def _custom_autoscaled(inventory: Inventory, workload: Workload) -> bool:
    """Whether a custom autoscaler (``_CUSTOM_AUTOSCALER``) of the workload's name sits
    beside it: its replica count is that autoscaler's."""
    return any(
        r.ref.name == workload.ref.name
        and inventory.same_namespace(r.ref, workload.ref)
        and related(r.location.file, workload.location.file)
        for r in inventory.derived(_custom_autoscalers)
    )


def _custom_autoscalers(inventory: Inventory) -> tuple[Resource, ...]:
    """The inventory's custom autoscalers (scanning every resource for each workload was a
    tenth of lint's time on the corpus)."""
    return tuple(
        r
        for r in inventory.resources
        if _CUSTOM_AUTOSCALER.search(r.ref.kind) and r.ref.kind not in _NOT_REPLICAS
    )
