"""Per-line signatures: what one failure line says on its own, for when statistics have no
power (a paste of 1 to 50 lines) and as evidence beside the tests when they do.

Each signature reads one typed row: the proxy's own words for a failure (the request
frame's ``detail``: Envoy response flags and response code details, nginx's error-log
phrase, the ALB phrase or error reason, GCP ``statusDetails``), a duration at a common
timeout, or a kernel record (``nf_conntrack: table full``, ``conntrack -S`` counters).
Each names the cause it points to (the first of ``causes`` leads; the others stay open),
what it means and what to collect next. A signature never makes a cause "likely": with
few lines (a paste: at most ``PASTE_ROWS`` request lines) it makes the causes its lines
point to most "possible", with the line quoted; with more lines it only adds them to the
cause's evidence, beside the statistical tests. In a paste, signatures with no cause
(``UPE``, ``DC``, ``NR``…) are said as notes: they are not one of the four causes
(``UPE``/``protocol_error`` is not connection reuse)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import polars as pl

from svcdoctor.diagnose.context import Context
from svcdoctor.model import Assessment, Cause, KernelEvent, iso_utc
from svcdoctor.model.diagnosis import LIKELY_AT, POSSIBLE_AT

RACE, BACKEND, REUSE, INFRA = Cause.RACE, Cause.BACKEND, Cause.REUSE, Cause.INFRA

# Sources of the texts below.
ENVOY_FLAGS = (  # response flags and their meaning
    "https://www.envoyproxy.io/docs/envoy/latest/configuration/observability/access_log/"
    "usage#command-operators"
)
ENVOY_DETAILS = (  # upstream_reset_before_response_started{…} and the other details
    "https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/"
    "response_code_details"
)
NGINX_UPSTREAM = (  # the error-log phrases are ngx_http_upstream.c's and the proxy module's
    "https://github.com/nginx/nginx/blob/master/src/http/ngx_http_upstream.c"
)
NGINX_KEEPALIVE = "https://nginx.org/en/docs/http/ngx_http_upstream_module.html#keepalive_timeout"
ERRNO = "https://man7.org/linux/man-pages/man3/errno.3.html"  # 104, 110, 111, 113
ALB_502 = "https://repost.aws/knowledge-center/elb-alb-troubleshoot-502-errors"
ALB_CODES = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/"
    "load-balancer-troubleshooting.html"
)
GCP_DETAILS = "https://cloud.google.com/load-balancing/docs/https/https-logging-monitoring"
GCP_KEEPALIVE = "https://cloud.google.com/load-balancing/docs/https#timeouts_and_retries"
CONNTRACK_SYSCTL = "https://www.kernel.org/doc/html/latest/networking/nf_conntrack-sysctl.html"
CONNTRACK_STATS = "https://manpages.debian.org/bookworm/conntrack/conntrack.8.en.html"
CONNTRACK_RACE = "https://github.com/kubernetes/kubernetes/issues/56903"  # insert_failed, SNAT

PASTE_ROWS = 50  # a paste: at most this many request lines (issue 29: "1 to 50 lines")
# ``conntrack -S`` since boot below this many failed inserts/drops is noise, no signature (the
# ``trap-insert1`` bundles of tests/realshapes.py: insert_failed=1 is no cause)
COUNTER_FLOOR = 10
ACCESS_LOG = (
    "the access log of the same time: the error log alone gives no failure rate, so no "
    "cause can be tested, only read from its lines"
)
QUOTE = 160  # characters of a quoted line


@dataclass(frozen=True, slots=True)
class Signature:
    """One line shape: ``pattern`` is searched in the row's detail (as the proxy wrote it);
    ``causes``: the cause it points to first, then the ones it leaves open (empty: not one
    of the four causes); ``weight``: how much one line counts (weak shapes: 0.5)."""

    name: str
    pattern: str
    causes: tuple[Cause, ...]
    means: str
    collect: str
    source: str
    weight: float = 1.0
    open: bool = False  # every cause leads alike: the rest of the evidence must decide

    def leads(self, cause: Cause) -> bool:
        first = bool(self.causes) and self.causes[0] is cause
        return first or (self.open and cause in self.causes)


_COLLECT_RACE = (
    "`kubectl get events -o json` and `kubectl get pods -o json` over the failures' time: "
    "were pods being deleted then (a rollout, a scale-down, a drain)?"
)
_COLLECT_REUSE = (
    "the backend's keep-alive idle timeout and the proxy's (nginx keepalive_timeout, "
    "Envoy idle_timeout, ALB/GCLB idle timeout), and the access log with the upstream "
    "connection (Envoy %UPSTREAM_LOCAL_ADDRESS%, nginx $upstream_connect_time: 0.000 on a "
    "reused one) around the failures"
)
_COLLECT_BACKEND = (
    "the access log with the upstream address of every request (to compare backends), and "
    "`kubectl get endpointslices -o json` with each pod's readiness"
)
_COLLECT_INFRA = (
    "`dmesg -T | grep conntrack` (or `journalctl -k`) from the node, and `date -u; "
    "conntrack -S` twice, before and after failures"
)

REFUSED = Signature(
    "connection refused",
    r"connect[_ ]error:[_ ]?111|\(111: Connection refused\)|Connection refused",
    (RACE, BACKEND),
    "nothing listened at the pod's address: a pod that had closed its port (shutting "
    "down) was still routed, or the app is not listening",
    _COLLECT_RACE,
    f"{ENVOY_DETAILS}; {NGINX_UPSTREAM}; {ERRNO}",
)
# An endpoint-removal race refuses a pod's connections for the time endpoint removal takes
# to propagate ("milliseconds … it can be seconds"; "errors clustered in the seconds after
# a delete are the race; errors evenly spread are a bad backend": ../shared/problem.md);
# the slowest hop svcdoctor knows lags 90 s (AGIC), but one pod refused for longer than
# 30 s with no deletion in the paste is not listening at all (crashed, wrong port).
RACE_SPAN_SECONDS = 30.0
REFUSED_PERSISTENT = replace(
    REFUSED,
    name="connection refused for long",
    causes=(BACKEND, RACE),
    means=(
        "one backend refused connections for longer than an endpoint-removal race lasts: "
        "the app is not listening on that port (crashed, wrong port, still starting)"
    ),
    collect=_COLLECT_BACKEND,
)

# Ordered: the first signature whose pattern matches a row's detail reads it (specific
# response code details before the bare flags they come with).
TABLE: tuple[Signature, ...] = (
    # --- Envoy response code details -----------------------------------------------------
    Signature(
        "envoy protocol_error",
        r"protocol_error|(^|,)UPE(,|;|$)",
        (),
        "the upstream answered in a protocol Envoy could not parse (HTTP/1 vs HTTP/2, port "
        "protocol selection, mTLS): a configuration error, not connection reuse",
        "the Service port's name/appProtocol and the app's protocol on that port",
        ENVOY_DETAILS,
    ),
    REFUSED,
    Signature(
        "no route to host",
        r"connect[_ ]error:[_ ]?113|\(113: No route to host\)|No route to host",
        (RACE, INFRA),
        "the address did not exist any more: a deleted pod's IP still routed (or kube-proxy "
        "rejecting a Service without endpoints)",
        _COLLECT_RACE,
        f"{NGINX_UPSTREAM}; {ERRNO}",
    ),
    Signature(
        "envoy reused connection closed",
        r"(?:connection_termination|remote_reset)\}; on a reused pooled connection",
        (REUSE,),
        "Envoy's debug log shows the stream sent on a connection taken from its pool "
        "(using existing connection) that the upstream then closed or reset before "
        "answering: a kept-alive connection the backend had closed (its idle timeout shorter "
        "than Envoy's), or one a pod closed at shutdown while it was still pooled",
        _COLLECT_REUSE,
        f"{ENVOY_DETAILS}; https://github.com/envoyproxy/envoy/issues/8639",
    ),
    Signature(
        "envoy connection_termination",
        r"connection_termination|(^|,)UC(,|;|$)",
        (REUSE, RACE),
        "the upstream closed a pooled connection before answering: a kept-alive connection "
        "the backend had already closed (idle timeout shorter than the proxy's, or a pod "
        "closing connections at shutdown)",
        _COLLECT_REUSE,
        f"{ENVOY_FLAGS}; {ENVOY_DETAILS}",
    ),
    Signature(
        "envoy remote_reset",
        r"\{remote_reset\}|(^|,)UR(,|;|$)",
        (REUSE, RACE),
        "the upstream reset an established connection before answering: a kept-alive "
        "connection closed by the backend, or a pod exiting",
        _COLLECT_REUSE,
        f"{ENVOY_FLAGS}; {ENVOY_DETAILS}",
    ),
    Signature(
        "envoy connection_timeout",
        r"connection_timeout|connect[_ ]error:[_ ]?110",
        (RACE, INFRA),
        "connecting to the upstream timed out: SYNs went unanswered, dropped on the node "
        "(conntrack/SNAT) or sent to the address of a pod that is gone: open between the two",
        f"{_COLLECT_INFRA}; and {_COLLECT_RACE}",
        ENVOY_DETAILS,
        open=True,
    ),
    Signature(
        "envoy overflow",
        r"\{overflow\}|(^|,)UO(,|;|$)",
        (BACKEND,),
        "Envoy's circuit breaker for the cluster was full: the backends are saturated",
        "the cluster's circuit-breaker stats (`upstream_rq_pending_overflow`) and the "
        "backends' latency",
        f"{ENVOY_FLAGS}; {ENVOY_DETAILS}",
    ),
    Signature(
        "envoy response cut",
        r"upstream_reset_after_response_started",
        (BACKEND, RACE),
        "the upstream broke off a response it had begun: the backend crashed or was killed "
        "mid-request",
        "the pods' restarts and exit codes (`kubectl get pods -o json`) and the events",
        ENVOY_DETAILS,
        0.5,
    ),
    Signature(
        "envoy local_reset",
        r"\{local_reset\}|(^|,)LR(,|;|$)",
        (RACE,),
        "Envoy reset the stream itself: often the sidecar shutting down (draining) before "
        "the app during pod termination",
        "the pod's shutdown order (the proxy's drain duration, holdApplicationUntilProxyStarts"
        ", EXIT_ON_ZERO_ACTIVE_CONNECTIONS) and the events of the time",
        ENVOY_FLAGS,
        0.5,
    ),
    Signature(
        "envoy connection_failure",
        r"connection_failure|(^|,)UF(,|;|$)",
        (RACE, INFRA),
        "Envoy could not connect to the upstream pod (refused, unreachable or timed out): a "
        "pod shutting down while still routed, or packets dropped on the node",
        _COLLECT_RACE,
        f"{ENVOY_FLAGS}; {ENVOY_DETAILS}",
    ),
    Signature(
        "envoy no healthy upstream",
        r"no_healthy_upstream|(^|,)UH(,|;|$)",
        (BACKEND,),
        "the cluster had no ready endpoint at that moment: every backend failed its "
        "readiness or health check (or a rollout left none ready)",
        "`kubectl get endpointslices -o json` and the pods' readiness over that time",
        f"{ENVOY_FLAGS}; {ENVOY_DETAILS}",
    ),
    Signature(
        "envoy response timeout",
        r"response_timeout|(^|,)UT(,|;|$)",
        (BACKEND,),
        "the upstream did not answer within the route's timeout: a slow or wedged backend",
        _COLLECT_BACKEND,
        f"{ENVOY_FLAGS}; {ENVOY_DETAILS}",
    ),
    Signature(
        "envoy dns failure",
        r"(^|,)DF(,|;|$)|dns_resolution_failure",
        (INFRA,),
        "the upstream's name did not resolve",
        "the DNS lookups from the proxy's node (CoreDNS logs, conntrack -S insert_failed)",
        ENVOY_FLAGS,
    ),
    Signature(
        "envoy overload",
        r"(^|,)OM(,|;|$)|overload_manager",
        (INFRA,),
        "Envoy's overload manager shed the request: the proxy itself ran out of resources",
        "the proxy's memory and CPU (its overload_manager stats)",
        ENVOY_FLAGS,
    ),
    Signature(
        "envoy retries exhausted",
        r"(^|,)URX(,|;|$)|retry_limit_exceeded",
        (BACKEND,),
        "every retry of the request failed: the flags beside it say how",
        _COLLECT_BACKEND,
        ENVOY_FLAGS,
        0.5,
    ),
    Signature(
        "envoy no route",
        r"(^|,)NR(,|;|$)|route_not_found|cluster_not_found",
        (),
        "no route or cluster matched the request: a proxy configuration error, not one of "
        "the four causes",
        "the proxy's routes (`istioctl proxy-config routes`) for the request's host",
        ENVOY_FLAGS,
    ),
    Signature(
        "client closed",
        r"(^|,)DC(,|;|$)|downstream_remote_disconnect|client closed the connection",
        (),
        "the client closed its connection before the answer: not a failure of the Service",
        "the client's own timeout and the request's duration",
        ENVOY_FLAGS,
    ),
    # --- nginx error-log phrases ---------------------------------------------------------
    Signature(
        "nginx upstream prematurely closed",
        r"upstream prematurely closed connection",
        (REUSE, RACE),
        "the upstream closed the connection before a response: a kept-alive connection the "
        "backend had closed (its idle timeout shorter than nginx's), or a pod exiting",
        _COLLECT_REUSE,
        f"{NGINX_UPSTREAM}; {NGINX_KEEPALIVE}",
    ),
    Signature(
        "nginx connection reset",
        r"\(104: Connection reset by peer\)",
        (REUSE, RACE),
        "the upstream reset the connection: nginx reused a kept-alive connection the "
        "backend had just closed, or a pod exited mid-request",
        _COLLECT_REUSE,
        f"{NGINX_UPSTREAM}; {ERRNO}",
    ),
    Signature(
        "nginx connect timed out",
        r"timed out.*while connecting to upstream",
        (RACE, INFRA),
        "the SYN to the upstream went unanswered: packets dropped on the node (conntrack "
        "table full, SNAT) or the address of a pod that is gone: open between the two",
        f"{_COLLECT_INFRA}; and {_COLLECT_RACE}",
        f"{NGINX_UPSTREAM}; {ERRNO}",
        open=True,
    ),
    Signature(
        "nginx upstream timed out",
        r"upstream timed out|\(110: ",
        (BACKEND,),
        "the upstream accepted the request and did not answer within nginx's timeout: a slow "
        "or wedged backend",
        _COLLECT_BACKEND,
        f"{NGINX_UPSTREAM}; {ERRNO}",
    ),
    Signature(
        "nginx no live upstreams",
        r"no live upstreams",
        (BACKEND,),
        "nginx had marked every server of the upstream failed (max_fails): the backends "
        "were all failing",
        _COLLECT_BACKEND,
        "https://nginx.org/en/docs/http/ngx_http_upstream_module.html#max_fails",
    ),
    # --- AWS ALB and Google Cloud load balancers -------------------------------------------
    Signature(
        "alb target closed",
        r"target closed the connection",
        (REUSE, RACE),
        "the target closed a kept-alive connection the ALB reused (its keep-alive shorter "
        "than the ALB's 60 s idle timeout), or it exited",
        _COLLECT_REUSE,
        ALB_502,
    ),
    Signature(
        "alb could not connect",
        r"could not connect to the target|not dispatched: the target refused",
        (RACE, REUSE),
        "ALB logs -1 -1 -1 502 for a connection the target refused or reset, and AWS "
        "documents the same shape for a target closing a kept-alive connection: open "
        "between a deregistering pod and a keep-alive mismatch",
        f"{_COLLECT_RACE}; and {_COLLECT_REUSE}",
        ALB_502,
        open=True,
    ),
    Signature(
        "alb no targets",
        r"no registered targets",
        (BACKEND,),
        "the target group had no healthy registered target",
        "the target group's health checks and `kubectl get endpointslices -o json`",
        ALB_CODES,
    ),
    Signature(
        "alb target timeout",
        r"did not respond before the timeout",
        (BACKEND,),
        "the target did not answer within the ALB's idle timeout: a slow or wedged backend",
        _COLLECT_BACKEND,
        ALB_CODES,
    ),
    Signature(
        "gclb backend closed",
        r"backend_connection_closed_before_data_sent_to_client",
        (REUSE, RACE),
        "the backend closed the connection before answering: Google documents this for a "
        "backend keep-alive timeout shorter than the load balancer's (600 s)",
        _COLLECT_REUSE,
        f"{GCP_DETAILS}; {GCP_KEEPALIVE}",
    ),
    Signature(
        "gclb failed to connect",
        r"failed_to_connect_to_backend",
        (RACE, INFRA),
        "the load balancer could not connect to the backend: a pod gone while still a "
        "network endpoint, or the path dropped the connection",
        _COLLECT_RACE,
        GCP_DETAILS,
    ),
    Signature(
        "gclb no backend",
        r"failed_to_pick_backend",
        (BACKEND,),
        "no healthy backend to pick: every backend failed its health check",
        "the backend service's health checks and the pods' readiness",
        GCP_DETAILS,
    ),
    Signature(
        "gclb backend timeout",
        r"backend_timeout",
        (BACKEND,),
        "the backend did not answer within the backend service timeout (30 s default)",
        _COLLECT_BACKEND,
        GCP_DETAILS,
    ),
    Signature(
        "gclb response cut",
        r"backend_connection_closed_after_partial_response_sent",
        (BACKEND, RACE),
        "the backend broke off a response it had begun: crashed or killed mid-request",
        "the pods' restarts and exit codes (`kubectl get pods -o json`) and the events",
        GCP_DETAILS,
        0.5,
    ),
)

# Durations at which common timeouts fire (seconds → whose). A failed request that lasted
# one of them (to within TIMER_SLACK) waited a timer out.
TIMEOUTS: dict[float, str] = {
    # ingress-nginx proxy-connect-timeout 5 s (kubernetes.github.io/ingress-nginx/user-guide/
    # nginx-configuration/configmap/); Envoy cluster connect_timeout 5 s
    # (envoyproxy.io/docs/envoy/latest/api-v3/config/cluster/v3/cluster.proto)
    5.0: "ingress-nginx proxy-connect-timeout / Envoy connect_timeout (5 s)",
    # Istio connectTimeout 10 s (istio.io/latest/docs/reference/config/networking/
    # destination-rule/#ConnectionPoolSettings-TCPSettings); ALB target connect 10 s (ALB_CODES)
    10.0: "Istio connectTimeout / ALB target connection (10 s)",
    # Envoy route timeout 15 s (envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/
    # route_components.proto, RouteAction.timeout)
    15.0: "Envoy route timeout (15 s)",
    # GCP backend service timeout 30 s (cloud.google.com/load-balancing/docs/backend-service)
    30.0: "GCP backend service timeout (30 s)",
    # nginx proxy_read_timeout/proxy_connect_timeout 60 s
    # (nginx.org/en/docs/http/ngx_http_proxy_module.html); ALB idle timeout 60 s (ALB_CODES)
    60.0: "nginx proxy_read_timeout / ALB idle timeout (60 s)",
    90.0: "a 90 s timeout",
    120.0: "a 120 s timeout",
    180.0: "a 180 s timeout",
    300.0: "a 300 s timeout",
    600.0: "a 600 s timeout",
}
TIMER_SLACK = 0.05  # seconds, plus 0.5 % of the timeout: a timer fires at or just after it

TIMEOUT_SIGNATURE = Signature(
    "request at a timeout",
    "",
    (BACKEND,),
    "the request lasted exactly a common timeout: the proxy gave up waiting for an answer",
    f"the timeouts on the path (proxy, load balancer, client) and the backend's latency; "
    f"{_COLLECT_BACKEND}",
    "https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_read_timeout",
    0.5,
)
CONNTRACK_FULL = Signature(
    "conntrack table full",
    "",
    (INFRA,),
    "the node's conntrack table was full and the kernel dropped new connections",
    "`sysctl net.netfilter.nf_conntrack_count net.netfilter.nf_conntrack_max` on that node, "
    "and the times of the failures to line the drops up with",
    CONNTRACK_SYSCTL,
)
CONNTRACK_COUNTERS = Signature(
    "conntrack insert_failed/drop",
    "",
    (INFRA,),
    "conntrack failed to insert (or dropped) connections: the SNAT/DNAT race or a full "
    "table on that node",
    "`date -u; conntrack -S` twice, before and after failures, to see whether the counters "
    "grow while requests fail",
    f"{CONNTRACK_STATS}; {CONNTRACK_RACE}",
    0.5,
)


@dataclass(frozen=True, slots=True)
class Match:
    """The lines one signature read: how many, and the first, quoted."""

    signature: Signature
    lines: int
    quote: str


@dataclass(frozen=True, slots=True)
class Reading:
    """What the signatures read in the evidence. ``decides``: whether they may make a cause
    possible (a paste: statistics have no power); otherwise they are evidence beside the
    tests."""

    matches: tuple[Match, ...]
    decides: bool
    error_log_only: bool = False  # a paste of an error log: no rate, no test

    def of(self, cause: Cause) -> list[Match]:
        return [m for m in self.matches if cause in m.signature.causes]

    def weights(self) -> dict[Cause, float]:
        """How much the lines point to each cause they lead to."""
        out: dict[Cause, float] = {}
        for m in self.matches:
            for c in m.signature.causes:
                if m.signature.leads(c):
                    out[c] = out.get(c, 0.0) + m.lines * m.signature.weight
        return out

    def notes(self) -> list[str]:
        """What the lines of no cause say in a paste (``UPE`` is not reuse, ``DC`` no
        failure)."""
        if not self.decides:
            return []
        return [
            f"{_lines(m)} read as {m.signature.name}: {m.signature.means} (e.g. «{m.quote}»)"
            for m in self.matches
            if not m.signature.causes
        ]


def timeout_at(seconds: float) -> float | None:
    """The common timeout a duration sits at (to within the timer's slack), else ``None``."""
    for t in TIMEOUTS:
        if t <= seconds <= t + TIMER_SLACK + 0.005 * t:
            return t
    return None


def _quote(row: dict[str, object]) -> str:
    ts = row.get("ts")
    parts = [
        iso_utc(ts) if isinstance(ts, float) else None,
        str(row["status"]) if row.get("status") is not None else None,
        str(row["detail"]) if row.get("detail") else str(row.get("outcome")),
        f"→ {row['backend']}" if row.get("backend") else None,
        f"{float(str(row['latency_ms'])) / 1000:.3f} s"
        if row.get("latency_ms") is not None
        else None,
    ]
    text = " ".join(p for p in parts if p)
    return text if len(text) <= QUOTE else text[: QUOTE - 1] + "…"


def _seconds(ms: object) -> str | None:
    return f"{float(ms) / 1000:.3f} s" if isinstance(ms, (int, float)) else None


def _request_matches(frame: pl.DataFrame) -> list[Match]:
    """Rows with the proxy's words (or a failure at a common timeout), read one shape each:
    grouped by their words first (a log of millions of rows holds a few dozen distinct
    details), each group read once, the first row of the first group quoted."""
    columns = ("ts", "status", "outcome", "backend", "latency_ms", "detail", "failed")
    wanted = pl.col("failed") | pl.col("detail").is_not_null()
    rows = frame.lazy().select(columns).filter(wanted).collect()
    if rows.height == 0:
        return []
    seconds = pl.col("latency_ms") / 1000
    at: pl.Expr = pl.lit(None, dtype=pl.Float64)
    for t in reversed(TIMEOUTS):  # the first timeout that fits wins
        fits = (seconds >= t) & (seconds <= t + TIMER_SLACK + 0.005 * t)
        at = pl.when(fits).then(pl.lit(t)).otherwise(at)
    groups = (
        rows.with_columns(
            pl.col("detail").cast(pl.Utf8).fill_null(""),
            pl.when(pl.col("failed")).then(at).alias("__at"),
        )
        .group_by("detail", "__at", maintain_order=True)
        .agg(
            pl.len().alias("__n"),
            pl.col("ts", "status", "outcome", "backend", "latency_ms").first(),
        )
    )
    found: dict[str, tuple[Signature, int, str]] = {}
    for row in groups.iter_rows(named=True):
        sig = _signature_of(row["detail"], row["__at"] is not None)
        if sig is None:
            continue
        seen = found.get(sig.name)
        if seen:
            found[sig.name] = (sig, seen[1] + row["__n"], seen[2])
            continue
        named = row
        if sig is TIMEOUT_SIGNATURE:
            named = {
                **row,
                "detail": f"{row['detail'] or row['outcome']} after {TIMEOUTS[row['__at']]}",
            }
        found[sig.name] = (sig, row["__n"], _quote(named))
    refused = found.get(REFUSED.name)
    if refused is not None and _refused_for(rows) > RACE_SPAN_SECONDS:
        found[REFUSED.name] = (REFUSED_PERSISTENT, *refused[1:])
    return [Match(sig, n, quote) for sig, n, quote in found.values()]


def _refused_for(rows: pl.DataFrame) -> float:
    """The longest time one backend kept refusing connections (first to last refusal)."""
    refused = rows.filter(
        pl.col("detail").cast(pl.Utf8).fill_null("").str.contains(REFUSED.pattern)
    )
    spans = refused.group_by("backend").agg((pl.col("ts").max() - pl.col("ts").min()).alias("s"))
    longest = spans.get_column("s").max() if spans.height else None
    return float(longest) if isinstance(longest, int | float) else 0.0


def _signature_of(detail: str, timed_out: bool) -> Signature | None:
    """The first signature of the table that reads ``detail``; a failure that lasted a
    common timeout is the timeout, whatever closed it (an upstream that closes a kept-alive
    connection fails the request at once, not after exactly 120.001 s)."""
    if detail:
        for sig in TABLE:
            if re.search(sig.pattern, detail):
                return TIMEOUT_SIGNATURE if timed_out and sig.causes[:1] == (REUSE,) else sig
    return TIMEOUT_SIGNATURE if timed_out else None


def _kernel_matches(kernel: tuple[KernelEvent, ...]) -> list[Match]:
    out: list[Match] = []
    full = [e for e in kernel if e.kind == "conntrack_full"]
    if full:
        first = full[0]
        where = f" on {first.node}" if first.node else ""
        when = f"{iso_utc(first.ts)} " if first.ts is not None and first.aligned else ""
        out.append(
            Match(
                CONNTRACK_FULL, len(full), f"{when}nf_conntrack: table full, dropping packet{where}"
            )
        )
    counts: dict[str, int] = {}
    for e in kernel:  # the last snapshot of each counter wins
        if e.kind in ("insert_failed", "drop"):
            counts[e.kind] = e.count
    if sum(counts.values()) >= COUNTER_FLOOR:
        text = " ".join(f"{k}={v}" for k, v in counts.items())
        out.append(Match(CONNTRACK_COUNTERS, 1, f"conntrack -S: {text}"))
    return out


def read(ctx: Context) -> Reading:
    """Every signature in the evidence, and whether they decide (see ``Reading``). Kernel
    records are read only in a paste: with request logs, ``infra`` lines them up itself."""
    paste = ctx.frame.height <= PASTE_ROWS
    kernel = _kernel_matches(ctx.evidence.kernel) if paste else []
    logged_only = paste and ctx.frame.height > 0 and ctx.attempt_ts.size == 0
    return Reading((*_request_matches(ctx.frame), *kernel), paste, logged_only)


def weigh(a: Assessment, reading: Reading) -> Assessment:
    """The assessment with the signatures of its cause: their lines as evidence, what to
    collect next, and, when the signatures decide, at least "possible" (never "likely":
    the score stays below ``LIKELY_AT``). A cause a signature only leaves open gets a line
    saying so, and no score."""
    mine = [m for m in reading.of(a.cause) if m.signature.leads(a.cause)]
    also = [m for m in reading.of(a.cause) if not m.signature.leads(a.cause)]
    if not mine and not also:
        return a
    evidence = [
        f"{_lines(m)} read as {m.signature.name}: {m.signature.means} (e.g. «{m.quote}»)"
        for m in mine
    ] + [
        f"{_lines(m)} read as {m.signature.name} ({m.signature.causes[0].value} first) "
        f"leave{'s' if m.lines == 1 else ''} this cause open"
        for m in also
    ]
    collect = [m.signature.collect for m in mine if m.signature.collect not in a.collect]
    score = a.score
    weights = reading.weights()
    own = weights.get(a.cause, 0.0)
    # in a paste, the causes its lines point to most (at least half the strongest's weight)
    if reading.decides and own and own >= 0.5 * max(weights.values()):
        total = sum(m.lines * m.signature.weight for m in reading.matches if m.signature.causes)
        floor = POSSIBLE_AT + 0.2 * (own / total) * min(1.0, own / 5)
        score = max(score, min(round(floor, 3), LIKELY_AT - 0.05))
        if reading.error_log_only:
            collect.append(ACCESS_LOG)
    return replace(
        a,
        score=score,
        evidence=(*a.evidence, *evidence),
        collect=(*a.collect, *dict.fromkeys(collect)),
    )


def _lines(m: Match) -> str:
    return f"{m.lines} line{'s' if m.lines != 1 else ''}"
