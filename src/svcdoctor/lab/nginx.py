"""The lab's ingress: Debian's real ``nginx`` in front of the Service, configured as
ingress-nginx configures it, so that what ``diagnose`` reads is what a real proxy wrote.

* It runs in a network namespace of its own on the fabric (kernel datapath), or on the
  host's loopback (userspace datapath), from a working directory of the run (its config,
  pid file, temporary files and logs): ``nginx -p DIR -c DIR/nginx.conf -g 'daemon off;'``.
  As root its workers run as ``nobody``; it dies with the lab (``PDEATHSIG``), with its
  namespace, or by ``lab clean`` (its working directory names the run, see ``cleanup``).
* Its upstreams are the pods the EndpointSlices route to (ready and not terminating); a
  change is applied ``sync_delay`` seconds later (changes meanwhile join it, as the
  controller's sync queue does) by rewriting the config and ``SIGHUP``
  (``nginx -s reload``): new workers take new requests, the old ones finish theirs.
* Upstream keep-alive (``keepalive``, ``proxy_http_version 1.1``, ``proxy_set_header
  Connection ""``) and ``proxy_next_upstream`` as the :class:`IngressSpec` says.
* Logs: the access log in ingress-nginx's ``upstreaminfo`` format and in nginx's default
  ``combined`` format (the same requests), and the error log (level ``notice``).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from svcdoctor.lab.datapath import Backend, Datapath, LabError
from svcdoctor.lab.front import (
    FrontedDatapath,
    binary,
    last_complaint,
    missing,
    read_lines,
    spawn,
    stop,
    until_listening,
)
from svcdoctor.lab.kernel import SUBNET
from svcdoctor.lab.names import UPSTREAM

LISTEN_IP = f"{SUBNET}.255.200"  # the ingress's namespace on the fabric (nodes: .255.10+)
LISTEN_PORT = 80
ACCESS_LOG = "access.log"  # upstreaminfo: what the controller's container writes
COMBINED_LOG = "access-combined.log"
ERROR_LOG = "error.log"

# ingress-nginx's default access-log format, copied from
# https://kubernetes.github.io/ingress-nginx/user-guide/nginx-configuration/log-format/
UPSTREAMINFO = (
    "'$remote_addr - $remote_user [$time_local] \"$request\" '\n"
    '    \'$status $body_bytes_sent "$http_referer" "$http_user_agent" \'\n'
    "    '$request_length $request_time [$proxy_upstream_name] "
    "[$proxy_alternative_upstream_name] $upstream_addr '\n"
    "    '$upstream_response_length $upstream_response_time $upstream_status $req_id'"
)


class NginxUnavailable(LabError):
    """The scenario's ingress cannot run here (no nginx): a usage problem (exit 2)."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class IngressSpec:
    """The ingress's settings. Defaults are ingress-nginx's ConfigMap defaults
    (https://kubernetes.github.io/ingress-nginx/user-guide/nginx-configuration/configmap/):
    upstream-keepalive-connections 320, upstream-keepalive-timeout 60, upstream-keepalive-
    requests 10000, proxy-next-upstream "error timeout", proxy-next-upstream-tries 3,
    proxy-connect-timeout 5, proxy-read-timeout 60, error-log-level notice. ``sync_delay``
    is the lab's: seconds from an EndpointSlice change to the reload."""

    sync_delay: float = 1.0
    keepalive: int = 320
    keepalive_timeout: float = 60.0
    keepalive_requests: int = 10000
    next_upstream: str = "error timeout"  # "off": no retry (a POST is never retried either)
    next_upstream_tries: int = 3
    connect_timeout: float = 5.0
    read_timeout: float = 60.0

    def __post_init__(self) -> None:
        words = self.next_upstream.split()
        allowed = {"error", "timeout", "invalid_header", "http_500", "http_502", "http_503"}
        allowed |= {"http_504", "http_403", "http_404", "http_429", "non_idempotent", "off"}
        if not words or not set(words) <= allowed or ("off" in words and len(words) > 1):
            raise ValueError(f"next_upstream {self.next_upstream!r}: nginx's proxy_next_upstream")
        if self.sync_delay < 0 or self.keepalive < 0 or self.keepalive_timeout <= 0:
            raise ValueError("sync_delay and keepalive >= 0, keepalive_timeout > 0")


def available() -> str | None:
    """``None`` when nginx can run here, else why not."""
    return missing("nginx", "the nginx ingress")


