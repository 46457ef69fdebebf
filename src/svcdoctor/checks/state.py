"""What makes a second replica no second backend: a data store, local state (data in the
process or its own volumes, a node's daemon reached through its socket), a controller that
must run once (leader election itself: ``checks.election``)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from svcdoctor.checks._known_state import (
    ARANGO_OPERATOR,
    CONFIG_HOME,
    UNELECTED_CONTROLLER,
    WEBHOOK_ONLY,
    image_keeps_state,
)
from svcdoctor.checks._serving import argv_of, go_bool, kernel_mounted, runs_locust
from svcdoctor.checks.election import election_off, leader_elected
from svcdoctor.checks.settings import flag_value
from svcdoctor.checks.stores import data_store, stock_local
from svcdoctor.model import Container, Mount, Workload
from svcdoctor.model.images import split_image, without_host

# What a second replica cannot fix, said wherever one is proposed: the manifests show no
# state kept in the process or on the container's own disk (an in-memory cache, an embedded
# database), nor work only one copy may do (an unlocked scheduler: homelab-k12n-gitops'
# settings API; judge462), and the servers lint does not know may do either.
SPLIT_CAVEAT = (
    "# unless the server keeps data of its own (in memory or on its disk, which the manifests "
    "do not show):\n# then a second replica would split it; share that state first; and if "
    "it runs work only one copy may do\n# (a scheduler, a fixed consumer group feeding its "
    "own clients), make that safe to run twice first"
)


# Locust without --master or --worker is one standalone load test: a second one doubles the
# load and keeps statistics of its own (https://docs.locust.io/en/stable/running-distributed.html)
_LOCUST_MODES = ("--master", "--worker")
_LOCUST_MODE_ENV = ("LOCUST_MODE_MASTER", "LOCUST_MODE_WORKER")  # the flags' variables


def _locust_distributed(argv: list[str], env: dict[str, str]) -> bool:
    """Whether Locust runs as a master or a worker (a flag, in a ``sh -c`` script too, or
    its environment variable)."""
    words = " ".join(argv).split()
    return any(m in words for m in _LOCUST_MODES) or any(
        env.get(name, "").lower() in ("true", "1") for name in _LOCUST_MODE_ENV
    )


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
# Each registry signs its upload sessions' state with REGISTRY_HTTP_SECRET, a random one per
# process when unset ("No HTTP secret provided - generated random secret. This may cause
# problems with uploads if multiple registries are behind a load-balancer":
# registry/handlers/app.go of distribution/distribution; microk8s' registry add-on, judge268).
_REGISTRY_SECRET = "REGISTRY_HTTP_SECRET"


def _shares_secret(container: Container) -> bool:
    """Whether the registry's HTTP secret is set (by env, or its config file may set it)."""
    return (
        _REGISTRY_SECRET in container.env_names
        or bool(container.env_from)
        or any(m.path.startswith("/etc/docker/registry") for m in container.mounts)
    )


# Grafana keeps users, dashboards and sessions in SQLite (/var/lib/grafana/grafana.db) unless
# its [database] says mysql or postgres (GF_DATABASE_TYPE / GF_DATABASE_URL); high
# availability needs that shared database first:
# https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#database,
# https://grafana.com/docs/grafana/latest/setup-grafana/set-up-for-high-availability/
_GRAFANA = re.compile(r"(^|/)grafana/grafana(-oss|-enterprise)?(:|@|$)")
# Apicurio Registry keeps its data in memory by default ("In-memory (default)": storage
# options of https://www.apicur.io/registry/docs/apicurio-registry/3.2.x/getting-started/assembly-deploying-registry-operator.html;
# APICURIO_STORAGE_KIND selects sql or kafkasql); 2.x shipped it as apicurio-registry-mem
_APICURIO = re.compile(r"(^|/)apicurio/apicurio-registry(?P<mem>-mem)?(:|@|$)")
_KEYCLOAK = re.compile(r"(^|/)keycloak(/keycloak)?(:|@|$)")
# The legacy jboss/keycloak image uses its embedded H2 unless DB_VENDOR or a database address
# says another (https://hub.docker.com/r/jboss/keycloak; istio-tutorial; judge167); so does
# quay.io/keycloak/keycloak before 17 and its `-legacy` tags, the same WildFly distribution
# (https://www.keycloak.org/2022/02/keycloak-1700-released; IBM's cloud-native-starter
# runs 10.0.2; judge314)
_JBOSS_KEYCLOAK = re.compile(r"(^|/)jboss/keycloak(:|@|$)")
_LEGACY_TAG = re.compile(r"^(\d|1[0-6])\.|-legacy$")


def _legacy_keycloak(image: str) -> bool:
    """Whether the image is Keycloak's WildFly distribution (``_JBOSS_KEYCLOAK``, or
    ``keycloak/keycloak`` tagged before 17 or ``-legacy``)."""
    name, tag, _ = split_image(image)
    return bool(_JBOSS_KEYCLOAK.search(image)) or (
        bool(_KEYCLOAK.search(name)) and bool(_LEGACY_TAG.search(tag))
    )


