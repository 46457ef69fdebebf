"""Server configurations in ConfigMaps that tell a workload keeps its data in its own pod.

Dex reads its storage from its config file, usually a ConfigMap mounted into the pod:
``storage: {type: memory}`` keeps every auth code, refresh token and session in the
process, and ``sqlite3`` in a file of the pod; "two or more instances would have
inconsistent data" (https://dexidp.io/docs/configuration/storage/ lists memory and SQLite3
as not for production or high availability; Argo CD's Dex:
https://argo-cd.readthedocs.io/en/stable/operator-manual/high_availability/). Only
ConfigMaps whose data holds both ``issuer`` and ``storage`` are parsed. So is a SPIRE
server.conf whose ``DataStore "sql"`` is sqlite3: the pod keeps its CA and registrations;
a Jaeger v2 config whose ``jaeger_storage`` backend is ``memory``; a Loki config on the
``filesystem`` object store and a Tempo config on the ``local`` backend.

The ``with_*`` functions apply these facts to the workloads that mount the ConfigMaps (their
state, their drain), the claims they mount (shared by several nodes' pods or not), and the
ConfigMaps they take environment variables from (``envFrom``, ``configMapKeyRef``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import yaml

from svcdoctor.manifests.yamlnodes import YMap, mapping_keys, text_of
from svcdoctor.model import Container, Workload
from svcdoctor.model.duration import go_duration
from svcdoctor.model.inventory import Address, file_distance

_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, when PyYAML has it
# ConfigMap (namespace, name, file) -> why a server that mounts it keeps local state ("": it
# keeps none; several examples of one repository may each define a ConfigMap of one name)
LocalStores = dict[tuple[str, str, str], str]


def _config_data(root: yaml.Node) -> tuple[tuple[str, str], list[tuple[str, str]]] | None:
    """A ConfigMap's (namespace, name) and its ``data`` as (key, text) pairs, or ``None``."""
    keys = mapping_keys(root)
    meta, data = mapping_keys(keys.get("metadata") or root), keys.get("data")
    if not isinstance(data, yaml.MappingNode):
        return None
    items = [(_text(k), _text(v)) for k, v in data.value]
    return (_text(meta.get("namespace")), _text(meta.get("name"))), items


def local_store(root: yaml.Node) -> tuple[tuple[str, str], str] | None:
    """The ConfigMap's (namespace, name) and why a Dex, a SPIRE server, a Jaeger v2, a
    Vault, a Loki or a Tempo server reading it keeps local state."""
    if (found := _config_data(root)) is None:
        return None
    ref, items = found
    for key, text in items:
        if key == "grafana.ini" and not _grafana_database(text):
            return ref, GRAFANA_INI_SQLITE
        if "issuer" in text and "storage" in text and (why := _dex_storage(text)):
            return ref, why
        if _SPIRE_SQLITE.search(text):
            return ref, "SPIRE's server.conf keeps its datastore in SQLite in the pod"
        if "jaeger_storage" in text and (why := _jaeger_memory(text)):
            return ref, why
        if vault := _VAULT_LOCAL.search(text):
            return ref, f"Vault's config keeps its storage {vault.group(1)!r} in the pod"
        if _GRAFANA_LOCAL.search(text) and (why := _grafana_local(text)):
            return ref, why
        if "scrape_configs" in text and "receivers" in text and (why := _collector_scrapes(text)):
            return ref, why
    return None