def config(
    spec: IngressSpec,
    backends: Sequence[Backend],
    listen: tuple[str, int],
    folder: Path,
    user: str | None = None,
) -> str:
    """nginx.conf for the ingress routing to ``backends`` (none: 503, as ingress-nginx
    answers for a Service without endpoints)."""
    servers = "".join(f"        server {b.host}:{b.port} max_fails=0;\n" for b in backends)
    if backends:
        route = (
            f"            proxy_pass http://{UPSTREAM};\n"
            "            proxy_http_version 1.1;\n"
            '            proxy_set_header Connection "";\n'
            f"            proxy_next_upstream {spec.next_upstream};\n"
            f"            proxy_next_upstream_tries {spec.next_upstream_tries};\n"
            f"            proxy_connect_timeout {spec.connect_timeout:g}s;\n"
            f"            proxy_read_timeout {spec.read_timeout:g}s;\n"
        )
        upstream = (
            f"    upstream {UPSTREAM} {{\n{servers}"
            f"        keepalive {spec.keepalive};\n"
            f"        keepalive_timeout {spec.keepalive_timeout:g}s;\n"
            f"        keepalive_requests {spec.keepalive_requests};\n"
            "    }\n"
        )
    else:
        route, upstream = "            return 503;\n", ""
    temp = "".join(
        f"    {kind}_temp_path {folder / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        "# svcdoctor lab: the ingress (ingress-nginx's data plane, by hand)\n"
        + (f"user {user};\n" if user else "")
        + "worker_processes 1;\n"
        f"pid {folder / 'nginx.pid'};\n"
        f"error_log {folder / ERROR_LOG} notice;\n"
        "events {\n    worker_connections 4096;\n}\n"
        "http {\n"
        # ingress-nginx's request id (rootfs/etc/nginx/template/nginx.tmpl)
        '    map $http_x_request_id $req_id {\n        default $http_x_request_id;\n        ""'
        " $request_id;\n    }\n"
        f"    log_format upstreaminfo {UPSTREAMINFO};\n"
        f"    access_log {folder / ACCESS_LOG} upstreaminfo;\n"
        f"    access_log {folder / COMBINED_LOG} combined;\n"
        f"{temp}{upstream}"
        "    server {\n"
        f"        listen {listen[0]}:{listen[1]} backlog=4096;\n"
        "        location / {\n"
        # ingress-nginx names the upstream <namespace>-<service>-<port> in each location
        f'            set $proxy_upstream_name "{UPSTREAM}";\n'
        '            set $proxy_alternative_upstream_name "";\n'
        f"{route}"
        "        }\n    }\n}\n"
    )