_KEYCLOAK_DB = re.compile(r"^(DB_ADDR|(POSTGRES|MYSQL|MARIADB|ORACLE|MSSQL)_ADDR)$")


def _on_h2(container: Container) -> bool:
    """Whether a jboss/keycloak container keeps H2: no other DB_VENDOR, no database address."""
    env = dict(container.env)
    if env.get("DB_VENDOR", "h2").lower() != "h2" or container.env_from:
        return False
    return not any(_KEYCLOAK_DB.match(n) for n in {*env, *container.env_refs})


_KEYCLOAK_DEV_DBS = frozenset({"dev-file", "dev-mem"})
_KEYCLOAK_CONF = "/opt/keycloak/conf"


def _default_keycloak_db(container: Container, argv: list[str]) -> bool:
    """Whether nothing sets Keycloak's database, whose default is `dev-file`, an H2 file in
    the container, even in production mode (https://www.keycloak.org/server/all-config#category-database,
    keycloak/keycloak#14811; the NGINX ingress controller's OIDC example; judge200): no
    KC_DB, no --db, no config mounted."""
    named = {n for n, _ in container.env} | container.env_refs
    mounted = any(m.path.startswith(_KEYCLOAK_CONF) for m in container.mounts)
    flagged = any(a == "--db" or a.startswith("--db=") for a in argv)
    return "KC_DB" not in named and not container.env_from and not mounted and not flagged


# Vault's image runs its dev server when given no command (CMD ["server", "-dev"] in
# hashicorp/docker-vault's Dockerfile), whose storage is in memory: a second replica is
# a second, empty Vault (https://developer.hashicorp.com/vault/docs/concepts/dev-server).
_VAULT = re.compile(r"(^|/)(hashicorp/)?vault(:|@|$)")
# Consul's image runs a dev agent when given no command (CMD ["agent", "-dev", "-client",
# "0.0.0.0"] in hashicorp/docker-consul's Dockerfile): "a single-node development server
# that stores everything in RAM" (https://developer.hashicorp.com/consul/commands/agent#_dev)
_CONSUL = re.compile(r"(^|/)(hashicorp/)?consul(:|@|$)")
# mitmproxy creates its certificate authority at its first start, in its config directory
# (~/.mitmproxy: https://docs.mitmproxy.org/stable/concepts/certificates/); its clients are
# made to trust that one CA, which a second replica would not present (actions-runner-
# controller's e2e proxy; judge291). A CA mounted there is shared.
_MITMPROXY = re.compile(r"(^|/)mitmproxy/mitmproxy(:|@|$)")


def _mitmproxy_ca(path: str) -> bool:
    """Whether a mount at ``path`` gives mitmproxy its CA: its config directory, or its CA
    files (mitmproxy-ca.pem, mitmproxy-ca-cert.pem); a config.yaml mounted there alone is
    no CA (wavefront's egress-proxy; judge341)."""
    return path.rstrip("/").endswith(".mitmproxy") or "/mitmproxy-ca" in path


# Pull scrapers: every replica scrapes the same targets and holds the same series, so the
# scratch TSDB or buffer on an emptyDir is no state a second replica would split (Prometheus'
# HA is "identical Prometheus servers":
# https://prometheus.io/docs/introduction/faq/#can-prometheus-be-made-highly-available;
# vmagent's: https://docs.victoriametrics.com/victoriametrics/vmagent/#high-availability).
_SCRAPER = re.compile(
    r"(^|/)(prom|prometheus)/prometheus(:|@|$)|(^|/)victoriametrics/vmagent(:|@|$)"
)
# ...unless it receives remote writes or OTLP pushes: then each replica holds the samples
# sent to it (https://prometheus.io/docs/prometheus/latest/querying/api/#remote-write-receiver,
# #otlp-receiver; the flags before 2.33 and 3.0:
# https://prometheus.io/docs/prometheus/2.55/feature_flags/; the OpenTelemetry demo's
# Prometheus, which its collector pushes to; judge376)
_RECEIVES_WRITES = re.compile(
    r"^--(web\.enable-(remote-write|otlp)-receiver|enable-feature=.*(remote-write|otlp-write))"
)


# A database URL naming SQLite (`sqlite3:db/db.sqlite3`, `file:app.db`, `sqlite::memory:`):
# the data is in the pod (BuoyantIO/booksapp's authors and books; judge169)
_SQLITE_URL = re.compile(r"(?i)^(sqlite3?:[\w./:-]+|file:[\w./-]+\.(db|sqlite3?)\b)")


