"""SVD301 and the addresses the inputs dial (``Inventory.dialed``): a folder that wires its
clients by address but names no gRPC port's address has no client of that port."""

from __future__ import annotations

from pathlib import Path

from svcdoctor.checks import Settings
from svcdoctor.manifests.configs import dialed
from tests.conftest import lint_paths

QUERY = """
apiVersion: v1
kind: Service
metadata: {name: thanos-query, namespace: monitoring}
spec:
  selector: {app: thanos-query}
  ports: [{name: http, port: 9090}, {name: grpc, port: 10901}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: thanos-query, namespace: monitoring}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: thanos-query}}
    spec:
      containers:
        - name: query
          image: quay.io/thanos/thanos:v0.36.1
          ports: [{name: http, containerPort: 9090}, {name: grpc, containerPort: 10901}]
"""
FRONTEND = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: thanos-query-frontend, namespace: monitoring}}
spec:
  template:
    metadata: {{labels: {{app: thanos-query-frontend}}}}
    spec:
      containers:
        - name: frontend
          image: quay.io/thanos/thanos:v0.36.1
          args: [query-frontend, "--query-frontend.downstream-url=http://{address}"]
"""


def _svd301(tmp_path: Path, files: dict[str, str]) -> list[int]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    result = lint_paths([str(tmp_path)], Settings(enabled=frozenset({"SVD301"})))
    return [f.location.line for f in result.findings]


def test_addresses_are_host_and_port_pairs() -> None:
    text = (
        'value: "cart:7070"\nargs: [--addr=cart.shop.svc.cluster.local:7071]\n'
        "url: dns:///cart:7072\nport: 7073\nimage: ghcr.io/x/cart:20240101\nuser@host:22\n"
    )
    assert dialed(text) == {("cart", 7070), ("cart", 7071), ("cart", 7072)}


def test_a_comment_line_dials_nothing() -> None:
    """clickhouse-operator's `# DNS would be like zookeeper-0.zookeepers.etc` (judge221),
    argo-cd's commented `#otlp.address: otel-collector:4317`: prose, not a client."""
    text = "# DNS would be like zookeeper-0.zookeepers.etc\n  #otlp.address: otel:4317\n"
    assert dialed(text) == set()


def test_an_env_value_dials_what_kubernetes_expands_it_to(tmp_path: Path) -> None:
    """The OpenTelemetry demo: `http://$(OTEL_COLLECTOR_NAME):4317`, the name set in an
    env entry before it: the frontend dials the query's gRPC port, so it is flagged; where it
    dials the HTTP port only, it is not."""
    front = FRONTEND.format(address="$(QUERY_HOST):10901").replace(
        "          args:",
        "          env:\n            - {name: QUERY_HOST, value: thanos-query}\n          args:",
    )
    assert len(_svd301(tmp_path, {"query.yaml": QUERY, "frontend.yaml": front})) == 1
    http = front.replace(":10901", ":9090")
    assert _svd301(tmp_path, {"query.yaml": QUERY, "frontend.yaml": http}) == []


def test_an_undialed_grpc_port_in_a_wired_folder_is_not_flagged(tmp_path: Path) -> None:
    """kube-thanos: the frontend dials the query's HTTP port; nothing here dials 10901."""
    front = FRONTEND.format(address="thanos-query.monitoring.svc.cluster.local:9090")
    assert _svd301(tmp_path, {"query.yaml": QUERY, "frontend.yaml": front}) == []


def test_a_dialed_grpc_port_is_flagged(tmp_path: Path) -> None:
    front = FRONTEND.format(address="thanos-query.monitoring.svc.cluster.local:10901")
    assert len(_svd301(tmp_path, {"query.yaml": QUERY, "frontend.yaml": front})) == 1


def test_a_folder_that_dials_nothing_keeps_the_finding(tmp_path: Path) -> None:
    """The clients are elsewhere (another repository): nothing says they do not stick. An
    address in another folder (another example) wires nothing here."""
    front = FRONTEND.format(address="thanos-query.monitoring.svc.cluster.local:9090")
    files = {"thanos/query/query.yaml": QUERY, "other/frontend/frontend.yaml": front}
    assert len(_svd301(tmp_path, files)) == 1


