"""scan reads the hops in front of the pods from a live cluster (the lab's API server):
Ingresses and classes, Gateway API kinds, TargetGroupBindings, Namespaces, cilium-config.
An absent API group or a forbidden kind is a note, never an error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.cluster.api import connect
from svcdoctor.cluster.hops import datapath_of, read_hops
from svcdoctor.cluster.inventory import build_live_inventory
from svcdoctor.cluster.snapshot import read_snapshot
from svcdoctor.model.hops import HopKind, Implementation
from svcdoctor.model.path import PathSettings, trace_paths
from svcdoctor.model.route import FrontKind, RouteKind
from tests.cluster.conftest import Served, serve

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "cluster"
GW = "gateway.networking.k8s.io"


def _meta(name: str, namespace: str | None = "shop", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **extra}
    if namespace:
        meta["namespace"] = namespace
    return meta


HOPS: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": _meta(
            "shop",
            None,
            labels={"elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"},
            annotations={"linkerd.io/inject": "enabled"},
        ),
    },
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": _meta("nginx", None),
        "spec": {"controller": "k8s.io/ingress-nginx"},
    },
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _meta("api"),
        "spec": {
            "ingressClassName": "nginx",
            "rules": [
                {
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "api", "port": {"number": 80}}},
                            }
                        ]
                    }
                }
            ],
        },
    },
    {
        "apiVersion": f"{GW}/v1",
        "kind": "HTTPRoute",
        "metadata": _meta("api"),
        "spec": {
            "parentRefs": [{"name": "edge", "namespace": "infra"}],
            "rules": [{"backendRefs": [{"name": "api", "port": 80}]}],
        },
    },
    {
        "apiVersion": f"{GW}/v1",
        "kind": "Gateway",
        "metadata": _meta("edge", "infra"),
        "spec": {"gatewayClassName": "eg", "listeners": [{"name": "http", "port": 80}]},
    },
    {
        "apiVersion": f"{GW}/v1",
        "kind": "Gateway",
        "metadata": _meta("unrelated", "other"),
        "spec": {"gatewayClassName": "eg", "listeners": [{"name": "http", "port": 80}]},
    },
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta("cilium-config", "kube-system"),
        "data": {"kube-proxy-replacement": "true"},
    },
]


def _cluster() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads((FIXTURES / "SVD108.ok.json").read_text())["items"]
    return found


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path)


def test_scan_reads_the_hops_into_the_inventory(lab: Served) -> None:
    lab.put(*_cluster(), *HOPS)
    reader = connect(kubeconfig=str(lab.kubeconfig))
    snapshot = read_snapshot(reader, "shop")
    assert not [n for n in snapshot.notes if "hops" in n], snapshot.notes
    inventory, _ = build_live_inventory(snapshot)
    assert {r.kind for r in inventory.routes} == {RouteKind.INGRESS, RouteKind.HTTP_ROUTE}
    assert {(f.kind, f.ref.namespace, f.ref.name) for f in inventory.fronts} == {
        (FrontKind.INGRESS_CLASS, "", "nginx"),
        (FrontKind.GATEWAY, "infra", "edge"),  # the route's parent, in another namespace
    }
    namespace = next(r for r in inventory.resources if r.ref.kind == "Namespace")
    assert namespace.labels == {"elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"}
    assert inventory.live is not None
    assert inventory.live.datapath == "cilium"
    workload = next(w for w in inventory.workloads if w.ref.kind == "Deployment")
    paths = trace_paths(inventory, PathSettings()).of(workload)
    kinds = {h.implementation for p in paths for h in p.hops}
    assert Implementation.INGRESS_NGINX in kinds
    assert Implementation.CILIUM in kinds
    assert any(h.kind is HopKind.SIDECAR for p in paths for h in p.hops)  # linkerd injected
    # scan -A lists the Namespaces instead of getting one
    every = read_snapshot(reader, None)
    assert {n["metadata"]["name"] for n in every.hops.namespaces} == {"shop"}


def test_absent_api_groups_are_notes_not_errors(tmp_path: Path) -> None:
    for lab in serve(tmp_path, unserved={GW, "elbv2.k8s.aws"}):
        lab.put(*_cluster(), *HOPS[:3])
        reader = connect(kubeconfig=str(lab.kubeconfig))
        snapshot = read_snapshot(reader, "shop")
        assert f"{GW}/v1 not served: no GatewayClass, Gateway, HTTPRoute, GRPCRoute hops" in (
            snapshot.notes
        )
        assert f"{GW}/v1beta1 not served: no ReferenceGrant hops" in snapshot.notes
        assert "elbv2.k8s.aws/v1beta1 not served: no TargetGroupBinding hops" in snapshot.notes
        inventory, _ = build_live_inventory(snapshot)
        assert [r.kind for r in inventory.routes] == [RouteKind.INGRESS]
        assert inventory.live is not None
        assert inventory.live.datapath == "kube-proxy"
        # a list that 404s although discovery was read earlier (a CRD removed meanwhile)
        reader.serves = lambda resource: True  # type: ignore[method-assign]
        hops = read_hops(reader, "shop")
        assert f"{GW}/v1 not served: no GatewayClass, Gateway, HTTPRoute, GRPCRoute hops" in (
            hops.notes
        )


def test_forbidden_hop_kinds_are_notes_naming_verb_and_kind(tmp_path: Path) -> None:
    forbidden = {
        ("list", "ingresses"),
        ("list", "ingressclasses"),
        ("get", "namespaces"),
        ("get", "configmaps"),
    }
    for lab in serve(tmp_path, forbidden=forbidden):
        lab.put(*_cluster(), *HOPS)
        snapshot = read_snapshot(connect(kubeconfig=str(lab.kubeconfig)), "shop")
        notes = "\n".join(snapshot.notes)
        assert (
            "cannot list ingresses.networking.k8s.io in namespace shop (forbidden): Ingress hops "
            "not read; grant list on ingresses.networking.k8s.io" in notes
        )
        assert "cannot list ingressclasses.networking.k8s.io cluster-wide (forbidden)" in notes
        assert "cannot get namespaces cluster-wide (forbidden)" in notes
        assert "cannot get ConfigMap kube-system/cilium-config (forbidden)" in notes
        inventory, _ = build_live_inventory(snapshot)
        assert [r.kind for r in inventory.routes] == [RouteKind.HTTP_ROUTE]


@pytest.mark.parametrize(
    ("data", "datapath"),
    [
        (None, "kube-proxy"),
        ({}, "kube-proxy"),
        ({"kube-proxy-replacement": "true"}, "cilium"),
        ({"kube-proxy-replacement": "strict"}, "cilium"),
        ({"kube-proxy-replacement": "partial"}, "kube-proxy"),
        ({"kube-proxy-replacement": "false"}, "kube-proxy"),
    ],
)
def test_cilium_replacement(data: dict[str, str] | None, datapath: str) -> None:
    assert datapath_of(data) == datapath