# ...but each keeps a history of its own (a new one starts empty), which queries through
# one Service alternate between
HISTORY_CAVEAT = (
    "# two Prometheus servers scrape alike, but each keeps its own history (a new one starts "
    "empty):\n# for queries over more than the recent past, merge them (Thanos Query, Promxy) "
    "rather than one Service"
)


def scrapes(container: Container) -> bool:
    """Whether the container is a pull scraper (``_SCRAPER``) that receives no remote writes:
    its replicas hold alike series, not data of their own."""
    argv = argv_of(container)
    return bool(_SCRAPER.search(container.image)) and not any(
        _RECEIVES_WRITES.match(w) for w in argv
    )


# A writable mount holds state when its path says data (`/data`, `/var/lib/grafana`,
# `/badger`, `/exports`…) and neither its path nor its volume's name says scratch, sockets,
# certificates, rendered config, logs or plugins (an emptyDir there is often only there
# because the root filesystem is read-only). `istio-data` is the proxy's scratch, added to
# every injected pod (manifests/charts/istio-control/istio-discovery/files/injection-template.yaml
# in istio/istio).
_DATA_WORD = (
    r"(^|[/_-])(data|db|database|storage|store|state|badger|wal|tsdb|registry|uploads?|"
    r"spool|queue|persist\w*|exports?)($|[/_-])"
)
# /prometheus: the Prometheus image's TSDB (`--storage.tsdb.path=/prometheus`, its Dockerfile)
_DATA_PATH = re.compile(_DATA_WORD + r"|^/var/(lib/)?\w|^/var/?$|^/prometheus/?$", re.IGNORECASE)
_DATA_NAMED = re.compile(_DATA_WORD, re.IGNORECASE)
# The kubelet's own directory (`--root-dir`, /var/lib/kubelet by default:
# https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/) holds the
# node's pod volumes and plugin sockets, mounted by node agents (a CSI plugin's
# `mountpoint-dir`), not data of the pod.
# Squid's cache_dir, conventionally /var/spool/squid (squid.conf.documented's example
# `cache_dir ufs /var/spool/squid 100 16 256`; without one it caches in memory), is a cache:
# a second proxy fills its own. Vector's data_dir (/vector-data-dir in its chart) holds its
# disk buffers and source checkpoints, data in flight each replica keeps for itself; Vector
# asks for several aggregators behind a load balancer (docs' high-availability; judge242).
# A model server's weights (`/models`, a `model-volume`, a Hugging Face cache) are a copy of
# its model store that an init container or the server downloads again on every node
# (aibrix's vLLM samples on a hostPath at /data01/models; judge256; OPEA's TGI and TEI,
# `model-volume` at /data; judge466). A coverage folder is a test build's output
# (Go's GOCOVERDIR: authelia's suites write /authelia/coverage to a hostPath; judge295).
_SCRATCH = re.compile(
    r"(^|[/_.-])(tmp|temp|cache|run|lock|shm|sockets?|certs?|tls|ssl|secrets?|etc|conf(ig)?|"
    r"logs?|plugins?|scripts?|bin|home|shared|static|output|working|istio|kubelet|squid|"
    r"vector-data-dir|models?|huggingface|coverage)($|[/_-])",
    re.IGNORECASE,
)
# A server that answers through a Unix socket on a hostPath volume reaches the daemon of the
# node it runs on (a TCP bridge to a node agent's socket: socat `unix-connect:/csi/csi.sock`,
# deploy/kubernetes-*/hostpath/csi-hostpath-testing.yaml in kubernetes-csi/csi-driver-host-path;
# the Docker or containerd socket): the address forms are socat's `UNIX-CONNECT:`/`UNIX:`
# (http://www.dest-unreach.org/socat/doc/socat.html#ADDRESS_TYPES), gRPC's `unix://`
# (https://github.com/grpc/grpc/blob/master/doc/naming.md) or a `*.sock` path.
_SOCKET = re.compile(
    r"(?i)(?:unix(?:-connect|-client)?:(?://)?(/[^\s,=]+))|(/[^\s,=:]+\.sock(?:et)?)\b"
)
_LOCAL_VOLUMES = frozenset({"emptyDir", "hostPath", "persistentVolumeClaim"})
# A cloud disk written inline in the pod attaches read-write to one node at a time, like a
# ReadWriteOnce claim (https://kubernetes.io/docs/concepts/storage/volumes/#gcepersistentdisk:
# "only one consumer can mount it read-write"; the same for awsElasticBlockStore, azureDisk
# and cinder); TykTechnologies/tyk-kubernetes mounts a gcePersistentDisk in its gateway.
INLINE_DISKS = frozenset(
    {"gcePersistentDisk", "awsElasticBlockStore", "azureDisk", "cinder", "rbd", "iscsi"}
)
# git-sync pulls a git repository into a volume it shares with the app, again at every start
# (https://github.com/kubernetes/git-sync): its emptyDir is a copy every replica has alike
_GIT_SYNC = re.compile(r"(^|/)git-sync(:|@|$)")
# An app whose environment names a data store's address keeps its data there: an emptyDir
# at `/data` beside it is scratch, which dies with the pod anyway (acme_fitness_demo's cart,
# catalog, order and users mount one and name REDIS_HOST, CATALOG_DB_HOST, ORDER_DB_HOST,
# USERS_DB_HOST; its docker-compose runs the same images with no volume).
_STORE_ADDRESS = re.compile(
    r"(?i)^(\w+_)?(db|database|redis|mongo(db)?|postgres(ql)?|pg|mysql|mariadb|cassandra|"
    r"elasticsearch|memcached?|datastore|datasource)(_\w+)?_(host|hostname|url|uri|addr|address|"
    r"server|dsn)$"
)
# A writable hostPath is the node's disk: any path a server writes there that is not the
# node's own system, runtime or scratch directories (devices, kernel and runtime state,
# kubelet and CSI plugin directories, logs, config) is data that stays on that node (a
# samba share at /smbshare: deploy/example/smb-provisioner/smb-server.yaml in
# kubernetes-csi/csi-driver-smb; the kubelet's directories:
# https://kubernetes.io/docs/concepts/storage/volumes/#hostpath). A home or dot directory
# holds a tool's caches a second replica refills: ollama's models in ~/.ollama/models
# ("Where are models stored?", docs/faq.md in ollama/ollama; jpetazzo/container.training
# k8s/kustomize-examples/ollama-with-sidecar mounts a hostPath at /root/.ollama).
_SYSTEM_PATH = re.compile(
    r"^/*$|/\.|^/(dev|sys|proc|etc|run|tmp|boot|lib|lib64|usr|bin|sbin|opt|host|rootfs|csi|root|"
    r"registration|var/(run|log|tmp|lock|lib/(kubelet|docker|containerd|cni|dbus)))(/|$)",
    re.IGNORECASE,
)
# A claim is persistence the user asked for, whatever its path (logs, config, uploads): a
# plain claim is one volume for every replica, and a ReadWriteOnce one attaches to one
# node only (https://kubernetes.io/docs/concepts/storage/persistent-volumes/#access-modes).
# Only true scratch on a claim is no state (e.g. vmware-tanzu/velero
# examples/nginx-app/with-pv.yaml keeps nginx's logs on a ReadWriteOnce claim).
# An explicit data word beats a scratch word: SPIRE's server keeps its sqlite datastore on
# the claim `spire-data` at /run/spire/data (k8s/quickstart/server-statefulset.yaml in
# spiffe/spire-tutorials).
# (and credentials a setup job wrote once for every server to read: a keystore claim that
# seven Deployments mount at .../resources/security, IBM/GameOn-Java-Microservices-on-Kubernetes)
_CLAIM_SCRATCH = re.compile(
    r"(^|[/_.-])(tmp|temp|cache|run|lock|shm|certs?|tls|ssl|secrets?|security|keystores?|"
    r"truststores?)($|[/_-])",
    re.IGNORECASE,
)