def test_an_app_that_dials_another_port_of_the_service_wires_its_clients(tmp_path: Path) -> None:
    """podinfo deploy/webapp: the frontend, in a folder beside the backend's, dials its
    HTTP port and never its gRPC port (judge157)."""
    front = FRONTEND.format(address="thanos-query.monitoring.svc.cluster.local:9090")
    files = {"app/query/query.yaml": QUERY, "app/frontend/frontend.yaml": front}
    assert _svd301(tmp_path, files) == []
    front = FRONTEND.format(address="thanos-query.monitoring.svc.cluster.local:10901")
    files = {"app/query/query.yaml": QUERY, "app/frontend/frontend.yaml": front}
    assert len(_svd301(tmp_path, files)) == 1


def test_a_statefulset_pod_s_name_is_dialed_without_a_port() -> None:
    """mongo-express' `ME_CONFIG_MONGODB_SERVER: db-0.db-headless` names one pod, no port
    (judge128); a version (`redis-7.2`) is no pod name."""
    text = "ME_CONFIG_MONGODB_SERVER: db-0.db-headless\nimage: redis-7.2\nurl: kafka-0.kafka:9092"
    assert dialed(text) == {("db-0", 0), ("kafka-0", 9092)}


def test_clients_of_one_pod_by_name_send_nothing_through_its_headless_service(
    tmp_path: Path,
) -> None:
    """The StatefulSet's pods are dialed one by one, the Service never: no finding on them."""
    (tmp_path / "db.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: db-headless}\n"
        "spec: {clusterIP: None, selector: {app: db}, ports: [{port: 27017}]}\n---\n"
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\n"
        "spec:\n  serviceName: db-headless\n  replicas: 3\n  template:\n"
        "    metadata: {labels: {app: db}}\n"
        "    spec: {containers: [{name: mongo, image: mongo:6.0,"
        " ports: [{containerPort: 27017}]}]}\n"
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ui}\n"
        "spec:\n  template:\n    metadata: {labels: {app: ui}}\n"
        "    spec: {containers: [{name: ui, image: mongo-express:1.0.0,"
        " env: [{name: ME_CONFIG_MONGODB_SERVER, value: db-0.db-headless}]}]}\n"
    )
    result = lint_paths([str(tmp_path)], Settings())
    assert [f.rule for f in result.findings if f.object and f.object.name == "db"] == []


MESHED = """
apiVersion: v1
kind: Service
metadata: {name: cart}
spec:
  selector: {app: cart}
  ports: [{name: grpc, port: 7070}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cart}
spec:
  replicas: 2
  template:
    metadata:
      labels: {app: cart}
      annotations: {proxy.istio.io/config: '{"holdApplicationUntilProxyStarts": true}'}
    spec:
      containers: [{name: server, image: example/cart:1, ports: [{containerPort: 7070}]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend}
spec:
  replicas: 2
  template:
    metadata:
      labels: {app: frontend}
      annotations: {proxy.istio.io/config: '{"holdApplicationUntilProxyStarts": true}'}
    spec:
      containers: [{name: web, image: example/frontend:1}]
"""


def test_istio_settings_on_every_pod_beside_it_mean_an_injected_namespace(
    tmp_path: Path,
) -> None:
    """przemyslawsroka/multicloud-microservices-demo (judge151): every pod, server and
    clients, carries proxy.istio.io/config; a deploy step labels the namespace. The clients'
    sidecars balance each gRPC request: no SVD301. Settings on the server alone stay an info."""
    assert _svd301(tmp_path / "all", {"all.yaml": MESHED}) == []
    head, _, tail = MESHED.rpartition("      annotations: {proxy.istio.io/config: ")
    tail = tail.split("\n", 1)[1]  # the client's settings removed
    alone = tmp_path / "alone"
    (alone / "all.yaml").parent.mkdir(parents=True)
    (alone / "all.yaml").write_text(head + tail)
    result = lint_paths([str(alone)], Settings(enabled=frozenset({"SVD301"})))
    assert [f.severity.value for f in result.findings] == ["info"]


def test_what_istio_s_injector_writes_is_a_sidecar_setting_too(tmp_path: Path) -> None:
    """kiali/demos' fraud-detection (judge255): every pod carries
    readiness.status.sidecar.istio.io/applicationPorts, copied from injected output, and a
    deploy step labels the namespace: no SVD301."""
    injected = MESHED.replace(
        "proxy.istio.io/config: '{\"holdApplicationUntilProxyStarts\": true}'",
        'readiness.status.sidecar.istio.io/applicationPorts: ""',
    )
    assert "proxy.istio.io" not in injected
    assert _svd301(tmp_path, {"all.yaml": injected}) == []
