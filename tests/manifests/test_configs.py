"""Server configs in ConfigMaps that keep a workload's data in its pod (``local_store``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from svcdoctor.checks import Settings
from svcdoctor.manifests.configs import _grafana_database, local_store
from tests.conftest import lint_paths


def _store(key: str, config: str) -> str | None:
    data = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    text = yaml.safe_dump(data | {"data": {key: config}})
    found = local_store(yaml.compose(text))
    return found[1] if found else None


@pytest.mark.parametrize(
    ("config", "why"),
    [
        (
            "schema_config:\n  configs:\n  - {store: tsdb, object_store: filesystem}\n",
            "Loki's schema_config keeps its chunks on the pod's filesystem",
        ),
        (
            "storage:\n  trace:\n    backend: local\n    local: {path: /var/tempo}\n",
            "Tempo's storage.trace.backend local keeps its traces on the pod's disk",
        ),
        ("schema_config:\n  configs:\n  - {store: tsdb, object_store: s3}\n", None),
        ("storage:\n  trace:\n    backend: gcs\n", None),
        ("trace: local\n", None),
    ],
)
def test_loki_and_tempo_on_their_own_disk_keep_local_state(config: str, why: str | None) -> None:
    """ardanlabs/service's dev Loki and Tempo (judge160); on an object store, they share."""
    assert _store("config.yaml", config) == why


@pytest.mark.parametrize(
    ("ini", "other"),
    [
        ("[server]\nhttp_port = 3000\n", False),
        ("[database]\n;type = mysql\n", False),
        ("[database]\ntype = sqlite3\npath = grafana.db\n", False),
        ("[database]\ntype = postgres\nhost = db:5432\n", True),
        ("[database]\nurl = mysql://grafana:pw@db:3306/grafana\n", True),
        ("[database]\nhost = db:5432\n[server]\ntype = x\n", True),
    ],
)
def test_a_grafana_ini_names_another_database_or_leaves_sqlite(ini: str, other: bool) -> None:
    """kamaji's config/observability mounts a grafana.ini without [database] (judge244): its
    Grafana keeps SQLite in the pod; a [database] type, url or host names another."""
    assert _grafana_database(ini) is other


_COLLECTOR = """\
apiVersion: v1
kind: ConfigMap
metadata: {{name: collector}}
data:
  relay: |
    receivers:
      prometheus:
        config:
          scrape_configs: [{{job_name: app, static_configs: [{{targets: [{target}]}}]}}]
    service: {{pipelines: {{metrics: {{receivers: [prometheus]}}}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: collector}}
spec:
  selector: {{app: collector}}
  ports: [{{port: 4317}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: collector}}
spec:
  replicas: 1
  template:
    metadata: {{labels: {{app: collector}}}}
    spec:
      volumes: [{{name: conf, configMap: {{name: collector}}}}]
      containers:
        - name: collector
          image: otel/opentelemetry-collector-k8s:0.120.0
          volumeMounts: [{{name: conf, mountPath: /conf}}]
"""


def test_of_configmaps_of_one_name_the_nearest_decides(tmp_path: Path) -> None:
    """opentelemetry-helm-charts' examples each render a ConfigMap of one name: the one
    that scrapes targets bound its own collector only, not the one beside another's
    (judge376)."""
    (tmp_path / "scrapes").mkdir()
    (tmp_path / "scrapes" / "all.yaml").write_text(_COLLECTOR.format(target='"app:9090"'))
    (tmp_path / "itself").mkdir()
    (tmp_path / "itself" / "all.yaml").write_text(
        _COLLECTOR.format(target='"${env:MY_POD_IP}:8888"')
    )
    result = lint_paths([str(tmp_path)], Settings(enabled=frozenset({"SVD204"})))
    found = {str(Path(f.location.file).relative_to(tmp_path)): f for f in result.findings}
    assert {file: f.severity.value for file, f in found.items()} == {
        "scrapes/all.yaml": "info",
        "itself/all.yaml": "warning",
    }


POS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: service-configs, namespace: pos}
data:
  CONNECTOR: "IN_MEMORY"
  ITEMS: |
    items: [a, b]
---
apiVersion: v1
kind: Service
metadata: {name: inventory-svc, namespace: pos}
spec:
  selector: {app: inventory}
  ports: [{port: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: inventory, namespace: pos}
spec:
  template:
    metadata: {labels: {app: inventory}}
    spec:
      containers:
        - name: inventory
          image: registry.example/pos/inventory:v1
          ports: [{containerPort: 8080}]
          readinessProbe: {tcpSocket: {port: 8080}}
          ENV
"""


@pytest.mark.parametrize(
    ("env", "shown"),
    [
        (
            "env: [{name: CONNECTOR, valueFrom: {configMapKeyRef: {name: service-configs, "
            "key: CONNECTOR}}}]",
            "(CONNECTOR=IN_MEMORY)",
        ),
        ("envFrom: [{configMapRef: {name: service-configs}}]", "(CONNECTOR=IN_MEMORY)"),
        (
            "envFrom: [{configMapRef: {name: service-configs}, prefix: POS_}]",
            "(POS_CONNECTOR=IN_MEMORY)",
        ),
        (
            "envFrom: [{configMapRef: {name: service-configs}}]\n"
            "          env: [{name: CONNECTOR, value: JDBC}]",
            None,
        ),
        ("envFrom: [{configMapRef: {name: other-configs}}]", None),
    ],
    ids=["key-ref", "env-from", "prefixed", "own-value-wins", "not-in-inputs"],
)
def test_a_containers_environment_takes_the_values_of_configmaps_it_names(
    tmp_path: Path, env: str, shown: str | None
) -> None:
    """anthos-samples' point-of-sale inventory reads `CONNECTOR: IN_MEMORY` from the
    ConfigMap its env names (configMapKeyRef, or envFrom): a store set to memory, so SVD204
    is an availability note (judge526). A prefix renames the variables; a value the
    container sets itself wins; a ConfigMap not among the inputs tells nothing."""
    (tmp_path / "pos.yaml").write_text(POS.replace("ENV", env))
    (finding,) = lint_paths([str(tmp_path)], Settings(enabled=frozenset({"SVD204"}))).findings
    assert (shown is not None and shown in finding.message) is (shown is not None)
    assert (finding.severity.value == "info") is (shown is not None)