def _claim_scratch(mount: Mount) -> bool:
    """Whether a claim mount is scratch: its path or volume name says scratch
    (``_CLAIM_SCRATCH``) and neither says data (``_DATA_WORD``)."""
    words = (mount.path, mount.volume)
    return any(_CLAIM_SCRATCH.search(w) for w in words) and not any(
        _DATA_NAMED.search(w) for w in words
    )


def _grafana_on_sqlite(container: Container) -> bool:
    """Whether Grafana is seen to run on its default SQLite database: no variable naming
    another database (literal or from a Secret), no ``envFrom``, no grafana.ini mounted
    (it may name another database); provisioning mounts under /etc/grafana do not count."""
    env = dict(container.env)
    named = {*env, *container.env_refs}
    return (
        env.get("GF_DATABASE_TYPE", "sqlite3") == "sqlite3"
        and not (_GRAFANA_DATABASE & (named - {"GF_DATABASE_TYPE"}))
        and "GF_DATABASE_TYPE" not in container.env_refs
        and not container.env_from
        and not any(m.path.rstrip("/") in _GRAFANA_INI for m in container.mounts)
    )


# The settings that point Grafana at another database ([database] type, url, host, name,
# user, password: https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#database;
# GF_DATABASE_WAL or _PATH tune SQLite), and where its grafana.ini is mounted
_GRAFANA_DATABASE = frozenset(
    f"GF_DATABASE_{k}{file}"
    for k in ("TYPE", "URL", "HOST", "NAME", "USER", "PASSWORD")
    for file in ("", "__FILE")  # a setting read from a file (Grafana's __FILE suffix)
)
_GRAFANA_INI = frozenset({"/etc/grafana", "/etc/grafana/grafana.ini"})


