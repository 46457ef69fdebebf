"""``rollout-test --through``: the edge's resolution, pure over Ingress, Gateway and
HTTPRoute dicts (the matching rule, no address, no rule to the Service, TLS → https), and
the agent's arguments through it."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.cluster.edge import (
    Edge,
    EdgeKind,
    Refused,
    gateway_edge,
    ingress_edge,
    parse_through,
    url_edge,
)
from svcdoctor.cluster.rollout import Plan, agent_args


def _ingress(
    rules: list[dict[str, Any]], lb: list[dict[str, Any]], tls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"rules": rules}
    if tls is not None:
        spec["tls"] = tls
    return {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": spec,
        "status": {"loadBalancer": {"ingress": lb}},
    }


def _rule(host: str | None, path: str, service: str, port: int = 80) -> dict[str, Any]:
    backend = {"service": {"name": service, "port": {"number": port}}}
    rule: dict[str, Any] = {"http": {"paths": [{"path": path, "pathType": "Prefix",
                                                "backend": backend}]}}  # fmt: skip
    if host:
        rule["host"] = host
    return rule


def test_a_regex_path_is_sent_as_its_literal_prefix_and_the_usual_port_wins() -> None:
    """ingress-nginx's regex paths (ImplementationSpecific) are patterns, not paths; a
    status listing 443 and 80 for a plain-HTTP Ingress is reached on 80."""
    rule = _rule(None, "/api(/|$)(.*)", "api")
    rule["http"]["paths"][0]["pathType"] = "ImplementationSpecific"
    lb = [{"ip": "203.0.113.7", "ports": [{"port": 443}, {"port": 80}]}]
    edge = ingress_edge(_ingress([rule], lb), "api")
    assert (edge.address, edge.path) == ("203.0.113.7:80", "/api")


def test_a_url_with_credentials_is_refused() -> None:
    with pytest.raises(Refused, match="credentials"):
        url_edge("http://user:secret@example.com:8080/x")
    assert url_edge("http://example.com:8080/x").host == "example.com:8080"


def test_the_ingress_rule_that_routes_to_the_service() -> None:
    ing = _ingress(
        [_rule("shop.example.com", "/", "front"), _rule("api.example.com", "/v1", "api")],
        [{"ip": "203.0.113.7"}],
    )
    edge = ingress_edge(ing, "api")
    assert edge == Edge(EdgeKind.INGRESS, "ingress/web", "203.0.113.7:80", "http",
                        "api.example.com", "/v1", "shop-api-80")  # fmt: skip
    assert edge.url == "http://api.example.com/v1"
    assert edge.route("shop/api") == (
        "ingress/web (http://203.0.113.7:80/v1), Host api.example.com → Service shop/api → pods"
    )


def test_an_ingress_hostname_address_its_ports_and_a_wildcard_host() -> None:
    lb = [{"hostname": "lb.elb.amazonaws.com", "ports": [{"port": 8080, "protocol": "TCP"}]}]
    edge = ingress_edge(_ingress([_rule("*.example.com", "/", "api")], lb), "api")
    assert edge.address == "lb.elb.amazonaws.com:8080"
    assert edge.host == "svcdoctor-load.example.com"


def test_ingress_tls_host_is_https_on_443() -> None:
    ing = _ingress(
        [_rule("api.example.com", "/", "api")],
        [{"ip": "203.0.113.7"}],
        tls=[{"hosts": ["api.example.com"], "secretName": "cert"}],
    )
    edge = ingress_edge(ing, "api")
    assert (edge.scheme, edge.address) == ("https", "203.0.113.7:443")
    other = _ingress([_rule("api.example.com", "/", "api")], [{"ip": "203.0.113.7"}],
                     tls=[{"hosts": ["shop.example.com"]}])  # fmt: skip
    assert ingress_edge(other, "api").scheme == "http"


def test_ingress_default_backend_leads_to_the_service() -> None:
    ing = _ingress([], [{"ip": "10.0.0.9"}])
    ing["spec"]["defaultBackend"] = {"service": {"name": "api", "port": {"name": "http"}}}
    edge = ingress_edge(ing, "api")
    assert (edge.host, edge.path, edge.upstream) == (None, "/", "shop-api-http")


def test_ingress_refusals_name_the_ingress() -> None:
    with pytest.raises(Refused, match=r"^ingress/web: no rule of it routes to service api$"):
        ingress_edge(_ingress([_rule(None, "/", "front")], [{"ip": "10.0.0.9"}]), "api")
    with pytest.raises(Refused, match=r"^ingress/web has no address \(status"):
        ingress_edge(_ingress([_rule(None, "/", "api")], []), "api")


def _gateway(addresses: list[dict[str, Any]], listeners: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "edge", "namespace": "infra"},
        "spec": {"gatewayClassName": "eg", "listeners": listeners},
        "status": {"addresses": addresses},
    }


def _route(parent: dict[str, Any], backend: str, path: str = "/api") -> dict[str, Any]:
    return {
        "metadata": {"name": "r", "namespace": "shop"},
        "spec": {
            "parentRefs": [parent],
            "hostnames": ["api.example.com"],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}],
                       "backendRefs": [{"name": backend, "port": 80}]}],
        },
    }  # fmt: skip


HTTP = {"name": "http", "port": 80, "protocol": "HTTP"}
HTTPS = {"name": "https", "port": 443, "protocol": "HTTPS"}


def test_the_httproute_attached_to_the_gateway() -> None:
    gw = _gateway([{"type": "IPAddress", "value": "198.51.100.4"}], [HTTPS, HTTP])
    stray = _route({"name": "other", "namespace": "infra"}, "api")
    routes = [stray, _route({"name": "edge", "namespace": "infra"}, "front"),
              _route({"name": "edge", "namespace": "infra"}, "api")]  # fmt: skip
    edge = gateway_edge(gw, routes, "api", "shop")
    assert edge == Edge(EdgeKind.GATEWAY, "gateway/edge", "198.51.100.4:80", "http",
                        "api.example.com", "/api", "shop/api")  # fmt: skip
    # a route bound to the HTTPS listener is HTTPS
    secure = _route({"name": "edge", "namespace": "infra", "sectionName": "https"}, "api")
    assert gateway_edge(gw, [secure], "api", "shop").url == "https://api.example.com/api"


def test_gateway_refusals_name_the_gateway() -> None:
    gw = _gateway([{"value": "198.51.100.4"}], [HTTP])
    with pytest.raises(Refused, match=r"^gateway/edge: no HTTPRoute attached to it routes to"):
        gateway_edge(gw, [_route({"name": "other"}, "api")], "api", "shop")
    bare = _gateway([], [HTTP])
    with pytest.raises(Refused, match=r"^gateway/edge has no address \(status.addresses"):
        gateway_edge(bare, [_route({"name": "edge", "namespace": "infra"}, "api")], "api", "shop")


def test_through_urls_and_names() -> None:
    assert parse_through("ingress/web") == (EdgeKind.INGRESS, "web")
    assert parse_through("gtw/infra/edge") == (EdgeKind.GATEWAY, "infra/edge")
    with pytest.raises(Refused, match=r"^--through service/x: expected"):
        parse_through("service/x")
    edge = url_edge("http://shop.example.com:8080/health?x=1")
    assert (edge.address, edge.host, edge.path) == (
        "shop.example.com:8080", "shop.example.com:8080", "/health?x=1")  # fmt: skip
    assert url_edge("https://[2001:db8::1]/").address == "[2001:db8::1]:443"
    with pytest.raises(Refused, match=r"^--through ftp://x/: expected"):
        url_edge("ftp://x/")


def test_agent_args_send_to_the_edge_with_its_host_and_path() -> None:
    plan = Plan("shop", "deployments", "api", Path("out"))
    edge = Edge(EdgeKind.INGRESS, "ingress/web", "203.0.113.7:80", "http",
                "api.example.com", "/v1", "shop-api-80")  # fmt: skip
    args = agent_args(plan, edge, "api")
    pairs = dict(zip(args[::2], args[1::2], strict=False))
    assert pairs["--service"] == "203.0.113.7:80"
    assert pairs["--path"] == "/v1"
    assert pairs["--upstream"] == "shop-api-80"
    assert args[args.index("--host-header") + 1] == "api.example.com"
    # an explicit --path wins over the rule's; the ClusterIP has no Host header
    assert "/deep" in agent_args(
        Plan("shop", "deployments", "api", Path("o"), path="/deep"), edge, "api"
    )
    plain = agent_args(plan, Edge(EdgeKind.SERVICE, "api", "10.96.0.1:80"), "api")
    assert "--host-header" not in plain
    assert plain[plain.index("--upstream") + 1] == "shop/api"


# ---- end to end against lab serve (userspace datapath; serialised by the lab lock) -------
# lab serve's Ingress lists the node address (127.0.0.1 on the userspace datapath) with the
# hostPort its ingress-nginx stand-in (each node's proxy) listens on: --through ingress/api
# sends the load there.


@pytest.mark.lab
def test_rollout_test_through_the_ingress_stand_in(tmp_path: Path) -> None:
    from svcdoctor.cluster.api import connect_active
    from svcdoctor.lab.objects import INGRESS_NAMESPACE
    from tests.cluster.test_live_lab import SVCDOCTOR, svcdoctor

    kubeconfig = tmp_path / "kubeconfig"
    command = [*SVCDOCTOR, "lab", "serve", "--scenario", "race", "--datapath", "userspace",
               "--for", "150", "--kubeconfig-out", str(kubeconfig), "--format", "json",
               "--no-load"]  # fmt: skip
    lab = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert lab.stdout is not None
        assert lab.stdout.readline(), "lab serve ended before serving"
        api = connect_active(kubeconfig=str(kubeconfig))
        (ingress,) = api.list("ingresses", api.namespace)
        edge = ingress_edge(ingress, "api")  # the lab's Ingress routes / to the Service
        # the status names 127.0.0.1 once, with the hostPort of the first node's controller
        controllers = api.list("pods", INGRESS_NAMESPACE)
        ports = {c["spec"]["containers"][0]["ports"][0]["hostPort"] for c in controllers}
        assert edge.path == "/"
        assert edge.address in {f"127.0.0.1:{port}" for port in ports}
        refused = svcdoctor("rollout-test", "deployment/api", "--kubeconfig", str(kubeconfig),
                            "--through", "ingress/none", "--yes")  # fmt: skip
        assert refused.returncode == 2
        assert "ingress/none" in refused.stderr
        assert "not found" in refused.stderr
        done = svcdoctor("rollout-test", "deployment/api", "--kubeconfig", str(kubeconfig),
                         "--rate", "40", "--duration", "60", "--yes", "-o", "json",
                         "--through", f"ingress/{ingress['metadata']['name']}",
                         "--out", str(tmp_path / "bundle"),
                         timeout=200)  # fmt: skip
        left = json.loads(
            svcdoctor("cleanup", "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json").stdout
        )["found"]
    finally:
        lab.send_signal(signal.SIGINT)
        lab.wait(60)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert report["through"] == f"ingress/{ingress['metadata']['name']}"
    assert report["path"].startswith(f"ingress/{ingress['metadata']['name']} (http://127.0.0.1:")
    assert report["path"].endswith(f"→ Service {api.namespace}/api → pods")
    assert report["requests"] > 0
    assert left == []
    manifest = json.loads((tmp_path / "bundle" / "collect.json").read_text())
    assert manifest["rollout_test"]["path"] == report["path"]
    if report["diagnosis_file"] is not None:  # the diagnosis names the hop too
        diagnosis = json.loads(Path(report["diagnosis_file"]).read_text())
        assert diagnosis["load_path"] == report["path"]
    rows = [
        json.loads(line) for f in (tmp_path / "bundle").glob("client-*.jsonl") for line in f.open()
    ]
    assert rows
    assert {r["upstream"] for r in rows} == {edge.upstream}  # as ingress-nginx names it


def test_a_malformed_through_is_refused_before_the_cluster_is_read() -> None:
    from svcdoctor.cluster.rollout import check_plan

    for bad in ("svc/api", "ingress/", "http://:80/", "ftp://x/"):
        with pytest.raises(Refused, match=r"^--through "):
            check_plan(Plan("shop", "deployments", "api", Path("o"), through=bad))
    check_plan(Plan("shop", "deployments", "api", Path("o"), through="gateway/infra/edge"))
