"""Server configs in ConfigMaps that keep a workload's data in its pod (``local_store``)."""

from __future__ import annotations

import pytest
import yaml

from svcdoctor.manifests.configs import local_store


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