# Grafana's Loki, Mimir and Tempo, and Cortex, run as microservices by `-target=`: the
# distributors, queriers, query frontends and schedulers keep nothing of their own (the
# ingesters' WAL and the object store hold the data; an emptyDir there is scratch or cache:
# https://grafana.com/docs/loki/latest/get-started/components/)
_LGTM = re.compile(r"(^|/)(grafana/(loki|mimir|tempo)|cortexproject/cortex)(:|@|$)")
_STATELESS_TARGETS = frozenset(
    {"distributor", "querier", "query-frontend", "query-scheduler", "gateway"}
)


# A flag that names where the server keeps what it stores (rukpak's
# `--provisioner-storage-dir=/var/cache/bundles`, `--data-dir`, `--storage-path`)
_STORAGE_FLAG = re.compile(r"^--?[\w.-]*(storage|data)[\w.-]*(dir|path|root|directory)=(/\S+)$")


def _storage_flags(argv: list[str]) -> dict[str, str]:
    """The paths the container's flags name as its storage, each with its flag."""
    return {
        m.group(3).rstrip("/"): a.split("=", 1)[0] for a in argv if (m := _STORAGE_FLAG.match(a))
    }


# A storage flag set to memory (`--storage-name=memory`: clusterpedia's binding-apiserver,
# whose second replica would hold a copy of its own; judge304; `--storage.type=memory`)
_MEMORY_STORAGE = re.compile(
    r"^--?[\w.-]*storage[\w.-]*=(memory|inmemory|in-memory|mem)$", re.IGNORECASE
)


# ...or an environment variable that names a queue or a store and sets it to memory
# (ThingsBoard's monolith, `TB_QUEUE_TYPE: in-memory`: "for development or a single node"
# per its docs, a second replica a second queue; thingsboard-ce-k8s; judge360), or a
# connector or repository (anthos-samples' point-of-sale inventory, `CONNECTOR: IN_MEMORY` in
# the ConfigMap its env reads; judge526)
_MEMORY_ENV_NAME = re.compile(
    r"(QUEUE|STORE|STORAGE|BACKEND|CACHE|CONNECTOR|PERSISTENCE|REPOSITORY)(_?TYPE|_?KIND|_?MODE)?$"
)
_MEMORY_VALUE = frozenset({"memory", "inmemory", "in-memory", "mem", "in_memory"})
# ...or a database kind that lives in a file of the pod (`DATABASE_TYPE=sqlite3`: oceanbase's
# ob-configserver examples; judge397)
_DB_KIND_ENV = re.compile(r"(^|_)(DB|DATABASE)(_?TYPE|_?KIND|_?DRIVER|_?DIALECT|_?ENGINE)$")
_FILE_DATABASES = frozenset({"sqlite", "sqlite3", "h2", "bolt", "boltdb", "badger", "file"})


def _environment_state(container: Container) -> str | None:
    """Why the container's environment keeps its data in the pod: a queue, store or cache
    kind set to memory, or a database kind that is a file."""
    for name, value in container.env:
        setting = f"{name}={value}"
        if value.lower() in _MEMORY_VALUE and _MEMORY_ENV_NAME.search(name.upper()):
            return f"its environment keeps it in memory ({setting})"
        if value.lower() in _FILE_DATABASES and _DB_KIND_ENV.search(name.upper()):
            return f"its environment keeps its database in a file of the pod ({setting})"
    return None


_TEMPO = re.compile(r"(^|/)grafana/tempo(:|@|$)")


def _whole_tempo(
    image: str, argv: list[str], volumes: Mapping[str, str], mounts: Sequence[Mount]
) -> str | None:
    """Why a Tempo run whole (no `-target`, or `all`: its monolithic mode) keeps its traces:
    the blocks and WAL it writes to a volume of its own, wherever mounted (`/tmp/tempo` in
    its examples: https://grafana.com/docs/tempo/latest/setup/deployment/#monolithic-mode)."""
    if not _TEMPO.search(image) or flag_value(argv, "target") not in (None, "all"):
        return None
    for m in mounts:
        local = volumes.get(m.volume) in _LOCAL_VOLUMES and not m.read_only
        if local and not _CONFIG_MOUNT.search(m.path):
            return f"Tempo run whole keeps its traces on volume {m.volume!r} at {m.path}"
    return None


# A mount that holds configuration or certificates, not data
_CONFIG_MOUNT = re.compile(r"(^|/)(etc|conf(ig)?|certs?|tls|secrets?)($|/)", re.IGNORECASE)


def _stateless_target(image: str, argv: list[str]) -> bool:
    """Whether the container is a stateless component of Loki, Mimir, Tempo or Cortex
    (``_STATELESS_TARGETS`` by its ``-target=`` flag)."""
    return bool(_LGTM.search(image)) and flag_value(argv, "target") in _STATELESS_TARGETS


