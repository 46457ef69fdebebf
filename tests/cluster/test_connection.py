"""Connection settings as kubectl has them, over real sockets on loopback: proxy-url and
HTTPS_PROXY/NO_PROXY through a real CONNECT proxy, tls-server-name, no credentials over
http, exec plugins returning client certificates or needing a terminal, CA errors."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import pty
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from svcdoctor.cluster import ClusterError
from svcdoctor.cluster import credentials as credentials_module
from svcdoctor.cluster.api import connect
from svcdoctor.cluster.connection import use_proxy
from tests.cluster.netfixtures import api_server, client_pair, connect_proxy, socks5_proxy
from tests.kubectl import kubectl_fixture, run_kubectl

V1 = "client.authentication.k8s.io/v1"
__all__ = ["kubectl_fixture"]  # the kubectl fixture
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)


def kubeconfig(
    tmp_path: Path, server: str, cluster: dict[str, Any] | None = None, **user: Any
) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }
    path = tmp_path / f"kubeconfig-{len(list(tmp_path.glob('kubeconfig-*')))}"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def ca_data(pem: bytes) -> dict[str, str]:
    return {"certificate-authority-data": base64.b64encode(pem).decode()}


def plugin(tmp_path: Path, body: str, name: str = "plugin") -> str:
    """An exec credential plugin: a Python script running ``body``."""
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def credential(**status: Any) -> str:
    doc = f"{{'apiVersion': '{V1}', 'kind': 'ExecCredential', 'status': {status!r}}}"
    return f"print(json.dumps({doc}))"


# ---- proxies --------------------------------------------------------------------------


def test_proxy_url_is_used_and_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the server's name resolves only inside the proxy: an answer proves the tunnel
    with (
        api_server(hosts=("api.cluster.test",), token="t") as api,
        connect_proxy({"api.cluster.test": ("127.0.0.1", api.port)}) as proxy,
    ):
        assert api.certs is not None
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # dead: proxy-url wins
        server = f"https://api.cluster.test:{api.port}"
        config = kubeconfig(tmp_path, server, {**ca_data(api.certs.ca_pem),
                            "proxy-url": proxy.url}, token="t")  # fmt: skip
        reader = connect(kubeconfig=config)
        assert reader.version()["gitVersion"] == "v1.31.0"
        assert reader.version()["gitVersion"] == "v1.31.0"
        assert proxy.tunnels == [f"api.cluster.test:{api.port}"]  # one kept-alive tunnel
        assert api.seen.authorization == ["Bearer t", "Bearer t"]
        assert api.seen.sni == ["api.cluster.test"]


def test_https_proxy_from_the_environment_and_no_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        api_server(hosts=("api.cluster.test",)) as api,
        connect_proxy({"api.cluster.test": ("127.0.0.1", api.port)}) as proxy,
    ):
        assert api.certs is not None
        config = kubeconfig(
            tmp_path, f"https://api.cluster.test:{api.port}", ca_data(api.certs.ca_pem)
        )
        monkeypatch.setenv("https_proxy", proxy.url.removeprefix("http://"))  # host:port
        reader = connect(kubeconfig=config)
        assert reader.proxy is not None
        assert reader.proxy.source == "https_proxy"
        assert reader.version()["gitVersion"] == "v1.31.0"
        assert len(proxy.tunnels) == 1
        monkeypatch.setenv("NO_PROXY", "example.com,.cluster.test")
        skipped = connect(kubeconfig=config, timeout=2.0)
        assert skipped.proxy is None
        with pytest.raises(ClusterError, match="cannot reach"):  # the name needs the proxy
            skipped.version()
        assert len(proxy.tunnels) == 1
        # a server on loopback is never proxied (Go's httpproxy), whatever the environment
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        local = kubeconfig(tmp_path, api.url, {"tls-server-name": "api.cluster.test",
                           **ca_data(api.certs.ca_pem)})  # fmt: skip
        assert connect(kubeconfig=local).version()["gitVersion"] == "v1.31.0"


def test_a_dead_proxy_is_named(tmp_path: Path) -> None:
    with api_server() as api:
        assert api.certs is not None
        config = kubeconfig(
            tmp_path,
            "https://api.cluster.test:6443",
            {**ca_data(api.certs.ca_pem), "proxy-url": "http://127.0.0.1:9"},
        )
        with pytest.raises(ClusterError) as caught:
            connect(kubeconfig=config, timeout=2.0).version()
        assert "through the proxy http://127.0.0.1:9 (proxy-url of cluster 'k')" in str(
            caught.value
        )


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "proxied"),
    [
        ("api.example.com", 443, "", True),
        ("localhost", 443, "", False),
        ("127.0.0.5", 443, "", False),
        ("::1", 443, "", False),
        ("api.example.com", 443, "*", False),
        ("api.example.com", 443, "example.com", False),  # a domain and its subdomains
        ("example.com", 443, "example.com", False),
        ("example.com", 443, ".example.com", True),  # subdomains only
        ("api.example.com", 443, "*.example.com", False),
        ("api.example.com", 443, "example.com:6443", True),  # another port
        ("api.example.com", 6443, " Example.com:6443 ", False),
        ("notexample.com", 443, "example.com", True),
        ("10.1.2.3", 443, "10.0.0.0/8", False),  # CIDRs
        ("11.1.2.3", 443, "10.0.0.0/8", True),
        ("10.1.2.3", 443, "10.1.2.3", False),
        ("10.1.2.3", 6443, "10.1.2.3:443", True),
        ("fd00::1", 443, "fd00::/8", False),
        ("fd00::1", 443, "[fd00::1]:443", False),
    ],
)
def test_no_proxy_matches_as_go_does(host: str, port: int, no_proxy: str, proxied: bool) -> None:
    assert use_proxy(host, port, no_proxy) is proxied


def test_a_socks5_proxy_url_as_with_ssh_d(tmp_path: Path) -> None:
    with (
        api_server(hosts=("api.cluster.test",), token="t") as api,
        socks5_proxy({"api.cluster.test": ("127.0.0.1", api.port)}) as proxy,
    ):
        assert api.certs is not None
        cluster = {**ca_data(api.certs.ca_pem), "proxy-url": proxy.url}
        config = kubeconfig(tmp_path, f"https://api.cluster.test:{api.port}", cluster, token="t")
        assert connect(kubeconfig=config).version()["gitVersion"] == "v1.31.0"
        assert proxy.tunnels == [f"api.cluster.test:{api.port}"]  # the name resolved there
    bad = kubeconfig(tmp_path, "https://x:1", {"proxy-url": "ftp://p:1"})
    with pytest.raises(ClusterError, match=r"cluster 'k': proxy-url 'ftp://p:1' has scheme 'ftp'"):
        connect(kubeconfig=bad)


# ---- TLS ----------------------------------------------------------------------------


def test_tls_server_name_is_sent_and_checked(tmp_path: Path) -> None:
    with api_server(hosts=("kubernetes.internal",)) as api:
        assert api.certs is not None
        plain = kubeconfig(tmp_path, api.url, ca_data(api.certs.ca_pem))
        with pytest.raises(ClusterError) as caught:
            connect(kubeconfig=plain).version()
        message = str(caught.value)
        assert message.startswith(
            f"the API server's certificate at {api.url} did not verify against "
            "certificate-authority-data of cluster 'k': "
        )
        assert "tls-server-name in the kubeconfig sets the name to check" in message
        named = kubeconfig(
            tmp_path,
            api.url,
            {**ca_data(api.certs.ca_pem), "tls-server-name": "kubernetes.internal"},
        )
        assert connect(kubeconfig=named).version()["gitVersion"] == "v1.31.0"
        assert api.seen.sni[-1] == "kubernetes.internal"
        wrong = kubeconfig(
            tmp_path, api.url, {**ca_data(api.certs.ca_pem), "tls-server-name": "other.internal"}
        )
        with pytest.raises(ClusterError, match=r"Hostname mismatch.*checked against tls-server"):
            connect(kubeconfig=wrong).version()


def test_ca_errors_name_the_field_and_say_certificate(tmp_path: Path) -> None:
    with api_server() as api, api_server() as other:
        assert api.certs is not None
        assert other.certs is not None
        missing = tmp_path / "nope" / "ca.crt"
        config = kubeconfig(tmp_path, api.url, {"certificate-authority": str(missing)})
        with pytest.raises(ClusterError) as caught:
            connect(kubeconfig=config)
        assert str(caught.value) == (
            f"kubeconfig cluster 'k': cannot read certificate-authority {missing}: "
            "No such file or directory"
        )
        garbage = tmp_path / "garbage.crt"
        garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n")
        config = kubeconfig(tmp_path, api.url, {"certificate-authority": str(garbage)})
        with pytest.raises(ClusterError, match=rf"certificate-authority {garbage} holds no valid"):
            connect(kubeconfig=config)
        wrong_ca = tmp_path / "other-ca.crt"
        wrong_ca.write_bytes(other.certs.ca_pem)
        config = kubeconfig(tmp_path, api.url, {"certificate-authority": str(wrong_ca)})
        with pytest.raises(ClusterError) as unverified:
            connect(kubeconfig=config).version()
        assert f"did not verify against certificate-authority {wrong_ca}: " in str(unverified.value)
        assert "cannot reach" not in str(unverified.value)
        assert "\n" not in str(unverified.value)
        config = kubeconfig(tmp_path, api.url, {"certificate-authority-data": "!!"})
        with pytest.raises(ClusterError, match="certificate-authority-data is not base64"):
            connect(kubeconfig=config)
        insecure = kubeconfig(tmp_path, api.url, {"insecure-skip-tls-verify": True})
        assert connect(kubeconfig=insecure).version()["gitVersion"] == "v1.31.0"


# ---- credentials ----------------------------------------------------------------------


def test_no_credentials_over_plain_http(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    script = plugin(tmp_path, f"open({str(ran)!r}, 'w').close()\n" + credential(token="t"))
    with api_server(secure=False) as api:
        for user in (
            {"token": "t"},
            {"tokenFile": str(tmp_path / "no-such-file")},
            {"exec": {"apiVersion": V1, "command": script, "interactiveMode": "Never"}},
        ):
            assert connect(kubeconfig=kubeconfig(tmp_path, api.url, **user)).version()
        assert api.seen.authorization == [None, None, None]
        assert not ran.exists()  # the plugin is not even run
    with api_server(secure=False, token="t") as api:
        with pytest.raises(ClusterError) as caught:
            connect(kubeconfig=kubeconfig(tmp_path, api.url, token="t")).version()
        assert str(caught.value) == (
            f"the API server at {api.url} answered 401 to a request without credentials: like "
            "kubectl, svcdoctor sends the credentials of user 'u' only over https, never to an "
            "http:// server"
        )
        assert api.seen.authorization == [None]


def test_exec_plugin_client_certificate(tmp_path: Path) -> None:
    client_ca, cert, key = client_pair("pinniped-user")
    info = tmp_path / "exec-info.json"
    body = f"open({str(info)!r}, 'w').write(os.environ['KUBERNETES_EXEC_INFO'])\n" + credential(
        clientCertificateData=cert, clientKeyData=key
    )
    with api_server(client_ca=client_ca) as api:
        assert api.certs is not None
        exec_config = {"apiVersion": V1, "command": plugin(tmp_path, body),
                       "interactiveMode": "Never", "provideClusterInfo": True}  # fmt: skip
        extension = {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "x"}}
        cluster = {**ca_data(api.certs.ca_pem), "extensions": [extension]}
        reader = connect(kubeconfig=kubeconfig(tmp_path, api.url, cluster, exec=exec_config))
        assert reader.version()["gitVersion"] == "v1.31.0"
        assert api.seen.client_names == ["pinniped-user"]
        assert api.seen.authorization == [None]  # a certificate, no token
        sent = json.loads(info.read_text())
        assert sent["spec"]["interactive"] is False
        assert sent["spec"]["cluster"]["server"] == api.url
        assert sent["spec"]["cluster"]["config"] == {"audience": "x"}
        assert base64.b64decode(sent["spec"]["cluster"]["certificate-authority-data"]) == (
            api.certs.ca_pem
        )
        # the kubeconfig's own client certificate works the same way
        data = {"client-certificate-data": base64.b64encode(cert.encode()).decode(),
                "client-key-data": base64.b64encode(key.encode()).decode()}  # fmt: skip
        assert connect(kubeconfig=kubeconfig(tmp_path, api.url, cluster, **data)).version()
        assert api.seen.client_names == ["pinniped-user"] * 2
        half = kubeconfig(tmp_path, api.url, cluster, **{"client-certificate": "/nope.crt"})
        with pytest.raises(ClusterError, match=r"user 'u': cannot read client-certificate"):
            connect(kubeconfig=half)


def test_exec_plugin_runs_again_on_401_and_a_new_certificate_gets_a_new_connection(
    tmp_path: Path,
) -> None:
    client_ca, old_cert, old_key = client_pair("old-user")
    client_ca2, new_cert, new_key = client_pair("new-user")
    runs = tmp_path / "runs"
    answers = [
        {"token": "stale", "clientCertificateData": old_cert, "clientKeyData": old_key},
        {"token": "fresh", "clientCertificateData": new_cert, "clientKeyData": new_key},
    ]
    body = (
        f"n = len(open({str(runs)!r}).read()) if os.path.exists({str(runs)!r}) else 0\n"
        f"open({str(runs)!r}, 'a').write('x')\n"
        f"status = {answers!r}[min(n, 1)]\n"
        f"print(json.dumps({{'apiVersion': '{V1}', 'kind': 'ExecCredential', 'status': status}}))"
    )
    # the server trusts both, and authorizes only new-user (401 for old-user)
    with api_server(client_ca=client_ca + client_ca2, client_name="new-user") as api:
        assert api.certs is not None
        exec_config = {"apiVersion": V1, "command": plugin(tmp_path, body),
                       "interactiveMode": "Never"}  # fmt: skip
        config = kubeconfig(tmp_path, api.url, ca_data(api.certs.ca_pem), exec=exec_config)
        reader = connect(kubeconfig=config)
        assert reader.version()["gitVersion"] == "v1.31.0"
        assert runs.read_text() == "xx"  # 401 with the first: run again, retried once
        assert api.seen.authorization == ["Bearer stale", "Bearer fresh"]
        # the retry went on a new connection that presented the new certificate
        assert api.seen.client_names == ["old-user", "new-user"]
        assert reader.version()["gitVersion"] == "v1.31.0"
        assert runs.read_text() == "xx"  # cached since


def test_exec_plugin_expiry_and_bad_answers(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = f"open({str(runs)!r}, 'a').write('x')\n" + credential(
        token="t", expirationTimestamp=past
    )
    with api_server(token="t") as api:
        assert api.certs is not None
        cluster = ca_data(api.certs.ca_pem)
        exec_config = {
            "apiVersion": V1,
            "command": plugin(tmp_path, body),
            "interactiveMode": "Never",
        }
        reader = connect(kubeconfig=kubeconfig(tmp_path, api.url, cluster, exec=exec_config))
        reader.version()
        reader.version()
        assert runs.read_text() == "xx"  # expired: run again for the second request
        for status, message in (
            ({"clientCertificateData": "x"}, "returned only one of clientCertificateData"),
            ({"token": "t", "expirationTimestamp": "soon"}, "is not an RFC 3339 time"),
            ({}, "printed no ExecCredential with status.token"),
        ):
            bad = {**exec_config, "command": plugin(tmp_path, credential(**status), "bad")}
            with pytest.raises(ClusterError, match=message):
                connect(kubeconfig=kubeconfig(tmp_path, api.url, cluster, exec=bad)).version()
        no_mode = {"apiVersion": V1, "command": "x"}
        with pytest.raises(ClusterError, match=r"exec.interactiveMode must be one of"):
            connect(kubeconfig=kubeconfig(tmp_path, api.url, cluster, exec=no_mode))


def test_always_interactive_plugin_without_a_terminal_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(credentials_module, "stdin_is_a_terminal", lambda: False)
    ran = tmp_path / "ran"
    script = plugin(tmp_path, f"open({str(ran)!r}, 'w').close()\n" + credential(token="t"))
    with api_server(token="t") as api:
        assert api.certs is not None
        cluster = ca_data(api.certs.ca_pem)
        always = {"apiVersion": V1, "command": script, "interactiveMode": "Always"}
        with pytest.raises(ClusterError) as caught:
            connect(kubeconfig=kubeconfig(tmp_path, api.url, cluster, exec=always)).version()
        assert "needs a terminal to log in (interactiveMode: Always)" in str(caught.value)
        assert not ran.exists()
        maybe = {**always, "interactiveMode": "IfAvailable"}
        assert connect(kubeconfig=kubeconfig(tmp_path, api.url, cluster, exec=maybe)).version()


def test_interactive_plugin_gets_the_terminal(tmp_path: Path) -> None:
    """Through a real pseudo-terminal: the plugin reads the password the user types, and
    logs in when the reader is made (before any progress display)."""
    body = (
        "spec = json.loads(os.environ['KUBERNETES_EXEC_INFO'])['spec']\n"
        "assert spec['interactive'] is True and os.isatty(0), spec\n"
        "sys.stderr.write('password: '); sys.stderr.flush()\n"
        "token = sys.stdin.readline().strip()\n"
        + credential(token="TOKEN").replace("'TOKEN'", "token")
    )
    with api_server(token="typed") as api:
        assert api.certs is not None
        exec_config = {"apiVersion": V1, "command": plugin(tmp_path, body),
                       "interactiveMode": "Always"}  # fmt: skip
        config = kubeconfig(tmp_path, api.url, ca_data(api.certs.ca_pem), exec=exec_config)
        code = (
            "from svcdoctor.cluster.api import connect\n"
            f"reader = connect(kubeconfig={config!r})\n"
            "print('made', flush=True)\n"
            "print(reader.version()['gitVersion'], flush=True)\n"
        )
        main, child = pty.openpty()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=child, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        os.close(child)
        try:
            os.write(main, b"typed\n")
            out, err = proc.communicate(timeout=60)
        finally:
            os.close(main)
        assert proc.returncode == 0, err.decode()
        assert out.decode().split() == ["made", "v1.31.0"]
        assert b"password: " in err
        assert api.seen.authorization == ["Bearer typed"]


# ---- the same kubeconfigs through the real kubectl ------------------------------------


def test_kubectl_does_the_same(
    tmp_path: Path, kubectl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the server (and the proxy) saw from kubectl v1.35 and from svcdoctor, for the
    same kubeconfig: the same headers, tunnels, SNI names and client certificates."""
    client_ca, cert, key = client_pair("pinniped-user")
    script = plugin(tmp_path, credential(clientCertificateData=cert, clientKeyData=key))
    exec_config = {"apiVersion": V1, "command": script, "interactiveMode": "Never"}

    def both(config: str, observe: Callable[[], Any]) -> list[Any]:
        """What ``observe`` says after kubectl's request, then after svcdoctor's."""
        done = run_kubectl(kubectl, Path(config), ["get", "--raw", "/version"])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["gitVersion"] == "v1.31.0"
        seen = [observe()]
        assert connect(kubeconfig=config).version()["gitVersion"] == "v1.31.0"
        return [*seen, observe()]

    with api_server(secure=False) as http:
        config = kubeconfig(tmp_path, http.url, token="t")
        # neither sends the token to an http:// server
        assert both(config, lambda: list(http.seen.authorization)) == [[None], [None, None]]
    with (
        api_server(hosts=("api.cluster.test",), client_ca=client_ca) as api,
        connect_proxy({"api.cluster.test": ("127.0.0.1", api.port)}) as proxy,
    ):
        assert api.certs is not None

        def counts() -> tuple[int, int, int]:
            return len(proxy.tunnels), len(api.seen.sni), len(api.seen.client_names)

        server = f"https://api.cluster.test:{api.port}"
        cluster = {**ca_data(api.certs.ca_pem), "proxy-url": proxy.url}
        config = kubeconfig(tmp_path, server, cluster, exec=exec_config)
        assert both(config, counts) == [(1, 1, 1), (2, 2, 2)]  # proxy-url, exec certificate
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        config = kubeconfig(tmp_path, server, ca_data(api.certs.ca_pem), exec=exec_config)
        assert both(config, counts) == [(3, 3, 3), (4, 4, 4)]  # HTTPS_PROXY
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # never used for loopback
        local = {**ca_data(api.certs.ca_pem), "tls-server-name": "api.cluster.test"}
        config = kubeconfig(tmp_path, api.url, local, exec=exec_config)
        assert both(config, counts) == [(4, 5, 5), (4, 6, 6)]
        assert set(api.seen.sni) == {"api.cluster.test"}  # tls-server-name
        assert set(api.seen.client_names) == {"pinniped-user"}
