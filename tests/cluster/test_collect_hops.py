"""collect against the lab's API server: the pods' Linkerd proxy logs, the Envoy-based
gateways' lines about the Service, the hop objects (``routes.json``), and notes for the
API groups the server does not serve; diagnose reads what it wrote."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import polars as pl

from svcdoctor.cluster.api import connect
from svcdoctor.cluster.collect import Request, collect
from svcdoctor.cluster.meshlogs import gateway_lines
from svcdoctor.evidence import read_evidence
from tests.cluster.conftest import serve

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "tests" / "fixtures" / "cluster" / "collect" / "cluster.json"
LINKERD = ROOT / "tests" / "fixtures" / "evidence" / "linkerd-proxy.jsonl"
GATEWAY_POD = "envoy-default-eg-e41e7b31-6f8d9c7b6-x9z8y"
# Envoy Gateway's default JSON access log (gateway.envoyproxy.io, "Proxy Access Logs"):
# one request to a pod of shop/api, one to a pod of shop/web
GATEWAY_LOG = "\n".join(
    json.dumps(
        {
            "start_time": f"2026-12-02T10:00:0{i}.000Z",
            "method": "GET",
            "x-envoy-origin-path": "/api",
            "protocol": "HTTP/1.1",
            "response_code": status,
            "response_flags": flags,
            "response_code_details": details,
            "upstream_transport_failure_reason": "-",
            "bytes_received": 0,
            "bytes_sent": 0,
            "duration": 3,
            "x-envoy-upstream-service-time": "-",
            "x-forwarded-for": "10.0.0.5",
            "user-agent": "curl/8.5.0",
            "x-request-id": f"req-{i}",
            ":authority": "www.example.com",
            "upstream_host": upstream,
            "upstream_cluster": route,
            "upstream_local_address": "-",
            "downstream_local_address": "10.244.0.31:10080",
            "downstream_remote_address": "10.0.0.5:40312",
            "requested_server_name": "-",
            "route_name": route,
        }
    )
    for i, (status, flags, details, upstream, route) in enumerate(
        [
            (503, "UF", "upstream_reset_before_response_started{connection_failure}",
             "10.244.1.7:8080", "httproute/shop/api/rule/0/match/0/www_example_com"),
            (200, "-", "via_upstream", "10.244.9.9:8080",
             "httproute/shop/web/rule/0/match/0/www_example_com"),
        ]
    )
)  # fmt: skip


def _objects() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(CLUSTER.read_text())["items"]
    for pod in (o for o in items if o["kind"] == "Pod" and o["metadata"]["name"][:4] == "api-"):
        pod["spec"]["containers"].append({"name": "linkerd-proxy", "image": "cr.l5d.io/proxy"})
    gateway = copy.deepcopy(next(o for o in items if o["metadata"]["name"].startswith("ingress")))
    gateway["metadata"] = {
        "name": GATEWAY_POD,
        "namespace": "envoy-gateway-system",
        "uid": GATEWAY_POD,
        "labels": {
            "app.kubernetes.io/name": "envoy",
            "app.kubernetes.io/component": "proxy",
            "app.kubernetes.io/managed-by": "envoy-gateway",
        },
    }
    gateway["spec"]["containers"] = [{"name": "envoy", "image": "envoyproxy/envoy"}]
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "api", "namespace": "shop", "uid": "ing-api"},
        "spec": {
            "ingressClassName": "nginx",
            "defaultBackend": {"service": {"name": "api", "port": {"number": 80}}},
        },
    }
    return [*items, gateway, ingress]


def test_collect_gathers_linkerd_and_gateway_logs_and_routes(tmp_path: Path) -> None:
    for lab in serve(tmp_path, unserved={"gateway.networking.k8s.io", "elbv2.k8s.aws"}):
        objects = _objects()
        lab.put(*objects)
        linkerd = "[     0.002148s]  INFO ThreadId(01) linkerd2_proxy: started\n"
        linkerd += LINKERD.read_text()
        for pod in (o for o in objects if o["kind"] == "Pod"):
            meta = pod["metadata"]

            def log(container: str, name: str = meta["name"], linkerd: str = linkerd) -> str:
                if container == "linkerd-proxy":
                    return linkerd
                return GATEWAY_LOG + "\n" if name == GATEWAY_POD else ""

            lab.call(lab.store.set_logs, meta["namespace"], meta["name"], log)
        out = tmp_path / "bundle"
        result = collect(connect(kubeconfig=str(lab.kubeconfig)), Request("shop", "api", out))
        names = {f["file"]: f["format"] for f in result["files"]}
        assert names["linkerd-proxy-api-7d9f8b6c5-x2x4q.log"] == "linkerd-json"
        assert names[f"gateway-{GATEWAY_POD}.jsonl"] == "envoy-json"
        assert names["routes.json"] == "kubectl-json"
        gateway = (out / f"gateway-{GATEWAY_POD}.jsonl").read_text().splitlines()
        assert [json.loads(line)["upstream_host"] for line in gateway] == ["10.244.1.7:8080"]
        routes = json.loads((out / "routes.json").read_text())["items"]
        assert [(o["kind"], o["metadata"]["name"]) for o in routes] == [("Ingress", "api")]
        notes = result["notes"]
        assert "elbv2.k8s.aws/v1beta1 not served: no TargetGroupBinding hops" in notes
        assert not [n for n in notes if n.startswith("diagnose skips")], notes
        evidence = read_evidence([str(out)])
        linkerd_rows = evidence.requests.filter(
            pl.col("source").cast(pl.Utf8).str.contains("/linkerd-proxy-")
        )
        backends = set(linkerd_rows.get_column("backend").cast(pl.Utf8).to_list())
        assert backends == {f"api-7d9f8b6c5-{s}" for s in ("x2x4q", "q8w7e", "m3n4b")}


def test_gateway_lines_keep_the_services_pods_and_cluster() -> None:
    lines = [
        '[2026-12-02T10:00:01.000Z] "GET / HTTP/1.1" 503 UF 0 91 2 - "-" "curl" "r1" "a" '
        '"10.244.1.7:8080" outbound|80||api.shop.svc.cluster.local - 10.1.0.4:8080 10.0.0.5:1',
        '[2026-12-02T10:00:02.000Z] "GET / HTTP/1.1" 503 UH 0 91 2 - "-" "curl" "r2" "a" '
        '"-" outbound|80||api.shop.svc.cluster.local - 10.1.0.4:8080 10.0.0.5:2',
        '[2026-12-02T10:00:03.000Z] "GET / HTTP/1.1" 200 - 0 91 2 - "-" "curl" "r3" "a" '
        '"10.244.9.9:8080" outbound|80||web.shop.svc.cluster.local - 10.1.0.4:8080 10.0.0.5:3',
        '[2026-12-02T10:00:04.000Z] "GET / HTTP/1.1" 200 - 0 91 2 - "-" "curl" "r4" "a" '
        '"10.244.1.77:8080" outbound|80||apiv2.shop.svc.cluster.local - 10.1.0.4:8080 1.2.3.4:5',
    ]
    kept = gateway_lines(lines, "api", "shop", frozenset({"10.244.1.7"}))
    assert [line.split('"r')[1][0] for line in kept] == ["1", "2"]