def local_state(
    workload: Workload,
    container: Container,
    *,
    alike: bool = False,
    emptydirs: bool = True,
    data_only: bool = False,
    base: str = "",
) -> str | None:
    """Why the container keeps state of its own that a second replica would not share (its
    manifest's comment beside ``replicas:`` pinning it to one, a known single-instance image,
    a writable claim mount (not scratch, nor one the inputs declare ReadOnlyMany or
    ReadWriteMany: every replica mounts it), a writable emptyDir mount at a data path
    (``_DATA_PATH``; with ``alike``, not a pull scraper's, whose replicas hold alike data:
    ``_SCRAPER``; not an app's whose environment names a data store's address:
    ``_STORE_ADDRESS``), a writable hostPath mount at a data path or any path not the
    node's system or scratch (``_SYSTEM_PATH``), a node's daemon reached through a socket
    on a hostPath (``node_socket``), a single-replica StatefulSet with volumeClaimTemplates
    not only mounted as a cache), or ``None`` for a server with no such sign. Without
    ``emptydirs`` an emptyDir is no sign at all (replicas may hold alike copies in theirs:
    a site's files). With ``data_only``, only data counts: not a controller's role (no
    leader election) nor its node's daemon, which a second pod takes over. ``base``: the
    FROM image of the repository's Dockerfile that builds the image (``Inventory.image_base``:
    a Jenkins built on ``jenkins``, judge252)."""
    if workload.pinned:
        return f"its manifest says in a comment: {workload.pinned!r}"
    image = container.image.split("@", 1)[0]
    env = dict(container.env)
    argv = argv_of(container)
    if known := image_keeps_state(image, env, argv, base):
        return known
    if not data_only and (role := _sole_controller(container)):
        return role
    if kernel_mounted(container):
        return f"image {image} is a file server exporting its own files"
    if runs_locust(container) and not _locust_distributed(argv, env):
        return "a standalone Locust runs the whole load test in the one process"
    if _legacy_keycloak(image) and _on_h2(container):
        return "the legacy Keycloak image keeps its realms in its embedded H2 database"
    words = {word for a in argv for word in a.split()}  # `args: ["start-dev --import-realm"]`
    if _KEYCLOAK.search(image) and "start-dev" in words:  # (confluent's examples; judge459)
        if env.get("KC_DB", "dev-file") in _KEYCLOAK_DEV_DBS:
            return "Keycloak in start-dev mode keeps an embedded database"
        return "Keycloak in start-dev mode keeps sessions in its local cache (no clustering)"
    if _KEYCLOAK.search(image) and "start" in argv and _default_keycloak_db(container, argv):
        return "Keycloak with no database set (KC_DB, --db) keeps its default, an embedded dev-file"
    if "rundex" in argv:
        return "Argo CD's Dex keeps its data in memory"
    # -dev among the words of a `sh -c` script too (the Vault chart's dev mode; judge424)
    dev = not argv or "-dev" in words
    if _VAULT.search(image) and dev:
        return "Vault's dev server, the image's default command, keeps its storage in memory"
    if _CONSUL.search(image) and dev:
        return "Consul's dev agent, the image's default command, keeps its catalog in memory"
    if memory := next((a for a in argv if _MEMORY_STORAGE.match(a)), None):
        return f"its storage is in memory ({memory})"
    if kept := _environment_state(container):
        return kept
    if _MITMPROXY.search(image) and not any(_mitmproxy_ca(m.path) for m in container.mounts):
        return "mitmproxy creates a CA of its own at its first start, which its clients trust"
    if workload.template.config_state:
        return workload.template.config_state
    if _ALERTMANAGER.search(image) and not any(a.startswith("--cluster.peer") for a in argv):
        return "Alertmanager without --cluster.peer keeps silences and notifications in itself"
    configured = "configMap" in workload.template.volumes.values() or container.env_from
    if stock := stock_local(image, argv, env, configured):
        return stock
    if whole := _whole_tempo(image, argv, workload.template.volumes, container.mounts):
        return whole
    if (apicurio := _APICURIO.search(image)) and (
        apicurio.group("mem")
        or ("APICURIO_STORAGE_KIND" not in {*env, *container.env_refs} and not container.env_from)
    ):
        return "Apicurio Registry keeps its data in memory (its default storage)"
    if _GRAFANA.search(image) and _grafana_on_sqlite(container):
        return "Grafana keeps its users and dashboards in a SQLite file (no shared database set)"
    if sqlite := next((f"{k}={v}" for k, v in container.env if _SQLITE_URL.match(v)), None):
        return f"its database is SQLite in the pod ({sqlite})"
    storage = env.get("REGISTRY_STORAGE", "filesystem")
    shared = any(m.volume in workload.template.shared_volumes for m in container.mounts)
    if _REGISTRY.search(without_host(image)) and storage == "filesystem" and not shared:
        return "the registry stores pushed images on its own filesystem (/var/lib/registry)"
    if _REGISTRY.search(without_host(image)) and not data_only and not _shares_secret(container):
        return (
            "the registry signs upload sessions with a secret of its own (no "
            "REGISTRY_HTTP_SECRET): a push whose requests reach another replica fails"
        )
    volumes = workload.template.volumes
    if not data_only and (socket := _daemon_socket(container, volumes)):
        return socket
    read_only = workload.template.read_only_volumes
    synced = {  # a git-sync sidecar's checkout: cloned again at every start, alike everywhere
        m.volume
        for c in workload.template.containers
        if _GIT_SYNC.search(c.image)
        for m in c.mounts
        if volumes.get(m.volume) == "emptyDir"
    }
    scraper = alike and scrapes(container)
    stores = _storage_flags(argv)  # a path its own flags call storage, even under /var/cache
    elsewhere = any(_STORE_ADDRESS.match(name) for name, _ in container.env)
    elsewhere = elsewhere or _stateless_target(image, argv)  # in the store it names, or Loki's
    for m in container.mounts:
        source = volumes.get(m.volume)
        if (
            source in _LOCAL_VOLUMES
            and m.path.rstrip("/") == "/config"
            and CONFIG_HOME.search(image)
        ):
            return f"its image keeps its data in /config ({source} volume {m.volume!r})"
        if (scraper or elsewhere or not emptydirs or m.volume in synced) and source == "emptyDir":
            continue  # its replicas scrape alike, or its data is elsewhere (a store, ingesters)
        if m.volume in workload.template.mount_points and source == "emptyDir":
            continue  # another container mounts into it (CJWorkbench's sandboxes; judge497)
        if m.volume in workload.template.shared_volumes:
            continue  # a ReadOnlyMany or ReadWriteMany claim: every replica mounts it
        if source == "persistentVolumeClaim" and not m.read_only and not _claim_scratch(m):
            return f"it writes to claim volume {m.volume!r} at {m.path}"
        if source in INLINE_DISKS and not m.read_only and m.volume not in read_only:
            return f"it writes to {source} volume {m.volume!r} at {m.path}"
        flag = stores.get(m.path.rstrip("/"))
        if source in _LOCAL_VOLUMES and not m.read_only and flag:
            return f"it keeps its storage ({flag}) on {source} volume {m.volume!r}"
        if (
            source in _LOCAL_VOLUMES
            and not m.read_only
            and (
                _DATA_PATH.search(m.path)
                or (source == "hostPath" and not _SYSTEM_PATH.search(m.path))
            )
            and not _SCRATCH.search(m.path)
            and not _SCRATCH.search(m.volume)
        ):
            return f"it writes to {source} volume {m.volume!r} at {m.path}"
    # a claim template mounted only as a cache (nginx's /var/cache/nginx: deployments/
    # stateful-set/nginx-ingress.yaml in nginx/kubernetes-ingress), or by no container (the
    # OpenTelemetry target allocator chart's example; judge376), holds nothing to split
    scratch = {m.volume for m in container.mounts if _claim_scratch(m)}
    mounted = {m.volume for c in workload.template.containers for m in c.mounts}
    claims = [c for c in workload.claim_templates if c in mounted and c not in scratch]
    if claims and not workload.replicas_placeholder and (workload.replicas or 1) == 1:
        return f"a single-replica StatefulSet with volumeClaimTemplates ({claims[0]!r})"
    # the data it writes, named above, says more than the GPU it reads (Plex's /dev/dri
    # beside its /config claim; judge444, judge450, judge456)
    return None if data_only else _node_device(container, volumes)


