"""Who we are to the API server, as kubectl decides it from the kubeconfig's user: a bearer
token (static or a file re-read when refused), basic auth, or an exec credential plugin
(token or client certificate); and nothing at all over plain ``http://``.

client-go reads the user's credentials only when the server is ``https``
(``DirectClientConfig.ClientConfig``, "only try to read the auth information if we are
secure": https://github.com/kubernetes/client-go/blob/master/tools/clientcmd/client_config.go),
so a token never crosses the network in clear. The exec plugin protocol is client-go's
(https://github.com/kubernetes/client-go/blob/master/plugin/pkg/client/auth/exec/exec.go):
``KUBERNETES_EXEC_INFO`` with ``spec.interactive`` (and ``spec.cluster`` when the plugin asks
for it), the terminal handed over only when ``interactiveMode`` allows it and stdin is one,
``status.token`` or ``status.clientCertificateData``/``clientKeyData``, cached until
``status.expirationTimestamp`` or until the server answers 401.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import os
import ssl
import subprocess
import tempfile
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx

from svcdoctor.cluster.reader import ClusterError

# client-go accepts these two (exec.go apiVersions; v1alpha1 was removed in Kubernetes 1.24)
API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
# interactiveMode's values; v1 requires one, v1beta1 defaults to IfAvailable
# (client-go tools/clientcmd/api/v1/defaults.go SetDefaults_ExecConfig, validation.go)
MODES = ("Never", "IfAvailable", "Always")


@dataclass(frozen=True, slots=True)
class ExecPlugin:
    """A kubeconfig user's ``exec`` section, checked."""

    user: str
    command: str
    api_version: str
    interactive_mode: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    cluster: Mapping[str, Any] | None = None  # spec.cluster, when provideClusterInfo


@dataclass(frozen=True, slots=True)
class Issued:
    """What a plugin gave: a token and/or a client certificate and key (PEM), until when."""

    token: str = ""
    cert_pem: str = ""
    key_pem: str = ""
    expires: dt.datetime | None = None


def user_auth(
    user: str,
    doc: Mapping[str, Any],
    ctx: ssl.SSLContext,
    *,
    timeout: float,
    context: str,
    cluster_info: Mapping[str, Any],
    use_certificate: Callable[[str, str, str], None],
    isatty: Callable[[], bool] | None = None,
) -> httpx.Auth | None:
    """The credentials of kubeconfig user ``user`` for an https server: its client
    certificate loaded into ``ctx``, and the auth that sets the Authorization header (a
    token or token file, else basic auth, else the exec plugin, as client-go ranks them)."""
    where = f"kubeconfig user {user!r}"
    _client_certificate(where, doc, ctx)
    if doc.get("token") or doc.get("tokenFile"):
        return TokenAuth(user, str(doc.get("token") or ""), str(doc.get("tokenFile") or ""))
    if doc.get("username") or doc.get("password"):
        return httpx.BasicAuth(str(doc.get("username") or ""), str(doc.get("password") or ""))
    if doc.get("exec"):
        plugin = exec_plugin(user, doc["exec"], cluster_info)
        return CredentialPlugin(plugin, timeout, context, use_certificate, isatty)
    if doc.get("auth-provider"):
        section = doc["auth-provider"]
        provider = section.get("name") if isinstance(section, dict) else section
        raise ClusterError(
            f"{where}: auth-provider {provider!r} is not supported (kubectl dropped its "
            "built-in providers): use its exec credential plugin (e.g. kubelogin)"
        )
    return None


def _client_certificate(where: str, doc: Mapping[str, Any], ctx: ssl.SSLContext) -> None:
    """Load the user's ``client-certificate(-data)`` and ``client-key(-data)`` (data over
    file, as client-go) into ``ctx``."""
    pems: list[str] = []
    for name in ("client-certificate", "client-key"):
        if doc.get(f"{name}-data"):
            try:
                pems.append(base64.b64decode(str(doc[f"{name}-data"]), validate=True).decode())
            except (binascii.Error, UnicodeDecodeError):
                raise ClusterError(f"{where}: {name}-data is not base64 PEM") from None
        elif doc.get(name):
            try:
                pems.append(Path(str(doc[name])).read_text(errors="replace"))
            except OSError as exc:
                raise ClusterError(
                    f"{where}: cannot read {name} {doc[name]}: {exc.strerror or exc}"
                ) from None
    if len(pems) == 1:
        raise ClusterError(f"{where}: a client certificate needs both client-certificate and "
                           "client-key (or their -data)")  # fmt: skip
    if pems:
        load_pair(ctx, pems[0], pems[1], f"{where}: client-certificate with client-key")


