"""Issue 30's facts: which Service ports carry requests, which servers are leader-elected
or keep local state, which runtimes are PID 1 without a SIGTERM handler."""

from __future__ import annotations

import pytest

from svcdoctor.checks._serving import scrape_only, stock_port, uncalled
from svcdoctor.checks.election import leader_elected
from svcdoctor.checks.signals import pid1_runtime
from svcdoctor.checks.state import local_state
from svcdoctor.model import (
    Container,
    ContainerPort,
    Location,
    Mount,
    ObjectRef,
    PodTemplate,
    Workload,
)
from svcdoctor.model.service import Service, ServicePort


@pytest.mark.parametrize(
    ("name", "target", "called"),
    [
        ("metrics", 8080, False),
        ("http-metrics", 9090, False),
        ("https-metrics", 8443, False),
        ("http-profiling", 8008, False),
        ("pprof", 6060, False),
        ("probes", 8080, False),
        ("healthz", 10254, False),
        ("http-monitoring", 9090, False),
        ("tcp-prometheus-servicemonitor", "http-metrics", False),  # by its target's name
        (None, "metrics", False),
        ("http", 8080, True),
        ("web", 9090, True),  # 9090 by number is no metrics port
        (None, 9100, True),
        ("grpc", "grpc", True),
        ("webhook", 9443, True),
    ],
)
def test_uncalled_ports(name: str | None, target: int | str, called: bool) -> None:
    assert uncalled(ServicePort(80, target, 1, name)) is not called


def container(
    *argv: str,
    image: str = "example/app:1",
    env: tuple[tuple[str, str], ...] = (),
    mounts: tuple[Mount, ...] = (),
) -> Container:
    return Container("c", 1, image=image, args=argv, env=env, mounts=mounts)


@pytest.mark.parametrize(
    ("c", "flag"),
    [
        (container("--leader-elect"), "--leader-elect"),
        (container("--leader-elect=true"), "--leader-elect=true"),
        (container("--leader-elect", "true"), "--leader-elect true"),
        (container("--enable-leader-election"), "--enable-leader-election"),
        (container("-leader-election"), "-leader-election"),
        (container(env=(("LEADER_ELECT", "true"),)), "LEADER_ELECT=true"),
        (container("--leader-elect=false"), None),
        (container("--leader-elect", "false"), None),
        (container("--leader-elect-lease-duration=30s"), None),
        (container(env=(("LEADER_ELECT", "false"),)), None),
        (container("--port=8080"), None),
        # controller-runtime: every replica serves its webhooks and metrics
        (container("--leader-elect", "--health-probe-bind-address=:8081"), None),
    ],
)
def test_leader_elected(c: Container, flag: str | None) -> None:
    assert leader_elected(c) == flag


def workload(c: Container, volumes: dict[str, str], kind: str = "Deployment") -> Workload:
    template = PodTemplate({}, {}, (c,), 1, volumes=volumes)
    return Workload(ObjectRef(kind, None, "w"), Location("f.yaml", 1), template)


SOCKET = Mount("s", "/csi")


@pytest.mark.parametrize(
    ("c", "volumes", "state"),
    [
        (container(image="jaegertracing/all-in-one:1.53.0"), {}, True),
        (container(image="openzipkin/zipkin-slim:3"), {}, True),
        (container(image="openzipkin/zipkin:3", env=(("STORAGE_TYPE", "cassandra3"),)), {}, False),
        (container("start-dev", image="quay.io/keycloak/keycloak:26.0"), {}, True),
        # `start` with no KC_DB runs the default dev-file H2 (keycloak/keycloak#14811; judge200)
        (container("start", image="quay.io/keycloak/keycloak:26.0"), {}, True),
        (
            container(
                "start", image="quay.io/keycloak/keycloak:26.0", env=(("KC_DB", "postgres"),)
            ),
            {},
            False,
        ),
        (container(image="balabit/syslog-ng:4.8"), {}, True),
        (container("/shared/argocd-dex", "rundex", image="ghcr.io/dexidp/dex:v2"), {}, True),
        (container(mounts=(Mount("data", "/data"),)), {"data": "emptyDir"}, True),
        (container(mounts=(Mount("s", "/var/lib/grafana"),)), {"s": "emptyDir"}, True),
        (container(mounts=(Mount("pv", "/exports"),)), {"pv": "persistentVolumeClaim"}, True),
        (container(mounts=(Mount("data", "/data", True),)), {"data": "emptyDir"}, False),
        (container(mounts=(Mount("tmp", "/tmp"),)), {"tmp": "emptyDir"}, False),
        (container(mounts=(Mount("d", "/var/lib/istio/data"),)), {"d": "emptyDir"}, False),
        (container(mounts=(Mount("config-rw", "/app/data"),)), {"config-rw": "emptyDir"}, False),
        (container(mounts=(Mount("cfg", "/data"),)), {"cfg": "configMap"}, False),
        (container(mounts=(Mount("helm", "/helm-working-dir"),)), {"helm": "emptyDir"}, False),
        # the kubelet's directory is the node's, not the pod's (a CSI plugin's mountpoint-dir)
        (container(mounts=(Mount("mp", "/var/lib/kubelet/pods"),)), {"mp": "hostPath"}, False),
        # a bridge to its node's daemon socket (csi-driver-host-path's socat), gRPC's spelling,
        # the Docker socket mounted itself; a socket on an emptyDir is the pod's own
        (container("unix-connect:/csi/csi.sock", mounts=(SOCKET,)), {"s": "hostPath"}, True),
        (container("--endpoint=unix://csi/csi.sock", mounts=(SOCKET,)), {"s": "hostPath"}, True),
        (container(mounts=(Mount("d", "/var/run/docker.sock"),)), {"d": "hostPath"}, True),
        (container("unix-connect:/csi/csi.sock", mounts=(SOCKET,)), {"s": "emptyDir"}, False),
        (container("unix-connect:/other/x.sock", mounts=(SOCKET,)), {"s": "hostPath"}, False),
    ],
)
def test_local_state(c: Container, volumes: dict[str, str], state: bool) -> None:
    assert (local_state(workload(c, volumes), c) is not None) is state