# Flagger's load tester keeps its running commands and gates in the process (runner.go and
# gate.go of fluxcd/flagger's pkg/loadtester): a role, not data (judge157)
_FLAGGER_LOADTESTER = re.compile(r"(^|/)(fluxcd|weaveworks)/flagger-loadtester(:|@|$)")


# Headlamp keeps OIDC logins, refresh tokens and its Helm jobs in the process (backend/cmd,
# backend/pkg/auth, backend/pkg/helm of kubernetes-sigs/headlamp; judge172)
_HEADLAMP = re.compile(r"(^|/)headlamp(-k8s/headlamp)?(:|@|$)")
_HEADLAMP_SESSIONS = re.compile(r"^--?(oidc-client-id|enable-helm)(=|$)")


ELECTION_OFF = "it runs with leader election off"
# Programs that elect no leader unless a flag says so, run from an image of several programs:
# Argo CD's ApplicationSet controller (`--enable-leader-election`, false by default:
# https://argo-cd.readthedocs.io/en/stable/operator-manual/server-commands/argocd-applicationset-controller/;
# a homelab's install.yaml, judge384)
# (`entrypoint.sh applicationset-controller` in its own image before Argo CD 2.3)
_ELECTING_ON_REQUEST = {
    "argocd-applicationset-controller": "--enable-leader-election",
    "applicationset-controller": "--enable-leader-election",
}


