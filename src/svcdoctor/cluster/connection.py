"""How we reach the API server, as kubectl does from the kubeconfig's cluster: its CA
(``certificate-authority``/``-data``, else the system's), ``insecure-skip-tls-verify``,
``tls-server-name`` (the name sent in SNI and checked in the certificate), and the proxy:
``proxy-url`` when given, else ``HTTPS_PROXY``/``HTTP_PROXY`` unless ``NO_PROXY`` exempts
the server. The result is one ``httpx`` client for the server, with the user's credentials
(``credentials``) and errors that say what failed: the certificate (and against which CA),
or the proxy.

Sources: client-go ``DirectClientConfig.ClientConfig`` and ``validation.go``
(https://github.com/kubernetes/client-go/tree/master/tools/clientcmd): proxy-url schemes
http, https and socks5, CA data over file; Go's ``httpproxy``
(https://github.com/golang/net/blob/master/http/httpproxy/proxy.go) for the environment.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import ipaddress
import os
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from svcdoctor.cluster import credentials
from svcdoctor.cluster.config import Target, chosen
from svcdoctor.cluster.reader import ClusterError

PROXY_SCHEMES = ("http", "https", "socks5")  # client-go helpers.go parseProxyURL
# Go's httpproxy.canonicalAddr: the port of a URL without one
DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080}
EXEC_EXTENSION = "client.authentication.k8s.io/exec"  # spec.cluster.config's source
# the name or IP checked is not the certificate's (OpenSSL include/openssl/x509_vfy.h:
# X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH)
NAME_MISMATCH = (62, 64)


@dataclass(frozen=True, slots=True)
class Cluster:
    """A kubeconfig cluster, checked; ``ca_pem`` read from the file or the data."""

    name: str
    server: str
    ca_source: str  # for messages: "certificate-authority /path", "...-data", the system's
    ca_pem: str = ""
    insecure: bool = False
    tls_server_name: str = ""
    proxy_url: str = ""
    exec_config: Any = None


@dataclass(frozen=True, slots=True)
class Proxy:
    """The proxy to use and the setting that chose it (for messages)."""

    url: str
    source: str


@dataclass(frozen=True, slots=True)
class Connection:
    """The server's address, a client for it, and the exec plugin it may run (None else)."""

    server: str
    client: httpx.Client
    plugin: credentials.CredentialPlugin | None
    proxy: Proxy | None


def open_connection(
    target: Target,
    timeout: float,
    env: Mapping[str, str] | None = None,
    isatty: Callable[[], bool] | None = None,
) -> Connection:
    """The client kubectl would use for ``target``'s context; ``ClusterError`` (one line,
    naming the field) when the kubeconfig cannot make one."""
    env = os.environ if env is None else env
    (cluster_name, cluster_doc), (user_name, user_doc) = chosen(target)
    cluster = read_cluster(cluster_name, cluster_doc)
    proxy = proxy_for(cluster, env)
    secure = cluster.server.startswith("https://")
    ctx = tls_context(cluster) if secure else ssl.create_default_context()
    transport = ServerTransport(cluster, ctx, proxy)
    if secure:
        auth = credentials.user_auth(
            user_name,
            user_doc,
            ctx,
            timeout=timeout,
            context=target.context,
            cluster_info=_cluster_info(cluster, proxy),
            use_certificate=transport.use_certificate,
            isatty=isatty,
        )
    else:
        auth = credentials.Withheld(cluster.server, user_name) if user_doc else None
    client = httpx.Client(
        base_url=cluster.server,
        auth=auth,
        timeout=httpx.Timeout(timeout),
        transport=transport,
        trust_env=False,  # the proxy is chosen here, as kubectl chooses it; no .netrc
    )
    plugin = auth if isinstance(auth, credentials.CredentialPlugin) else None
    return Connection(cluster.server, client, plugin, proxy)