@pytest.mark.parametrize(
    ("command", "image", "runtime"),
    [
        (("node", "server.js"), "node:20", "node"),
        (("/usr/local/bin/node", "--enable-source-maps", "dist/main.js"), "node:20", "node"),
        (("python", "app.py"), "python:3.12", "python"),
        (("python3", "-u", "-m", "flask", "run"), "python:3.12", "python"),
        (("python3.11", "-X", "utf8", "main.py"), "python:3.11", "python"),
        (("env", "PORT=80", "node", "index.js"), "node:20", "node"),
        (("gosu", "app", "python", "app.py"), "python:3.12", "python"),
        (("bash", "-c", "exec node server.js"), "node:20", "node"),
        (("npm", "start"), "node:20", "npm"),
        (("npm", "run", "serve"), "example/web:1", "npm"),
        (("yarn", "start"), "node:20-alpine", "yarn"),
        (("npm", "start"), "node:20-alpine", None),  # ash execs, npm passes the signal
        (("tini", "--", "node", "server.js"), "node:20", None),
        (("dumb-init", "python", "app.py"), "python:3.12", None),
        (("python", "-m", "gunicorn", "app:app"), "python:3.12", None),
        (("python", "-m", "uvicorn", "main:app"), "python:3.12", None),
        (("python", "-c", "print(1)"), "python:3.12", None),
        (("node", "-e", "require('./x')"), "node:20", None),
        (("node",), "node:20", None),
        (("sh", "-c", "node server.js"), "node:20", "node"),  # PID 1 after SVD105's fix
        (("gunicorn", "app:app"), "python:3.12", None),
        ((), "node:20", None),  # the image's CMD: unknown
    ],
)
def test_pid1_runtime(command: tuple[str, ...], image: str, runtime: str | None) -> None:
    found = pid1_runtime(Container("c", 1, image=image, command=command))
    assert (found.runtime if found else None) == runtime


@pytest.mark.parametrize(
    ("name", "ports", "only"),
    [
        # kubebuilder's scaffold: config/default/metrics_service.yaml
        ("controller-manager-metrics-service", (("https", 8443),), True),
        ("argocd-metrics", ((None, 8082),), True),
        ("operator-metrics", (("http", 8080),), True),
        ("operator-metrics", (("grpc", 8080),), False),
        ("webhook-service", (("https", 9443),), False),
    ],
)
def test_metrics_services(name: str, ports: tuple[tuple[str | None, int], ...], only: bool) -> None:
    service = Service(
        ObjectRef("Service", None, name),
        Location("f.yaml", 1),
        ports=tuple(ServicePort(n, n, 1, p) for p, n in ports),
    )
    assert scrape_only(service) is only


@pytest.mark.parametrize(
    ("c", "port"),
    [
        (Container("c", 1, image="nginx:latest"), 80),
        (Container("c", 1, image="docker.io/library/nginx:1.27-alpine"), 80),
        (Container("c", 1, image="httpd:2.4"), 80),
        (Container("c", 1, image="nginxinc/nginx-unprivileged:1.27"), None),
        (Container("c", 1, image="bitnami/nginx:1.27"), None),
        (Container("c", 1, image="nginx", args=("nginx", "-c", "/x.conf")), None),
        (Container("c", 1, image="nginx", ports=(ContainerPort(8080),)), None),
        (Container("c", 1, image="nginx", mounts=(Mount("conf", "/etc/nginx/conf.d"),)), None),
    ],
)
def test_stock_port(c: Container, port: int | None) -> None:
    assert stock_port(c) == port