def _sole_controller(container: Container) -> str | None:
    """Why the container is a controller that must run once (no leader election), or
    ``None``: its role is in the process, which a second replica would duplicate."""
    image = container.image.split("@", 1)[0]
    if _FLAGGER_LOADTESTER.search(image):
        return f"image {image} keeps the commands it runs and its gates in the process"
    if _HEADLAMP.search(image) and any(_HEADLAMP_SESSIONS.match(a) for a in argv_of(container)):
        return "Headlamp keeps its OIDC logins and Helm jobs in the process"
    only_webhook = flag_value(argv_of(container), "webhook-mode") == WEBHOOK_ONLY
    if UNELECTED_CONTROLLER.search(image) and not only_webhook:
        return f"image {image} is a controller without leader election, its state in the process"
    if ARANGO_OPERATOR.search(image) and go_bool(argv_of(container), "mode.single", False):
        return "kube-arangodb's operator in --mode.single must run once (a second one acts too)"
    if off := election_off(container):
        return f"{ELECTION_OFF} ({off}): a second replica is a second controller"
    programs = [word.rsplit("/", 1)[-1] for word in argv_of(container)[:2]]  # after a wrapper
    program = next((p for p in programs if p in _ELECTING_ON_REQUEST), "")
    if program and not leader_elected(container):
        flag = _ELECTING_ON_REQUEST[program]
        return f"{ELECTION_OFF} ({program}'s default, no {flag}): a second is a second controller"
    return None


def single_writer_claim(workload: Workload) -> str | None:
    """The claim volume its pods write when its rollout is ``Recreate``: stopping one before
    starting the next keeps one writer at a time, even on a claim every node may mount
    (torrent clients on a shared ReadWriteMany download folder; judge390); ``None`` else."""
    if workload.strategy != "Recreate":
        return None
    return next(_written(workload, _CLAIM), None)


def one_node_claim(workload: Workload) -> str | None:
    """The volume a container writes that attaches read-write to one node at a time: a
    claim the inputs do not declare ReadWriteMany or ReadOnlyMany, or a cloud disk written
    inline (``INLINE_DISKS``), neither mounted nor attached read-only; ``None`` when there
    is none."""
    written = _written(workload, _CLAIM | INLINE_DISKS)
    return next((v for v in written if v not in workload.template.shared_volumes), None)


_CLAIM = frozenset({"persistentVolumeClaim"})


def _written(workload: Workload, sources: frozenset[str]) -> Iterator[str]:
    """The volumes of these sources a container mounts writable (not ``readOnly`` there,
    nor on the volume)."""
    template = workload.template
    for c in template.containers:
        for m in c.mounts:
            writable = not m.read_only and m.volume not in template.read_only_volumes
            if writable and template.volumes.get(m.volume) in sources:
                yield m.volume


def node_socket(container: Container, volumes: dict[str, str]) -> str | None:
    """Why the container answers for its node's daemon: it names a Unix socket (``_SOCKET``)
    inside one of its hostPath mounts, or mounts a ``*.sock`` hostPath itself
    (``_daemon_socket``), or a device of the node (``_node_device``); ``None`` otherwise. Each
    replica would reach the daemon, and the data, of the node it runs on."""
    return _daemon_socket(container, volumes) or _node_device(container, volumes)


def _daemon_socket(container: Container, volumes: dict[str, str]) -> str | None:
    hostpaths = [m for m in container.mounts if volumes.get(m.volume) == "hostPath"]
    paths = [  # `unix://csi/csi.sock` (CSI's spelling) is /csi/csi.sock
        "/" + (found.group(1) or found.group(2)).lstrip("/")
        for word in argv_of(container)
        for found in _SOCKET.finditer(word)
    ]
    for m in hostpaths:
        root = m.path.rstrip("/")
        for path in [*paths, *([m.path] if _SOCKET.fullmatch(m.path) else [])]:
            if path == m.path or path.startswith(root + "/"):
                return (
                    f"it reaches its node's daemon through the socket {path} "
                    f"(hostPath volume {m.volume!r})"
                )
    return None


def _node_device(container: Container, volumes: dict[str, str]) -> str | None:
    hostpaths = (m for m in container.mounts if volumes.get(m.volume) == "hostPath")
    if device := next((m for m in hostpaths if _DEVICE.match(m.path)), None):
        return f"it reads its node's device {device.path} (hostPath volume {device.volume!r})"
    return None


# A node's device (`/dev/nvidiactl`, a GPU's; not the pseudo-devices every container has)
_DEVICE = re.compile(r"^/dev/(?!(null|zero|u?random|shm|pts|fuse)(/|$))\w")


def keeps_data(w: Workload) -> bool:
    """Whether the pods hold data a surge pod would not have: a data store, or local state
    that is data (not a controller's role: a surge pod takes that over)."""
    return data_store(w) or any(
        local_state(w, c, alike=True, data_only=True) for c in w.template.containers
    )