def _collector_scrapes(text: str) -> str | None:
    """Why an OpenTelemetry Collector's config binds it to one replica: a ``prometheus``
    receiver with its own ``scrape_configs`` and no ``target_allocator``, so each replica
    scrapes every target and sends each sample again (the receiver's README, "scaling":
    https://github.com/open-telemetry/opentelemetry-collector-contrib/tree/main/receiver/prometheusreceiver;
    keptn's examples/support/observability; judge331)."""
    config = _parsed(text)
    receivers = config.get("receivers") if config is not None else None
    service = config.get("service") if config is not None else None
    pipelines = service.get("pipelines") if isinstance(service, dict) else None
    if not isinstance(receivers, dict) or not isinstance(pipelines, dict):
        return None
    used = {
        str(r)
        for p in pipelines.values()
        if isinstance(p, dict) and isinstance(p.get("receivers"), list)
        for r in p["receivers"]
    }
    for name, receiver in receivers.items():
        if str(name).split("/", 1)[0] != "prometheus" or not isinstance(receiver, dict):
            continue
        if str(name) not in used:
            continue  # defined, in no pipeline: it does not run
        scrape = receiver.get("config")
        jobs = scrape.get("scrape_configs") if isinstance(scrape, dict) else None
        if (
            isinstance(jobs, list)
            and "target_allocator" not in receiver
            and not all(_self_scrape(job) for job in jobs)
        ):
            return "its collector's prometheus receiver has scrape_configs, no target_allocator"
    return None


# The pod's own address in a collector's config: its environment's pod IP, or loopback
_OWN_HOST = re.compile(
    r"^(?:\$\{(?:env:)?\w*POD_IP\}|localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\]):\d+$"
)


