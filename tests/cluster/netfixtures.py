"""Real servers on loopback for the connection tests: a small HTTPS (or HTTP) API server
that records what reached it, an HTTP CONNECT proxy that counts its tunnels, and
certificates (the lab's CA and server certificates; client certificates made here)."""

from __future__ import annotations

import datetime as dt
import json
import select
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from svcdoctor.lab import tls


@dataclass
class Seen:
    """What the server saw: Authorization headers, client certificate names, SNI names."""

    authorization: list[str | None] = field(default_factory=list)
    client_names: list[str] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)


@dataclass
class Api:
    url: str
    port: int
    certs: tls.ServerTLS | None
    seen: Seen


@contextmanager
def api_server(
    hosts: tuple[str, ...] = ("127.0.0.1",),
    secure: bool = True,
    token: str | None = None,
    client_ca: bytes | None = None,
    client_name: str | None = None,
) -> Iterator[Api]:
    """An API server answering ``/version`` (401 without ``token`` when one is required),
    on loopback, with a certificate for ``hosts``; ``client_ca``: client certificates it
    requires and trusts; ``client_name``: as kube-apiserver, a certificate is optional and
    only this name is authorized (401 otherwise)."""
    seen = Seen()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: one connection for several requests

        def do_GET(self) -> None:
            got = self.headers.get("Authorization")
            seen.authorization.append(got)
            peer = self.connection.getpeercert() if client_ca else None
            if peer:
                names = dict(x[0] for x in peer["subject"])
                seen.client_names.append(str(names.get("commonName")))
            ok = token is None or got == f"Bearer {token}"
            if client_name is not None:
                ok = bool(seen.client_names) and seen.client_names[-1] == client_name
            body = json.dumps({"gitVersion": "v1.31.0"} if ok else {"message": "Unauthorized"})
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    certs = None
    if secure:
        certs = tls.issue(hosts)
        ctx = certs.ssl_context()
        ctx.sni_callback = lambda _sock, name, _ctx: seen.sni.append(name)  # type: ignore[assignment,misc,return-value]
        if client_ca is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED if client_name is None else ssl.CERT_OPTIONAL
            ctx.load_verify_locations(cadata=client_ca.decode())
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        scheme = "https" if secure else "http"
        yield Api(f"{scheme}://127.0.0.1:{port}", int(port), certs, seen)
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class ConnectProxy:
    url: str
    tunnels: list[str]  # the CONNECT targets, in order


@contextmanager
def connect_proxy(routes: dict[str, tuple[str, int]] | None = None) -> Iterator[ConnectProxy]:
    """An HTTP CONNECT proxy on loopback; ``routes`` maps a target host to where the proxy
    really connects (so a name only the proxy knows proves the proxy was used)."""
    listener = socket.create_server(("127.0.0.1", 0))
    tunnels: list[str] = []
    stop = threading.Event()

    def serve(client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            line = head.split(b"\r\n", 1)[0].decode()
            method, target, _ = line.split(" ", 2)
            if method != "CONNECT":
                client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            tunnels.append(target)
            host, _, port = target.rpartition(":")
            address = (routes or {}).get(host, (host, int(port)))
            try:
                upstream = socket.create_connection(address, timeout=5)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            with upstream:
                _pipe(client, upstream, stop)

    with _accepting(listener, serve, stop) as port:
        yield ConnectProxy(f"http://127.0.0.1:{port}", tunnels)


@contextmanager
def socks5_proxy(routes: dict[str, tuple[str, int]] | None = None) -> Iterator[ConnectProxy]:
    """A SOCKS5 proxy on loopback (RFC 1928, no authentication, CONNECT only), like
    ``ssh -D``; ``tunnels`` lists the host:port asked, names as the client sent them."""
    listener = socket.create_server(("127.0.0.1", 0))
    tunnels: list[str] = []
    stop = threading.Event()

    def exactly(sock: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def serve(client: socket.socket) -> None:
        with client:
            _version, methods = exactly(client, 2)
            exactly(client, methods)
            client.sendall(b"\x05\x00")  # no authentication
            _v, _cmd, _rsv, kind = exactly(client, 4)
            if kind == 1:
                host = socket.inet_ntop(socket.AF_INET, exactly(client, 4))
            elif kind == 4:
                host = socket.inet_ntop(socket.AF_INET6, exactly(client, 16))
            else:
                host = exactly(client, exactly(client, 1)[0]).decode()
            port = int.from_bytes(exactly(client, 2), "big")
            tunnels.append(f"{host}:{port}")
            try:
                upstream = socket.create_connection((routes or {}).get(host, (host, port)), 5)
            except OSError:
                client.sendall(b"\x05\x04\x00\x01" + bytes(6))  # host unreachable
                return
            client.sendall(b"\x05\x00\x00\x01" + bytes(6))
            with upstream:
                _pipe(client, upstream, stop)

    with _accepting(listener, serve, stop) as port:
        yield ConnectProxy(f"socks5://127.0.0.1:{port}", tunnels)


@contextmanager
def _accepting(
    listener: socket.socket, serve: Callable[[socket.socket], None], stop: threading.Event
) -> Iterator[int]:
    """Serve each connection to ``listener`` in a thread until the block ends; its port."""

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(client,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def _pipe(a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
    while not stop.is_set():
        ready, _, _ = select.select([a, b], [], [], 0.2)
        for sock in ready:
            data = sock.recv(65536)
            if not data:
                return
            (b if sock is a else a).sendall(data)


def client_pair(name: str = "alice") -> tuple[bytes, str, str]:
    """A client CA (PEM, for the server) and a client certificate and key signed by it."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(pem), cert.public_bytes(pem).decode(), key_pem.decode()
