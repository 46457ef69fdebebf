"""``PodTemplate.apart``: why two pods of a template cannot share a node."""

from __future__ import annotations

from pathlib import Path

import pytest

from svcdoctor.manifests import build_inventory, load

_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api}}
spec:
  template:
    metadata: {{labels: {{app: api, tier: web}}}}
    spec:
{spec}
      containers: [{{name: api, image: example/api:1, ports: [{{containerPort: 80{host}}}]}}]
"""
_ANTI = """\
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: {key}
              labelSelector: {selector}
"""


def _apart(tmp_path: Path, spec: str = "", host: str = "") -> str:
    (tmp_path / "d.yaml").write_text(
        _DEPLOYMENT.format(spec=spec or "      dnsPolicy: ClusterFirst", host=host)
    )
    (workload,) = build_inventory(load([str(tmp_path)])).workloads
    return workload.template.apart


@pytest.mark.parametrize(
    ("selector", "apart"),
    [
        ("{matchLabels: {app: api}}", True),
        ("{matchExpressions: [{key: app, operator: In, values: [api, web]}]}", True),
        ("{matchExpressions: [{key: tier, operator: Exists}]}", True),
        ("{matchLabels: {app: api}, matchExpressions: [{key: x, operator: DoesNotExist}]}", True),
        ("{matchLabels: {app: db}}", False),  # apart from another app's pods, not its own
        ("{matchExpressions: [{key: app, operator: NotIn, values: [api]}]}", False),
        ("{}", False),
    ],
)
def test_a_required_anti_affinity_against_its_own_labels_keeps_pods_apart(
    tmp_path: Path, selector: str, apart: bool
) -> None:
    spec = _ANTI.format(key="kubernetes.io/hostname", selector=selector)
    assert bool(_apart(tmp_path, spec)) is apart


def test_a_zone_anti_affinity_or_a_preferred_one_does_not(tmp_path: Path) -> None:
    zone = _ANTI.format(key="topology.kubernetes.io/zone", selector="{matchLabels: {app: api}}")
    assert _apart(tmp_path, zone) == ""
    preferred = zone.replace("requiredDuring", "preferredDuring")
    assert _apart(tmp_path, preferred) == ""


def test_host_ports_keep_pods_apart(tmp_path: Path) -> None:
    assert "hostPort" in _apart(tmp_path, host=", hostPort: 80")
    assert "hostNetwork" in _apart(tmp_path, "      hostNetwork: true")
    assert _apart(tmp_path) == ""