def _self_scrape(job: object) -> bool:
    """Whether a scrape job only scrapes the collector's own pod (its ``:8888`` telemetry,
    the collector chart's default): each replica scrapes itself, no target twice
    (opentelemetry-helm-charts' examples; judge376)."""
    if not isinstance(job, dict) or set(job) - {"job_name", "scrape_interval", "static_configs"}:
        return False
    static = job.get("static_configs")
    targets = [
        t
        for entry in (static if isinstance(static, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("targets"), list)
        for t in entry["targets"]
    ]
    return bool(targets) and all(isinstance(t, str) and _OWN_HOST.match(t) for t in targets)


# Grafana keeps users, dashboards and sessions in SQLite (/var/lib/grafana/grafana.db) unless
# its [database] section names another (type, url or host:
# https://grafana.com/docs/grafana/latest/setup-grafana/configure-grafana/#database): a
# grafana.ini without one leaves it there (kamaji's config/observability; judge244), unless
# the container's GF_DATABASE_* variables name one (``objects``: they win over the file)
GRAFANA_INI_SQLITE = "Grafana's grafana.ini names no database: it keeps its data in SQLite"
_INI_SECTION = re.compile(r"^\s*\[([^\]]+)\]", re.MULTILINE)
_INI_DATABASE = re.compile(r"^\s*(type|url|host)\s*=\s*(\S+)", re.MULTILINE)


def _grafana_database(ini: str) -> bool:
    """Whether a grafana.ini's [database] section names a database other than SQLite."""
    sections = _INI_SECTION.split(ini)
    bodies = dict(zip(sections[1::2], sections[2::2], strict=False))
    found = dict(_INI_DATABASE.findall(bodies.get("database", "")))
    return found.get("type", "sqlite3") != "sqlite3" or bool(
        found.get("url", "").split("://")[0] not in ("", "sqlite3") or found.get("host")
    )


# what a Loki or Tempo config keeping its data on its disk must say, before it is parsed
_GRAFANA_LOCAL = re.compile(r"object_store:\s*filesystem\b|backend:\s*local\b")


def _grafana_local(text: str) -> str | None:
    """Why a Loki or Tempo config keeps its data on the pod's own disk: Loki's
    ``object_store: filesystem`` ("can only be used in single binary mode, with one
    replica": https://grafana.com/docs/loki/latest/configure/storage/#filesystem-storage),
    Tempo's ``storage.trace.backend: local``
    (https://grafana.com/docs/tempo/latest/configuration/#storage); ardanlabs/service's
    dev Loki and Tempo (judge160)."""
    config = _parsed(text)
    if config is None:
        return None
    schema = config.get("schema_config")
    periods = schema.get("configs") if isinstance(schema, dict) else None
    if isinstance(periods, list) and any(
        isinstance(p, dict) and p.get("object_store") == "filesystem" for p in periods
    ):
        return "Loki's schema_config keeps its chunks on the pod's filesystem"
    storage = config.get("storage")
    trace = storage.get("trace") if isinstance(storage, dict) else None
    if isinstance(trace, dict) and trace.get("backend") == "local":
        return "Tempo's storage.trace.backend local keeps its traces on the pod's disk"
    return None


def _jaeger_memory(text: str) -> str | None:
    """Why a Jaeger v2 config keeps its traces in the process: a ``jaeger_storage`` backend
    of type ``memory``, "data will be lost once the process exits", and each replica would
    hold its own traces (https://www.jaegertracing.io/docs/2.20/storage/memory/)."""
    config = _parsed(text)
    extensions = config.get("extensions") if config is not None else None
    storage = extensions.get("jaeger_storage") if isinstance(extensions, dict) else None
    backends = storage.get("backends") if isinstance(storage, dict) else None
    if isinstance(backends, dict) and any(
        isinstance(b, dict) and "memory" in b for b in backends.values()
    ):
        return "Jaeger's jaeger_storage keeps its traces in memory"
    return None


# A SPIRE server's DataStore "sql" plugin on sqlite3 keeps registrations and its CA state in
# the pod's own file; servers of one trust domain share one MySQL or PostgreSQL datastore
# (https://spiffe.io/docs/latest/deploying/spire_server/#plugin-types,
# https://spiffe.io/docs/latest/architecture/scaling_spire/)
_SPIRE_SQLITE = re.compile(
    r'DataStore\s+"sql"\s*\{[^{}]*plugin_data\s*\{[^{}]*database_type\s*=\s*"sqlite3"'
)


# A Vault server's config (HCL) whose storage (`backend` before Vault 0.10) is in memory or
# on the pod's own disk: a second server is a second, separate Vault; replicas share one
# only through raft or an external backend (https://developer.hashicorp.com/vault/docs/configuration/storage/in-memory,
# https://developer.hashicorp.com/vault/docs/configuration/storage/filesystem)
_VAULT_LOCAL = re.compile(r'(?m)^\s*(?:storage|backend)\s+"(inmem|file)"\s*\{')


def _text(node: yaml.Node | None) -> str:
    return node.value if isinstance(node, yaml.ScalarNode) else ""


def _parsed(text: str) -> dict[str, Any] | None:
    """A config's text as a mapping, or ``None`` (not YAML, or no mapping)."""
    try:
        config = yaml.load(text, Loader=_SAFE)
    except yaml.YAMLError:
        return None
    return config if isinstance(config, dict) else None


def _dex_storage(text: str) -> str | None:
    config = _parsed(text)
    if config is None or "issuer" not in config:
        return None
    storage = config.get("storage")
    if not isinstance(storage, dict):
        return None
    kind = storage.get("type")
    if kind == "memory":
        return "Dex's storage is type memory, in the process"
    if kind == "sqlite3":
        settings = storage.get("config")
        file = settings.get("file") if isinstance(settings, dict) else None
        where = "in memory" if file == ":memory:" else "in a file of its pod"
        return f"Dex's storage is sqlite3 {where}"
    return None


# CoreDNS's health plugin: `lameduck DURATION` "will delay shutdown for DURATION. /health
# will still answer 200 OK" (https://coredns.io/plugins/health/): CoreDNS keeps serving that
# long after SIGTERM. Its Corefile is a ConfigMap key the coredns container mounts
# (https://github.com/coredns/deployment/blob/master/kubernetes/coredns.yaml.sed).
COREDNS_HEALTH = "https://coredns.io/plugins/health/"
_LAMEDUCK = re.compile(r"\bhealth\b[^{}\n]*\{[^{}]*?\blameduck[ \t]+(\d+(?:\.\d+)?(?:ms|s|m|h))\b")
# A server on the Kubernetes API server library reads its flags from a config file too
# (OpenShift's `apiServerArguments: {shutdown-delay-duration: [50s]}` in the
# OpenShiftAPIServerConfig its ConfigMap holds; judge283): it fails /readyz at SIGTERM and
# keeps serving that long (the flag: ``checks.drains.FLAG_DRAINS``).
APISERVER_DELAY = (
    "https://github.com/kubernetes/apiserver/blob/master/pkg/server/options/server_run_options.go"
)
_SHUTDOWN_DELAY = re.compile(
    r"^[ \t]*[\"']?shutdown-delay-duration[\"']?[ \t]*:[ \t]*(?:\n[ \t]*-[ \t]*)?[\"']?"
    r"(\d+(?:\.\d+)?(?:ms|s|m|h))\b",
    re.MULTILINE,
)


@dataclass(frozen=True, slots=True)
class ConfigDrain:
    """How long a server reading a ConfigMap keeps serving after SIGTERM, what in the file
    says so, where that is documented, and whether only CoreDNS reads it so."""

    seconds: float
    what: str
    source: str
    coredns: bool = False


# ConfigMap (namespace, name) -> the drain of the server reading it
ConfigDrains = dict[tuple[str, str], ConfigDrain]


def config_drain(root: yaml.Node) -> tuple[tuple[str, str], ConfigDrain] | None:
    """The ConfigMap's (namespace, name) and the drain it sets: its Corefile's health
    lameduck, or an API server's shutdown-delay-duration."""
    if (found := _config_data(root)) is None:
        return None
    ref, items = found
    for key, text in items:
        if key == "Corefile" and (lameduck := _LAMEDUCK.search(text)):
            seconds = go_duration(lameduck.group(1))
            what = f"health lameduck {seconds:g}s in its Corefile"
            return ref, ConfigDrain(seconds, what, COREDNS_HEALTH, coredns=True)
        if "shutdown-delay-duration" in text and (delay := _SHUTDOWN_DELAY.search(text)):
            seconds = go_duration(delay.group(1))
            what = f"shutdown-delay-duration {delay.group(1)} in its mounted config"
            return ref, ConfigDrain(seconds, what, APISERVER_DELAY)
    return None


def _setting(key: str, value: str) -> bool:
    """Whether a ConfigMap's entry may be an environment variable's value."""
    return len(value) <= _ENV_MOST and bool(_ENV_KEY.fullmatch(key))


_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_ENV_MOST = 512  # longer values are files (a script, a config), not settings


def config_values(
    namespace: str, home: str, name: str, values: dict[tuple[str, str, str], dict[str, str]]
) -> dict[str, str] | None:
    """The values of ConfigMap ``name`` of ``namespace`` for a pod defined in file
    ``home`` (of several definitions, the nearest), or ``None`` when the inputs hold none."""
    found = [
        (file, data)
        for (ns, map_name, file), data in values.items()
        if map_name == name and (ns == namespace or {ns, namespace} <= {"", "default"})
    ]
    nearest = _nearest(home, found)
    return nearest[0] if nearest else None


def store_of(namespace: str, home: str, mounted: Iterable[str], stores: LocalStores) -> str:
    """Why a pod of ``namespace`` defined in file ``home`` mounting the ConfigMaps
    ``mounted`` keeps local state: of several definitions of a name, the nearest decides."""
    for mount in dict.fromkeys(mounted):
        found = [
            (file, why)
            for (ns, name, file), why in stores.items()
            if name == mount and (ns == namespace or {ns, namespace} <= {"", "default"})
        ]
        if why := next((why for why in _nearest(home, found) if why), ""):
            return why
    return ""


V = TypeVar("V")


def _nearest(home: str, found: list[tuple[str, V]]) -> list[V]:
    """The values of the (file, value) definitions nearest the file ``home``
    (``file_distance``)."""
    ranks = [file_distance(home, file) for file, _ in found]
    best = min(ranks, default=None)
    return [value for (_, value), rank in zip(found, ranks, strict=True) if rank == best]


# A claim several nodes' pods can hold at once (https://kubernetes.io/docs/concepts/storage/
# persistent-volumes/#access-modes): a surge pod starts beside the old one.
_SHARED_MODES = frozenset({"ReadOnlyMany", "ReadWriteMany"})
# PersistentVolumeClaim (namespace, name, file) -> whether pods of several nodes can hold it
Claims = dict[tuple[str, str, str], bool]


def claim_shared(namespace: str, home: str, claim: str, claims: Claims) -> bool:
    """Whether the claim a pod of ``namespace`` defined in file ``home`` mounts is shared: of
    several definitions of a name (alternative installs: Seafile's ce/, pro/ and cluster/;
    judge425), the nearest decide."""
    found = [
        (file, shared)
        for (ns, name, file), shared in claims.items()
        if name == claim and ns in (namespace, "")
    ]
    nearest = _nearest(home, found)
    return bool(nearest) and all(nearest)


# Argo CD starts Dex only when its settings ConfigMap, argocd-cm, holds `dex.config`
# (https://argo-cd.readthedocs.io/en/stable/operator-manual/user-management/#dex): without it
# `argocd-dex rundex` waits and serves nothing (a homelab's install.yaml; judge384)
ARGOCD_CM = "argocd-cm"
DEX_CONFIG = "dex.config"


@dataclass
class ConfigFacts:
    """What the ConfigMaps and PersistentVolumeClaims among the inputs tell of the pods:
    local stores, drains and shared claims (see their types), and for each ``argocd-cm``
    whether it configures Dex."""

    stores: LocalStores = field(default_factory=dict)
    drains: ConfigDrains = field(default_factory=dict)
    claims: Claims = field(default_factory=dict)
    argocd_dex: list[bool] = field(default_factory=list)
    # ConfigMap (namespace, name, file) -> its short values of variable-like keys, which a
    # container's `envFrom` or `configMapKeyRef` puts in its environment
    values: dict[tuple[str, str, str], dict[str, str]] = field(default_factory=dict)

    @property
    def dex_unconfigured(self) -> bool:
        """Whether the inputs hold Argo CD's settings and none configures Dex."""
        return bool(self.argocd_dex) and not any(self.argocd_dex)


def read_config(file: str, kind: str, root: yaml.Node, facts: ConfigFacts) -> None:
    """Note what a ConfigMap or PersistentVolumeClaim of ``file`` tells of the pods that
    mount it."""
    if kind == "ConfigMap":
        found = _config_data(root)
        if store := local_store(root):
            facts.stores[(*store[0], file)] = store[1]
        elif found:
            facts.stores[(*found[0], file)] = ""
        if found and (values := {k: v for k, v in found[1] if _setting(k, v)}):
            facts.values[(*found[0], file)] = values
        if drain := config_drain(root):
            facts.drains[drain[0]] = drain[1]
        keys = mapping_keys(root)
        if _text(mapping_keys(keys.get("metadata") or root).get("name")) == ARGOCD_CM:
            data = keys.get("data")
            named = mapping_keys(data) if isinstance(data, yaml.MappingNode) else {}
            facts.argocd_dex.append(DEX_CONFIG in named)
    elif kind == "PersistentVolumeClaim":
        keys = mapping_keys(root)
        meta, spec = mapping_keys(keys.get("metadata") or root), keys.get("spec")
        modes = (
            mapping_keys(spec).get("accessModes") if isinstance(spec, yaml.MappingNode) else None
        )
        shared = isinstance(modes, yaml.SequenceNode) and bool(
            {_text(m) for m in modes.value} & _SHARED_MODES
        )
        facts.claims[(_text(meta.get("namespace")), _text(meta.get("name")), file)] = shared


# A host and port a client dials, anywhere in a file's text (an env value, an argument, a
# URL in a ConfigMap): `cart:7070`, `http://cart.shop.svc.cluster.local:7070/`,
# `dns:///cart:7070`. YAML keys are followed by a space, so `port: 7070` is no address. The
# port is found first (a colon and digits are rare in manifests), then the host before it.
_PORT = re.compile(r":(\d{2,5})\b")
_HOST = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")
_NOT_BEFORE = frozenset("_@ABCDEFGHIJKLMNOPQRSTUVWXYZ")  # a word or a user goes on there
Dialed = set[Address]  # (the host's first DNS label, port)
# A StatefulSet pod's own DNS name, dialed without a port (mongo-express'
# `ME_CONFIG_MONGODB_SERVER: db-0.db-headless`): its port is unknown (0). Found as the port
# is: its `-N.` and a letter first (rare), then the name before it.
_POD_TAIL = re.compile(r"-\d+\.[a-z]")
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


# A line that is all comment, of YAML or of a script in it: prose, not an address dialed
# (clickhouse-operator's `# DNS would be like zookeeper-0.zookeepers.etc`; judge221)
_COMMENT_LINE = re.compile(r"^[ \t]*#.*$", re.MULTILINE)


def dialed(text: str) -> Dialed:
    """The (host's first DNS label, port) pairs of the addresses in a file's text, its
    comment lines left out; a StatefulSet pod's name without a port (``_POD_TAIL``) with
    port 0."""
    if "#" in text:
        text = _COMMENT_LINE.sub("", text)
    found: Dialed = set()
    for m in _PORT.finditer(text):
        host = _name_before(text, m.start(), _HOST_CHARS)
        label = host.split(".", 1)[0] if host else ""
        if label and _HOST.fullmatch(label):
            found.add((label, int(m.group(1))))
    known = {host for host, _ in found}
    for m in _POD_TAIL.finditer(text):
        head = _name_before(text, m.start(), _LABEL_CHARS, also="._")
        pod = "" if head is None else head + text[m.start() : m.end() - 2]
        if pod and pod not in known and _HOST.fullmatch(pod):
            found.add((pod, 0))
    return found


def _name_before(text: str, end: int, chars: frozenset[str], also: str = "") -> str | None:
    """The run of ``chars`` that ends at ``end``, or ``None`` where a word or a user goes on
    before it (``_NOT_BEFORE``, or ``also``)."""
    start = end
    while start > 0 and text[start - 1] in chars:
        start -= 1
    if start > 0 and (text[start - 1] in _NOT_BEFORE or text[start - 1] in also):
        return None
    return text[start:end]


# --- what they tell the workloads that mount them or read them into their environment -------


def with_config_state(w: Workload, body: YMap, configs: ConfigFacts) -> Workload:
    """The workload, with why its pods keep local state if a ConfigMap they mount says so,
    and why they serve nothing if their settings say so (Argo CD's Dex unconfigured)."""
    if configs.dex_unconfigured and any(
        "rundex" in (*c.command, *c.args) for c in w.template.containers
    ):
        idle = f"Argo CD's {ARGOCD_CM} has no {DEX_CONFIG}: argocd-dex rundex starts no Dex"
        w = replace(w, template=replace(w.template, idle=idle))
    if not configs.stores or "configMap" not in w.template.volumes.values():
        return w
    mounted = [name for _, name in _mounted(body, "configMap", "name")]
    why = store_of(w.ref.namespace, w.location.file, mounted, configs.stores)
    named = {n for c in w.template.containers for n in c.env_names}
    if why == GRAFANA_INI_SQLITE and any(n.startswith("GF_DATABASE_") for n in named):
        return w  # its environment names the database, which wins over the file
    return replace(w, template=replace(w.template, config_state=why)) if why else w


def with_shared_claims(w: Workload, body: YMap, claims: Claims) -> Workload:
    """The workload, with the claim volumes whose claim pods of several nodes can hold."""
    names = {
        name
        for name, claim in _mounted(body, "persistentVolumeClaim", "claimName")
        if claim_shared(w.ref.namespace, w.location.file, claim, claims)
    }
    return replace(w, template=replace(w.template, shared_volumes=frozenset(names)))


def _mounted(body: YMap, source: str, key: str) -> list[tuple[str, str]]:
    """(volume name, the source's ``key``) of the pod template's volumes of ``source``."""
    return [
        (text_of(v.get("name")), text_of(found.get(key)))
        for v in _seq(_pod_spec(body), "volumes")
        if isinstance(v, YMap) and isinstance(found := v.get(source), YMap)
    ]


def _pod_spec(body: YMap) -> YMap | None:
    """The pod spec of a workload's body: a Pod's own, a CronJob's job's template's, else
    its template's."""
    node: object = body.get("spec")
    if body.get("kind") == "Pod":
        return node if isinstance(node, YMap) else None
    cron = body.get("kind") == "CronJob"
    for key in ("jobTemplate", "spec", "template", "spec") if cron else ("template", "spec"):
        node = node.get(key) if isinstance(node, YMap) else None
    return node if isinstance(node, YMap) else None


def with_config_env(w: Workload, body: YMap, configs: ConfigFacts) -> Workload:
    """The workload, its containers' environment completed with the values of the ConfigMaps
    of the inputs they take it from (`envFrom: configMapRef`, `valueFrom: configMapKeyRef`):
    settings a check reads (a store set to memory: anthos-samples' point-of-sale inventory,
    `CONNECTOR=IN_MEMORY` from its ConfigMap; judge526). A variable the container sets
    itself wins; ``env_from`` stays set unless every source was read."""
    if not configs.values:
        return w
    raw = {
        c.get("name"): c
        for key in ("containers", "initContainers")
        for c in _seq(_pod_spec(body), key)
        if isinstance(c, YMap)
    }
    containers = []
    for c in w.template.containers:
        spec = raw.get(c.name)
        if spec is None:
            containers.append(c)
            continue
        given = {name for name, _ in c.env}
        added: dict[str, str] = {}
        unread = False
        for source in _seq(spec, "envFrom"):
            values = (
                _config(w, source.get("configMapRef"), configs)
                if isinstance(source, YMap)
                else None
            )
            if values is None or not isinstance(source, YMap):
                unread = True  # a Secret's, or a ConfigMap not among the inputs
                continue
            prefix = str(source.get("prefix") or "")
            added.update({f"{prefix}{k}": v for k, v in values.items()})
        for e in _seq(spec, "env"):
            if not isinstance(e, YMap) or not isinstance(value_from := e.get("valueFrom"), YMap):
                continue
            ref = value_from.get("configMapKeyRef")
            values = _config(w, ref, configs)
            if isinstance(ref, YMap) and values and (v := values.get(str(ref.get("key")))):
                added[str(e.get("name"))] = v
        env = (*c.env, *((n, v) for n, v in added.items() if n not in given))
        containers.append(replace(c, env=env, env_from=c.env_from and unread))
    return replace(w, template=replace(w.template, containers=tuple(containers)))


def _config(w: Workload, ref: object, configs: ConfigFacts) -> dict[str, str] | None:
    """The values of the ConfigMap a reference names, or ``None`` (none, or not read)."""
    if not isinstance(ref, YMap) or not isinstance(name := ref.get("name"), str):
        return None
    return config_values(w.ref.namespace, w.location.file, name, configs.values)


def _seq(node: object, key: str) -> list[object]:
    found = node.get(key) if isinstance(node, YMap) else None
    return list(found) if isinstance(found, list) else []


def _coredns(c: Container) -> bool:
    """Whether the container runs CoreDNS: its image, or a build of it with plugins run
    with a Corefile (`-conf /etc/coredns/Corefile`: k8s_gateway; judge550)."""
    return "coredns" in c.image or any(a.endswith("Corefile") for a in (*c.command, *c.args))


def with_config_drain(w: Workload, body: YMap, drains: ConfigDrains) -> Workload:
    """The workload, with the drain a container's mounted ConfigMap sets
    (``manifests.configs.config_drain``: a CoreDNS Corefile's, for CoreDNS only)."""
    if not drains or "configMap" not in w.template.volumes.values():
        return w
    maps = dict(_mounted(body, "configMap", "name"))
    containers = []
    for c in w.template.containers:
        mounted = [maps[m.volume] for m in c.mounts if m.volume in maps]
        drain = next(
            (
                d
                for (ns, name), d in drains.items()
                if name in mounted
                and (ns == w.ref.namespace or {ns, w.ref.namespace} <= {"", "default"})
                and (not d.coredns or _coredns(c))
            ),
            None,
        )
        containers.append(
            replace(c, config_drain=(drain.seconds, drain.what, drain.source))
            if drain is not None and drain.seconds > 0
            else c
        )
    return replace(w, template=replace(w.template, containers=tuple(containers)))