@dataclass
class Nginx:
    """One nginx master process serving the ingress from ``folder``."""

    spec: IngressSpec
    folder: Path
    listen: tuple[str, int]
    netns: str | None = None
    process: subprocess.Popen[bytes] | None = None
    reloads: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _want: list[Backend] = field(default_factory=list)
    _applied: tuple[Backend, ...] = ()
    _timer: asyncio.TimerHandle | None = None

    def _write(self, backends: Sequence[Backend]) -> None:
        user = "nobody nogroup" if os.geteuid() == 0 else None
        path = self.folder / "nginx.conf"
        path.with_suffix(".tmp").write_text(
            config(self.spec, backends, self.listen, self.folder, user)
        )
        path.with_suffix(".tmp").replace(path)
        self._applied = tuple(backends)

    async def start(self, probe: socket.socket) -> None:
        """Start nginx (no upstream yet) and wait until it accepts on ``listen``; ``probe``:
        an unconnected socket from where the clients are. Call it from the event loop's
        thread (the parent-death signal is the calling thread's)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o755)  # the workers (nobody) reach their temporary files
        self._write([])
        command = [binary("nginx"), "-p", f"{self.folder}/", "-c", str(self.folder / "nginx.conf")]
        command += ["-g", "daemon off;"]
        self.process = spawn(command, self.folder, self.netns, None, "nginx.stderr")
        await until_listening(self.process, probe, self.listen, "nginx", self._why)

    def _why(self) -> str:
        for name in ("nginx.stderr", ERROR_LOG):
            found = last_complaint(self.folder / name, ("[emerg]", "[alert]"))
            if found:
                return found
        return f"exit {self.process.returncode if self.process else '?'}"

    def watch(self, backends: Sequence[Backend]) -> None:
        """The EndpointSlices changed (or not): apply ``backends`` after the sync delay."""
        want = sorted(backends, key=lambda b: (b.pod, b.host, b.port))
        if want == self._want:
            return
        self._want = want
        if self._timer is None and self.process is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.spec.sync_delay, self._sync)

    def _sync(self) -> None:
        self._timer = None
        if self.process is None or self.process.poll() is not None:
            self.errors.append(f"nginx exited before a reload: {self._why()}")
            return
        self._write(self._want)
        self.process.send_signal(signal.SIGHUP)  # nginx -s reload
        self.reloads.append((time.time(), tuple(b.pod for b in self._want)))

    @property
    def settled(self) -> bool:
        """Whether nginx routes to what the slices last said."""
        return self._timer is None and list(self._applied) == self._want

    async def stop(self) -> None:
        """SIGTERM (nginx's fast shutdown), SIGKILL to its process group after a while."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await stop(self.process)


@dataclass
class IngressDatapath(FrontedDatapath):
    """A datapath whose clients reach the Service through the nginx ingress: everything
    else (pods, kube-proxy's rules, probes) is the inner datapath's."""

    inner: Datapath
    spec: IngressSpec
    folder: Path  # nginx's working directory (its logs are read from there)
    nginx: Nginx | None = None
    settle_seconds = 30.0
    unsettled = "nginx did not apply the endpoints"
    reload_pause = 0.2  # the reload: new workers take over

    def unavailable(self) -> LabError | None:
        reason = available()
        return NginxUnavailable(reason) if reason else None

    async def start_hop(self) -> None:
        listen, netns = await self.listen_address("ing", LISTEN_IP, LISTEN_PORT)
        self.nginx = Nginx(self.spec, self.folder, listen, netns, errors=self.errors)
        await self.nginx.start(self.inner.client_socket(0))

    @property
    def hop(self) -> Nginx | None:
        return self.nginx

    def service_address(self, node: int) -> tuple[str, int]:
        assert self.nginx is not None
        return self.nginx.listen

    def backend_of(self, node: int, local_port: int, at: float | None = None) -> str | None:
        return None  # the clients' connections end at nginx: its logs name the backends

    async def stop_hop(self) -> None:
        """Stop nginx (its logs stay in ``folder``); the pods and nodes run on."""
        if self.nginx is not None:
            await self.nginx.stop()

    def logs(self) -> dict[str, Path]:
        """nginx's log files by name (those it wrote)."""
        names = (ACCESS_LOG, COMBINED_LOG, ERROR_LOG)
        return {n: self.folder / n for n in names if (self.folder / n).is_file()}


# nginx's words for a failed upstream attempt in its error log (ngx_http_upstream.c)
_ERROR = re.compile(
    r"\[(?:error|crit)\] \d+#\d+: \*\d+ (upstream prematurely closed connection|upstream "
    r"timed out|no live upstreams|\w+\(\) failed \(\d+: [^)]*\))"
)
_STATUS = re.compile(r'^\S+ - \S+ \[[^\]]+\] "[^"]*" (\d{3}) ')


@dataclass(frozen=True, slots=True)
class IngressFacts:
    """What nginx did in a run, from its own logs: the lab's ground truth for the hop."""

    spec: IngressSpec
    reloads: tuple[tuple[float, tuple[str, ...]], ...]
    requests: int  # access-log lines
    statuses: dict[str, int]  # the status nginx answered with → requests
    errors: dict[str, int]  # error-log phrase → lines (one per failed upstream attempt)
    clients_failed: int
    problems: tuple[str, ...]  # what says the hop did not work as planned

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": asdict(self.spec),
            "reloads": [{"at": round(t, 3), "upstreams": list(p)} for t, p in self.reloads],
            "requests": self.requests,
            "statuses": self.statuses,
            "upstream_errors": self.errors,
            "clients_failed": self.clients_failed,
        }


def ingress_facts(
    spec: IngressSpec,
    folder: Path,
    reloads: Sequence[tuple[float, tuple[str, ...]]],
    clients_failed: int,
) -> IngressFacts:
    """nginx's logs in ``folder`` read back: every request the clients saw fail must be
    a 5xx nginx logged (else the failure was not the hop's), and nginx must have routed to
    the pods (a reload) and logged requests."""
    access = read_lines(folder / ACCESS_LOG)
    statuses = Counter(m.group(1) for ln in access if (m := _STATUS.match(ln)))
    logged = read_lines(folder / ERROR_LOG)
    errors = Counter(m.group(1) for ln in logged if (m := _ERROR.search(ln)))
    problems = []
    if not reloads:
        problems.append("nginx never routed to the pods (no reload)")
    if not access:
        problems.append("nginx logged no request")
    failed = sum(n for status, n in statuses.items() if int(status) >= 500)
    if access and failed != clients_failed:
        problems.append(f"the clients saw {clients_failed} failures, nginx logged {failed} 5xx")
    return IngressFacts(
        spec,
        tuple(reloads),
        len(access),
        dict(sorted(statuses.items())),
        dict(errors.most_common()),
        clients_failed,
        tuple(problems),
    )