def read_cluster(name: str, doc: Mapping[str, Any]) -> Cluster:
    """The cluster ``name`` of the kubeconfig, with its CA read and checked."""
    where = f"kubeconfig cluster {name!r}"
    server = doc.get("server")
    if not isinstance(server, str) or not server:
        raise ClusterError(f"{where}: no server")
    parts = urllib.parse.urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ClusterError(f"{where}: server {server!r} is not an http(s):// URL")
    proxy_url = str(doc.get("proxy-url") or "")
    if proxy_url:
        scheme = urllib.parse.urlsplit(proxy_url).scheme
        if scheme not in PROXY_SCHEMES:
            raise ClusterError(
                f"{where}: proxy-url {proxy_url!r} has scheme {scheme!r}, must be http, https "
                "or socks5"
            )
    ca_source, ca_pem = "the system's trusted CAs", ""
    if doc.get("certificate-authority-data"):  # client-go: data overrides the file
        ca_source = f"certificate-authority-data of cluster {name!r}"
        try:
            ca_pem = base64.b64decode(
                str(doc["certificate-authority-data"]), validate=True
            ).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise ClusterError(f"{where}: certificate-authority-data is not base64 PEM") from None
    elif doc.get("certificate-authority"):
        path = str(doc["certificate-authority"])
        ca_source = f"certificate-authority {path}"
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                ca_pem = f.read()
        except OSError as exc:
            raise ClusterError(
                f"{where}: cannot read certificate-authority {path}: {exc.strerror or exc}"
            ) from None
    extensions = doc.get("extensions") or []
    exec_config = next(
        (e.get("extension") for e in extensions if isinstance(e, dict)
         and e.get("name") == EXEC_EXTENSION),
        None,
    )  # fmt: skip
    return Cluster(
        name=name,
        server=server.rstrip("/"),
        ca_source=ca_source,
        ca_pem=ca_pem,
        insecure=bool(doc.get("insecure-skip-tls-verify")),
        tls_server_name=str(doc.get("tls-server-name") or ""),
        proxy_url=proxy_url,
        exec_config=exec_config,
    )


def tls_context(cluster: Cluster) -> ssl.SSLContext:
    """The context that verifies the server as kubectl does (or not, when insecure)."""
    where = f"kubeconfig cluster {cluster.name!r}"
    if cluster.insecure:
        if cluster.ca_pem:  # client-go rest/transport.go: "specifying a root certificates
            raise ClusterError(  # file with the insecure flag is not allowed"
                f"{where}: insecure-skip-tls-verify and a certificate authority exclude each other"
            )
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if not cluster.ca_pem:
        return httpx.create_ssl_context(verify=True, trust_env=False)
    try:
        return ssl.create_default_context(cadata=cluster.ca_pem)
    except (ssl.SSLError, ValueError) as exc:
        reason = str(getattr(exc, "reason", None) or exc)
        raise ClusterError(
            f"{where}: {cluster.ca_source} holds no valid PEM certificate ({reason})"
        ) from None


def proxy_for(cluster: Cluster, env: Mapping[str, str]) -> Proxy | None:
    """kubectl's proxy for the server: ``proxy-url``, else the environment's as Go's
    ``httpproxy`` reads it (``HTTPS_PROXY`` for https, ``HTTP_PROXY`` for http, upper case
    first; never for localhost or a loopback address; not for what ``NO_PROXY`` names)."""
    if cluster.proxy_url:
        return Proxy(cluster.proxy_url, f"proxy-url of cluster {cluster.name!r}")
    parts = urllib.parse.urlsplit(cluster.server)
    scheme = parts.scheme
    name = "HTTPS_PROXY" if scheme == "https" else "HTTP_PROXY"
    for var in (name, name.lower()):
        if env.get(var):
            value = env[var].strip()
            break
    else:
        return None
    if urllib.parse.urlsplit(value).scheme not in PROXY_SCHEMES:
        value = f"http://{value}"  # Go: "host[:port]" means an http proxy
    host = (parts.hostname or "").lower()
    port = parts.port or DEFAULT_PORTS[scheme]
    no_proxy = env.get("NO_PROXY") or env.get("no_proxy") or ""
    if not use_proxy(host, port, no_proxy):
        return None
    return Proxy(value, var)


def use_proxy(host: str, port: int, no_proxy: str) -> bool:
    """Go's ``httpproxy`` ``useProxy``: localhost and loopback never; ``*`` nothing; an IP,
    a CIDR, a domain (and its subdomains; ``.d`` subdomains only), each with an optional
    port."""
    if host == "localhost":
        return False
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        return False
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return False
        if "/" in entry:
            try:
                if ip is not None and ip in ipaddress.ip_network(entry, strict=False):
                    return False
            except ValueError:
                pass
            continue
        name, want = _split_port(entry)
        if not name:
            continue
        if want and want != str(port):
            continue
        try:
            entry_ip = ipaddress.ip_address(name)
        except ValueError:
            entry_ip = None
        if entry_ip is not None:  # an IP entry matches only that IP
            if ip == entry_ip:
                return False
            continue
        name = name.removeprefix("*")
        if name.startswith("."):
            if host.endswith(name):
                return False
        elif host == name or host.endswith("." + name):
            return False
    return True


