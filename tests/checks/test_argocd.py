"""Argo CD's install manifest, as homelab and GitOps repositories copy it (judge384): Dex
serves nothing until argocd-cm configures it, and the ApplicationSet controller elects no
leader unless asked."""

from __future__ import annotations

from pathlib import Path

from svcdoctor.checks import Settings
from tests.conftest import lint_paths

INSTALL = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm}
data: {DATA}
---
apiVersion: v1
kind: Service
metadata: {name: argocd-dex-server}
spec:
  selector: {app.kubernetes.io/name: argocd-dex-server}
  ports: [{name: http, port: 5556, targetPort: 5556}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: argocd-dex-server}
spec:
  template:
    metadata: {labels: {app.kubernetes.io/name: argocd-dex-server}}
    spec:
      containers:
        - name: dex
          image: ghcr.io/dexidp/dex:v2.41.1
          command: [/shared/argocd-dex, rundex]
          ports: [{containerPort: 5556}]
---
apiVersion: v1
kind: Service
metadata: {name: argocd-applicationset-controller}
spec:
  selector: {app.kubernetes.io/name: argocd-applicationset-controller}
  ports: [{name: webhook, port: 7000, targetPort: webhook}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: argocd-applicationset-controller}
spec:
  template:
    metadata: {labels: {app.kubernetes.io/name: argocd-applicationset-controller}}
    spec:
      containers:
        - name: argocd-applicationset-controller
          image: quay.io/argoproj/argocd:v2.14.2
          args: [/usr/local/bin/argocd-applicationset-controller]
          ports: [{name: webhook, containerPort: 7000}]
          readinessProbe: {tcpSocket: {port: webhook}}
"""


def _findings(tmp_path: Path, data: str) -> dict[tuple[str, str], str]:
    (tmp_path / "install.yaml").write_text(INSTALL.replace("{DATA}", data))
    result = lint_paths([str(tmp_path)], Settings(enabled=frozenset({"SVD101", "SVD204"})))
    return {(f.rule, f.object.name): f.message for f in result.findings if f.object}


def test_dex_serves_nothing_until_argocd_cm_configures_it(tmp_path: Path) -> None:
    quiet = _findings(tmp_path, "{}")
    assert not [k for k in quiet if k[1] == "argocd-dex-server"]
    configured = _findings(tmp_path, "{dex.config: 'connectors: []'}")
    assert ("SVD101", "argocd-dex-server") in configured


def test_the_applicationset_controller_elects_no_leader_unless_asked(tmp_path: Path) -> None:
    message = _findings(tmp_path, "{}")[("SVD204", "argocd-applicationset-controller")]
    assert "leader election off (argocd-applicationset-controller's default" in message
    assert "would reconcile the same objects" in message