def exec_plugin(user: str, section: Any, cluster: Mapping[str, Any] | None) -> ExecPlugin:
    """The ``exec`` section of user ``user``, or ``ClusterError`` naming the bad field."""
    where = f"kubeconfig user {user!r}: exec"
    if not isinstance(section, dict):
        raise ClusterError(f"{where} must be a mapping")
    command, version = section.get("command"), section.get("apiVersion")
    if not isinstance(command, str) or not command:
        raise ClusterError(f"{where}.command must be given")
    if version not in API_VERSIONS:
        raise ClusterError(
            f"{where}.apiVersion {version!r} is not one of {', '.join(API_VERSIONS)}"
        )
    mode = section.get("interactiveMode") or (
        "IfAvailable" if version.endswith("v1beta1") else None
    )
    if mode not in MODES:
        raise ClusterError(
            f"{where}.interactiveMode must be one of {', '.join(MODES)} with {version}"
            + (f" (got {mode!r})" if mode else "")
        )
    env = section.get("env") or []
    if not isinstance(env, list) or not all(
        isinstance(v, dict) and isinstance(v.get("name"), str) and v["name"] for v in env
    ):
        raise ClusterError(f"{where}.env must be a list of name/value pairs")
    args = section.get("args") or []
    if not isinstance(args, list):
        raise ClusterError(f"{where}.args must be a list")
    return ExecPlugin(
        user=user,
        command=command,
        api_version=version,
        interactive_mode=mode,
        args=tuple(str(a) for a in args),
        env=tuple((v["name"], str(v.get("value", ""))) for v in env),
        install_hint=str(section.get("installHint") or "").strip(),
        cluster=cluster if section.get("provideClusterInfo") else None,
    )