def _split_port(entry: str) -> tuple[str, str]:
    """``host``, ``host:port``, ``[v6]:port`` or a bare IPv6 address → (host, port)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest.removeprefix(":")
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, ""


class ServerTransport(httpx.BaseTransport):
    """httpx's transport to the one server: the TLS name kubectl checks, the proxy, and
    errors that name the certificate or the proxy."""

    def __init__(self, cluster: Cluster, ctx: ssl.SSLContext, proxy: Proxy | None) -> None:
        self.cluster, self.ctx, self.proxy = cluster, ctx, proxy
        socks = proxy is not None and urllib.parse.urlsplit(proxy.url).scheme == "socks5"
        if proxy is not None and socks and importlib.util.find_spec("socksio") is None:
            raise ClusterError(  # httpx's SOCKS support needs it
                f"{proxy.source}: the socks5 proxy {proxy.url} needs the Python package "
                "socksio (pip install socksio); or use an http proxy"
            )
        self._inner = self._transport()

    def _transport(self) -> httpx.HTTPTransport:
        return httpx.HTTPTransport(
            verify=self.ctx, trust_env=False, proxy=self.proxy.url if self.proxy else None
        )

    def use_certificate(self, cert_pem: str, key_pem: str, what: str) -> None:
        """Present this client certificate from now on: a new TLS context (OpenSSL's is not
        meant to change under open connections) and new connections."""
        ctx = tls_context(self.cluster)
        credentials.load_pair(ctx, cert_pem, key_pem, what)
        self.ctx = ctx
        old, self._inner = self._inner, self._transport()
        old.close()

    def close(self) -> None:
        self._inner.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.cluster.tls_server_name:
            request.extensions["sni_hostname"] = self.cluster.tls_server_name
        try:
            return self._inner.handle_request(request)
        except httpx.TransportError as exc:
            failure: httpx.TransportError = exc
        unverified = _cause(failure, ssl.SSLCertVerificationError)
        if isinstance(unverified, ssl.SSLCertVerificationError):
            raise ClusterError(self._unverified(unverified))
        if self.proxy is not None and isinstance(failure, httpx.ConnectError | httpx.ProxyError):
            # a new exception outside the except block: the proxy's part is the reason
            reason = _innermost(failure)
            raise type(failure)(f"through the proxy {self.proxy.url} ({self.proxy.source}): "
                                f"{reason}", request=request)  # fmt: skip
        raise failure

    def _unverified(self, error: ssl.SSLCertVerificationError) -> str:
        cluster = self.cluster
        said = str(error.verify_message or error.reason or error).rstrip(".")
        hint = ""
        if error.verify_code in NAME_MISMATCH:
            hint = (
                " (checked against tls-server-name)"
                if cluster.tls_server_name
                else " (tls-server-name in the kubeconfig sets the name to check)"
            )
        return (
            f"the API server's certificate at {cluster.server} did not verify against "
            f"{cluster.ca_source}: {said}{hint}"
        )


def _cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in ``exc``'s chain of causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _innermost(exc: BaseException) -> str:
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _cluster_info(cluster: Cluster, proxy: Proxy | None) -> dict[str, Any]:
    """``spec.cluster`` for a plugin that asks for it (client-go ``rest.ConfigToExecCluster``:
    the proxy only when proxy-url set it)."""
    info: dict[str, Any] = {"server": cluster.server}
    if cluster.tls_server_name:
        info["tls-server-name"] = cluster.tls_server_name
    if cluster.insecure:
        info["insecure-skip-tls-verify"] = True
    if cluster.ca_pem:
        info["certificate-authority-data"] = base64.b64encode(cluster.ca_pem.encode()).decode()
    if cluster.proxy_url and proxy is not None:
        info["proxy-url"] = proxy.url
    if cluster.exec_config is not None:
        info["config"] = cluster.exec_config
    return info
