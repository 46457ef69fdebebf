"""Which containers run a data store or a broker, by their image or their command: a
second replica of one is a second, separate store, and stopping it first is deliberate; and
which servers keep a store of their own on their image's default configuration
(``stock_local``)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from svcdoctor.checks.settings import flag_value, tag_version
from svcdoctor.model import Container, Workload
from svcdoctor.model.images import image_name

# Images of data stores and brokers (a directory server's database: OpenLDAP; message
# brokers: ActiveMQ Classic and Artemis, apache/activemq-artemis, Eclipse Mosquitto, which has
# no clustering: dapr-traffic-control's, judge269; Azure Storage's emulator
# Azurite: longhorn's backupstores, judge195; fsouza/fake-gcs-server, Google Cloud Storage's,
# moco's e2e, judge258; LocalStack, AWS's; DynamoDB Local, an in-memory emulator without
# clustering: eks-workshop-v2's carts store, judge248; a Galera cluster of MySQL masters, whose
# clients stay on one master so that their writes do not conflict: trillian's, judge254;
# Hadoop's and HDFS's images, whose NameNode and ResourceManager keep the cluster's state:
# risingwave-operator's risingwave-hdfs example, judge347; SeaweedFS, chrislusf/seaweedfs, an
# S3 server with its volumes in the pod: kubeai's e2e store, judge383; EventStoreDB, now
# KurrentDB, an event-sourcing database: booking-microservices', judge399): a
# second replica is a second, separate store (or needs the store's own clustering), and
# stopping the old pod first is deliberate (one writer of a ReadWriteOnce volume). Replica and
# rollout advice does not apply to them.
_DATA_STORE = re.compile(
    r"(?:^|[/_.-])(?:postgres(?:ql)?|postgis|mysql|mariadb|percona|mongo(?:db)?|redis|valkey|"
    r"keydb|rabbitmq|elasticsearch|opensearch|influxdb|cassandra|scylla|kafka|zookeeper|etcd|db|"
    r"memcached|couchdb|couchbase|neo4j|clickhouse|cockroach|documentdb|nats|minio|openldap|"
    r"activemq|azurite|dynamodb|galera|fake-gcs-server|localstack|mosquitto|hadoop|hdfs|"
    r"seaweedfs|eventstore(?:db)?|kurrentdb)"
    r"(?:$|[_.-])"
)


# (and a pipeline between two, `db-to-streams`, `streams-to-redis-hashes`: the apps of
# redis-microservices-demo; judge503)
_STORE_TOOL = re.compile(
    r"(?:^|[_.-])(?:exporters?|ui|commander|operator|proxy|admin|dashboards?|clients?|cli|console|"
    r"webhooks?|to|"
    r"browser|web|gui|manager|insight|backup|express|migrat\w*)(?:$|[_.-])"
)


# Data stores and brokers whose image's last name says nothing (``mcr.microsoft.com/mssql/server``,
# and before it ``microsoft/mssql-server-linux``;
# IBM MQ's queue manager, ibmcom/mq and icr.io/ibm-messaging/mq:
# https://github.com/ibm-messaging/mq-container):
# https://learn.microsoft.com/sql/linux/quickstart-install-connect-docker,
# https://hub.docker.com/r/microsoft/azure-sql-edge, the OracleDatabase images of
# https://github.com/oracle/docker-images and gvenzl/oracle-xe|free on Docker Hub,
# https://hub.docker.com/r/ibmcom/db2 (icr.io/db2_community/db2)
_DATA_STORE_REPO = re.compile(
    r"(^|/)(mssql(/rhel)?/server|mssql-server-linux|azure-sql-edge|oracle/database|"
    r"gvenzl/oracle-(xe|free)|"
    r"(ibmcom|db2_community)/db2|(ibmcom|ibm-messaging)/mq)(:|@|$)"
)


def data_store(workload: Workload) -> bool:
    """Whether the workload runs a data store or broker, by its containers' image names
    (not the tools around one: exporters, UIs, operators, proxies; nor a port-less store
    beside an app that declares its ports: its local cache, contour's ratelimit with a redis
    sidecar, judge194)."""
    stores = [c for c in workload.template.containers if _store(c)]
    apps = [c for c in workload.template.containers if c.ports and not _store(c, tools=True)]
    return any(c.ports or not apps for c in stores)


def sidecar_store(workload: Workload) -> str | None:
    """Why the pod's server keeps its data in a store of its own pod: a port-less data store
    beside it (``data_store`` takes the pod for the server's): a second replica would run a
    second store (contour's ratelimit and its redis; the sample API server and its etcd)."""
    store = next((c for c in workload.template.containers if _store(c) and not c.ports), None)
    return None if store is None else f"its pod runs {store.image} beside it, a store of its own"


# Data stores' server binaries, run by a container's `command` from an image named for
# something else (Calico's yaobank demo runs `etcd` from spikecurtis/yaobank-database;
# judge223)
_STORE_COMMANDS = frozenset(
    {"etcd", "redis-server", "valkey-server", "keydb-server", "mongod", "postgres", "mysqld"}
    | {"mariadbd", "memcached", "nats-server", "influxd", "clickhouse-server", "minio"}
)


def _store(c: Container, *, tools: bool = False) -> bool:
    """Whether the container runs a data store (``tools``: or a tool around one): by its
    image's name, or by the server its ``command`` runs."""
    if c.command and c.command[0].rsplit("/", 1)[-1] in _STORE_COMMANDS:
        return True
    image = c.image.split("@", 1)[0].lower()
    name = image_name(image)
    if "$" in name:
        return False  # a placeholder (`${KNATIVE_KAFKA_RECEIVER_IMAGE}`) names no image yet
    tool = bool(_STORE_TOOL.search(name))
    # a mirror of test images names the store in the tag (feast-test-images:postgres-17-alpine;
    # judge277)
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    tagged = bool(_DATA_STORE.match(tag)) and not _STORE_TOOL.search(tag)
    return (
        bool(_DATA_STORE.search(name) and (tools or not tool))
        or (tagged and not tool)
        or bool(_DATA_STORE_REPO.search(image))
    )


# Pyroscope run whole (`-target=all`, its default) stores profiles on the filesystem,
# ./data, unless its storage backend is set (`-storage.backend`: cmd/pyroscope/help.txt.tmpl of
# grafana/pyroscope; Grafana Alloy's eBPF example; judge358)
_PYROSCOPE = re.compile(r"(^|/)grafana/pyroscope(:|@|$)")
# Loki's image runs the whole of Loki in one process on its own local-config.yaml (CMD
# ["-config.file=/etc/loki/local-config.yaml"] in cmd/loki/Dockerfile of grafana/loki), which
# keeps chunks and index on the container's filesystem with an in-memory ring and a
# replication factor of 1 (cmd/loki/loki-local-config.yaml): a second one is a second store
_LOKI = re.compile(r"(^|/)grafana/loki(:|@|$)")
_LOKI_LOCAL = "/etc/loki/local-config.yaml"
# Nacos' server image with MODE=standalone (the default is cluster) is a one-node registry
# and config center: its registered instances in memory, its config in embedded Derby unless
# SPRING_DATASOURCE_PLATFORM is mysql (https://github.com/nacos-group/nacos-docker#common-property-configuration)
# (its mirrors too, named nacos: dubbo-samples' registry.cn-hangzhou.aliyuncs.com/.../nacos;
# judge279)
_NACOS = re.compile(r"(^|/)(nacos/nacos-server|nacos)(:|@|$)")
# Seata's server keeps its global transaction sessions in files under its own sessionStore
# in `file` store mode, the image's default (STORE_MODE: db, redis and raft share or
# replicate them: https://seata.apache.org/docs/ops/deploy-by-docker/)
_SEATA = re.compile(r"(^|/)(seataio|apache)/seata-server(:|@|$)")


# SkyWalking's OAP server before 10 stores in H2, in memory, unless SW_STORAGE names another
# (`storage: selector: ${SW_STORAGE:h2}` in oap-server's application.yml,
# https://skywalking.apache.org/docs/main/v9.7.0/en/setup/backend/backend-storage/): a second
# one is a second database (dubbo-samples' skywalking; judge279)
_SKYWALKING_OAP = re.compile(r"(^|/)apache/skywalking-oap-server(:|@|$)")


# Sock Shop's front-end keeps its express sessions in memory unless SESSION_REDIS is set
# (server.js of microservices-demo/front-end: "Using local session manager"): the logged-in
# customer and the cart id live in the one pod (KubeArmor's sock-shop example; judge233)
_SOCK_SHOP_FRONT = re.compile(r"(^|/)weaveworksdemos/front-end(:|@|$)")


def stock_local(
    image: str, argv: list[str], env: Mapping[str, str], configured: bool
) -> str | None:
    """Why a server on its image's own single-instance configuration keeps local state
    (``_LOKI``, ``_NACOS``, ``_SEATA``: not when a mounted config may set another store:
    ``configured``; Sock Shop's front-end without its Redis sessions), or ``None``."""
    if _LOKI.search(image) and flag_value(argv, "config.file") in (None, _LOKI_LOCAL):
        return "Loki on its image's local-config.yaml keeps chunks and index on its own disk"
    if (
        _PYROSCOPE.search(image)
        and flag_value(argv, "target") in (None, "all")
        and flag_value(argv, "storage.backend") in (None, "filesystem")
        and not configured
    ):
        return "Pyroscope on its default configuration keeps its profiles on its own disk"
    if _NACOS.search(image) and env.get("MODE") == "standalone":
        return "Nacos in standalone mode keeps its registry and config in itself"
    version = tag_version(image)
    if (
        _SKYWALKING_OAP.search(image)
        and env.get("SW_STORAGE", "h2") == "h2"
        and version is not None
        and version < (10,)
        and not configured
    ):
        return "SkyWalking's OAP server keeps its data in H2 in memory (SW_STORAGE unset)"
    if _SOCK_SHOP_FRONT.search(image) and "SESSION_REDIS" not in env:
        return (
            "Sock Shop's front-end keeps sessions (logins, carts) in memory without SESSION_REDIS"
        )
    mode = env.get("STORE_MODE") or env.get("SEATA_STORE_MODE")
    if _SEATA.search(image) and (mode == "file" or (mode is None and not configured)):
        return "Seata's server in file store mode keeps its global transactions on its own disk"
    return None