def run(
    plugin: ExecPlugin, timeout: float, context: str, isatty: Callable[[], bool] | None = None
) -> Issued:
    """Run the plugin once, as client-go does; ``ClusterError`` (one line) when it fails.

    Without a terminal it runs with no stdin and a time bound; with one (``interactiveMode``
    ``Always``/``IfAvailable``) it gets the terminal and as long as the user needs.
    """
    name = plugin.command
    tty = (isatty or stdin_is_a_terminal)()
    if plugin.interactive_mode == "Always" and not tty:
        raise ClusterError(
            f"credential plugin {name} of user {plugin.user!r} needs a terminal to log in "
            "(interactiveMode: Always) and standard input is not one: run svcdoctor from a "
            "terminal, or log in first and set interactiveMode: IfAvailable"
        )
    interactive = tty and plugin.interactive_mode != "Never"
    spec: dict[str, Any] = {"interactive": interactive}
    if plugin.cluster is not None:
        spec["cluster"] = dict(plugin.cluster)
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec}
    env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}
    try:
        done = subprocess.run(
            [name, *plugin.args],
            env=env,
            stdin=None if interactive else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if interactive else subprocess.PIPE,  # a prompt reaches the user
            timeout=None if interactive else timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ClusterError(
            f"credential plugin {name} gave no credentials within {timeout:g} s (does it wait "
            f"for a login? log in first from a terminal, e.g. kubectl --context {context} "
            "version)"
        ) from None
    except OSError as exc:
        hint = f" ({plugin.install_hint})" if plugin.install_hint else ""
        raise ClusterError(f"credential plugin {name}: {exc.strerror}{hint}") from None
    if done.returncode != 0:
        said = (done.stderr or b"").decode(errors="replace").strip().splitlines()
        last = said[-1] if said else "no output"
        raise ClusterError(f"credential plugin {name} failed ({done.returncode}): {last}")
    return _issued(name, plugin.api_version, done.stdout)


def _issued(name: str, version: str, stdout: bytes) -> Issued:
    """The ``status`` of the ExecCredential a plugin printed, checked as client-go does."""
    bad = f"credential plugin {name} printed no ExecCredential"
    try:
        doc = json.loads(stdout)
    except ValueError:
        raise ClusterError(f"{bad} (not JSON)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("status"), dict):
        raise ClusterError(f"{bad} with a status (needs status.token or a client certificate)")
    if doc.get("apiVersion") not in (None, version):
        raise ClusterError(
            f"credential plugin {name} answered in {doc['apiVersion']}, configured for {version}"
        )
    status = doc["status"]
    token, cert, key = (str(status.get(k) or "") for k in ("token", "clientCertificateData",
                                                            "clientKeyData"))  # fmt: skip
    if not (token or cert or key):
        raise ClusterError(f"{bad} with status.token or status.clientCertificateData")
    if bool(cert) != bool(key):
        raise ClusterError(
            f"credential plugin {name} returned only one of clientCertificateData and clientKeyData"
        )
    expires = None
    if status.get("expirationTimestamp"):
        try:
            stamp = str(status["expirationTimestamp"]).replace("Z", "+00:00")
            expires = dt.datetime.fromisoformat(stamp)
        except ValueError:
            raise ClusterError(
                f"credential plugin {name}: status.expirationTimestamp "
                f"{status['expirationTimestamp']!r} is not an RFC 3339 time"
            ) from None
    return Issued(token, cert, key, expires)


def load_pair(ctx: ssl.SSLContext, cert_pem: str, key_pem: str, what: str) -> None:
    """Present this client certificate and key (PEM text) on new connections of ``ctx``.

    ``ssl`` reads keys only from files: they live in a private temporary folder for the
    duration of the call."""
    with tempfile.TemporaryDirectory(prefix="svcdoctor-cred-") as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_text(cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key_pem)
        try:
            ctx.load_cert_chain(cert, key)
        except (ssl.SSLError, ValueError) as exc:
            raise ClusterError(
                f"{what} is not a usable client certificate and key ({_ssl_reason(exc)})"
            ) from None


def _ssl_reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or exc).strip() or type(exc).__name__


class Withheld(httpx.Auth):
    """Plain ``http://``: no credentials are sent (as kubectl); a 401 or 403 says why."""

    def __init__(self, server: str, user: str) -> None:
        self.server, self.user = server, user

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        response = yield request
        if response.status_code in (401, 403):
            raise ClusterError(
                f"the API server at {self.server} answered {response.status_code} to a request "
                f"without credentials: like kubectl, svcdoctor sends the credentials of user "
                f"{self.user!r} only over https, never to an http:// server"
            )


class TokenAuth(httpx.Auth):
    """A static bearer token, or a token file read again when the server refuses it (a
    rotated service-account token, as client-go's cached token source re-reads it)."""

    def __init__(self, user: str, token: str = "", token_file: str = "") -> None:
        self.user, self.token_file = user, token_file
        self._bearer = f"Bearer {token}" if token else ""

    def _read(self) -> str:
        try:
            token = Path(self.token_file).read_text().strip()
        except OSError as exc:
            raise ClusterError(
                f"kubeconfig user {self.user!r}: cannot read tokenFile {self.token_file}: "
                f"{exc.strerror or exc}"
            ) from None
        return f"Bearer {token}"

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        if not self._bearer:
            self._bearer = self._read()
        request.headers["Authorization"] = self._bearer
        response = yield request
        if response.status_code == 401 and self.token_file:
            fresh = self._read()
            if fresh != self._bearer:
                self._bearer = fresh
                request.headers["Authorization"] = fresh
                yield request


class CredentialPlugin(httpx.Auth):
    """An exec credential plugin (gke-gcloud-auth-plugin, kubelogin, aws eks get-token,
    Pinniped, Teleport): run when first needed, again when what it gave expires or the
    server answers 401. A client certificate it returns goes to ``use_certificate`` (cert,
    key, what: for messages), which makes new connections present it.
    lightkube's own support waits forever, knows no ``v1``, no certificates and no
    terminal, and lets a plugin's bad output escape as a traceback."""

    MIN_TIMEOUT = 30.0  # a plugin may have to refresh a cloud token first

    def __init__(
        self,
        plugin: ExecPlugin,
        timeout: float,
        context: str,
        use_certificate: Callable[[str, str, str], None],
        isatty: Callable[[], bool] | None = None,
    ) -> None:
        self.plugin, self.context = plugin, context
        self.timeout = max(timeout, self.MIN_TIMEOUT)
        self.use_certificate, self.isatty = use_certificate, isatty or stdin_is_a_terminal
        self.issued: Issued | None = None

    def interactive(self) -> bool:
        """Whether the plugin will get the terminal (so: log in before anything else)."""
        return self.isatty() and self.plugin.interactive_mode != "Never"

    def refresh(self) -> Issued:
        """Run the plugin and use what it gave."""
        old = self.issued
        issued = run(self.plugin, self.timeout, self.context, self.isatty)
        pair = (issued.cert_pem, issued.key_pem)
        if issued.cert_pem and (old is None or (old.cert_pem, old.key_pem) != pair):
            # client-go closes every connection when the certificate rotates
            what = f"the client certificate of credential plugin {self.plugin.command}"
            self.use_certificate(issued.cert_pem, issued.key_pem, what)
        self.issued = issued
        return issued

    def _current(self) -> Issued:
        issued = self.issued
        if issued is None or (
            issued.expires is not None and dt.datetime.now(dt.UTC) >= issued.expires
        ):
            issued = self.refresh()
        return issued

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        issued = self._current()
        if issued.token:
            request.headers["Authorization"] = f"Bearer {issued.token}"
        response = yield request
        if response.status_code != 401:
            return
        response.read()  # done with it before a new certificate drops the connections
        issued = self.refresh()
        if issued.token:
            request.headers["Authorization"] = f"Bearer {issued.token}"
        yield request


def stdin_is_a_terminal() -> bool:
    """Whether stdin is a terminal a plugin may prompt on (client-go: ``term.IsTerminal``)."""
    try:
        return os.isatty(0)
    except OSError:
        return False
