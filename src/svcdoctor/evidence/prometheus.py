"""A small Prometheus HTTP API client: PromQL pushed down to the server, aggregated series
back as :class:`~svcdoctor.model.series.Series`.

Works with anything that speaks the Prometheus query API (Prometheus, Thanos, Mimir,
VictoriaMetrics; a path prefix in the URL is kept). Range queries are split by time so no
request asks for more than :data:`MAX_POINTS` points per series (Prometheus refuses more
than 11,000), and a chunk the server still refuses as too large (resolution, samples,
timeout) is halved until it passes. Every failure is one line: :class:`PrometheusError`
and its subclasses (exit 2 on the command line).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self
from urllib.parse import urlsplit

import httpx2 as httpx
import numpy as np

from svcdoctor import http_policy
from svcdoctor.errors import SvcdoctorError
from svcdoctor.model.series import Series

MAX_POINTS = 11_000  # Prometheus: "exceeded maximum resolution of 11,000 points per timeseries"
DEFAULT_TIMEOUT = 60.0  # seconds, per request (connect: at most 10 s)

# what servers say when a query is too big for one request; a smaller time range helps
_TOO_LARGE = re.compile(
    r"exceeded maximum resolution|too many samples|maximum number of samples"
    r"|exceeded the limit|maxPointsPerTimeseries|maxSamplesPerQuery|maxSamplesPerSeries"
    r"|too many points|query timed out|context deadline exceeded",
    re.IGNORECASE,
)


class PromQL(Protocol):
    """A structured query that renders itself as PromQL text (``diagnose``'s ``Query``)."""

    @property
    def promql(self) -> str: ...


def _text(query: str | PromQL) -> str:
    return query if isinstance(query, str) else query.promql


class PrometheusError(SvcdoctorError):
    """A problem talking to the Prometheus API (one line)."""


class PrometheusURLError(PrometheusError):
    """The URL given is not an http(s) URL of a server."""


class PrometheusUnreachable(PrometheusError):
    """No connection, or no answer within the timeout."""


class PrometheusAuthError(PrometheusError):
    """The server (or a proxy before it) refused the credentials: 401 or 403."""


class PrometheusQueryError(PrometheusError):
    """The server answered an error (4xx/5xx) or something that is not its API."""

    def __init__(self, message: str, status: int = 0, error_type: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type

    @property
    def too_large(self) -> bool:
        """The server refused the query's size (points, samples, time): split and retry."""
        return self.status in (400, 422, 503) and bool(_TOO_LARGE.search(str(self)))


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def check_url(url: str) -> str:
    """The query API base URL, normalised; ``PrometheusURLError`` (one line) when it is not one."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise PrometheusURLError(
            f"bad Prometheus URL {url!r}: expected http(s)://HOST[:PORT][/PATH] "
            "(the server's query API base, e.g. http://prometheus:9090)"
        )
    try:
        _ = parts.port
    except ValueError:
        raise PrometheusURLError(f"bad Prometheus URL {url!r}: the port is not a number") from None
    return url.strip().rstrip("/") + "/"


def _ms(seconds: float, what: str) -> int:
    if not math.isfinite(seconds):
        raise PrometheusError(f"{what} must be a finite number of seconds, not {seconds!r}")
    return round(seconds * 1000)


def _seconds_text(ms: int) -> str:
    return f"{ms // 1000}.{ms % 1000:03d}" if ms >= 0 else f"{ms / 1000:.3f}"


def chunks(start_ms: int, end_ms: int, step_ms: int, max_points: int) -> Iterator[tuple[int, int]]:
    """Split the evaluation times ``start + k*step <= end`` into runs of at most
    ``max_points``: ``(first, last)`` times in ms, each on the original grid, so the runs
    together evaluate exactly the times one query would."""
    if step_ms <= 0 or max_points < 1:
        raise ValueError("step and max_points must be positive")
    points = (end_ms - start_ms) // step_ms + 1
    for first in range(0, points, max_points):
        last = min(points, first + max_points) - 1
        yield start_ms + first * step_ms, start_ms + last * step_ms


def _series(result: list[dict[str, Any]], kind: str) -> list[Series]:
    """The API's ``result`` (matrix or vector) as Series; ValueError if malformed."""
    out = []
    for item in result:
        labels = item.get("metric") or {}
        if kind == "matrix":
            pairs = item.get("values") or []
        else:
            pairs = [item["value"]] if "value" in item else []
        try:
            t = np.fromiter((p[0] for p in pairs), dtype=np.float64, count=len(pairs))
            v = np.array([p[1] for p in pairs], dtype=np.float64)
            out.append(Series(labels, t, v))
        except (TypeError, IndexError, KeyError, AttributeError) as exc:
            raise ValueError(str(exc)) from None
    return out


class PromClient:
    """A Prometheus query API at ``url``: ``headers`` go with every request (e.g.
    ``Authorization``), ``timeout`` bounds each request (the server is asked to stop at
    the same time). ``bytes_pulled`` (on the wire, compressed as the server sent them),
    ``bytes_decoded`` (the answers' JSON) and ``requests`` count what was transferred;
    ``warnings`` collects the server's warnings. Use as a context manager, or ``close()``.
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        max_points: int = MAX_POINTS,
    ) -> None:
        if not (math.isfinite(timeout) and timeout > 0):
            raise PrometheusError(f"timeout must be a positive number of seconds, not {timeout}")
        if not 1 <= max_points <= MAX_POINTS:
            raise PrometheusError(f"max_points must be from 1 to {MAX_POINTS}, not {max_points}")
        self.url = check_url(url)
        for name, value in (headers or {}).items():
            if not (name.isascii() and value.isascii()):
                raise PrometheusError(f"header {name!r}: HTTP headers must be ASCII text")
        self.timeout = timeout
        self.max_points = max_points
        self.bytes_pulled = 0
        self.bytes_decoded = 0
        self.requests = 0
        self.warnings: list[str] = []
        try:
            self._http = httpx.Client(
                base_url=self.url,
                headers=dict(headers or {}),
                timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
                follow_redirects=True,
            )
        except (httpx.InvalidURL, ValueError, TypeError) as exc:
            raise PrometheusURLError(
                f"bad Prometheus URL or header: {_one_line(str(exc))}"
            ) from None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    @property
    def where(self) -> str:
        return self.url.rstrip("/")

    # -- the API calls ------------------------------------------------------------------

    def query_range(
        self, query: str | PromQL, start: float, end: float, step: float
    ) -> list[Series]:
        """``query`` (PromQL, or a query that renders as PromQL) every ``step`` seconds from
        ``start`` to ``end`` (Unix seconds, ms precision), one series per label set, in
        label order. Split by time into requests of at most ``max_points`` points; a
        request refused as too large is halved."""
        promql = _text(query)
        start_ms, end_ms, step_ms = _ms(start, "start"), _ms(end, "end"), _ms(step, "step")
        if step_ms <= 0:
            raise PrometheusError(f"step must be at least 1 ms, not {step!r}")
        if end_ms < start_ms:
            raise PrometheusError(f"the range ends ({end!r}) before it starts ({start!r})")
        parts: dict[tuple[tuple[str, str], ...], list[Series]] = {}
        for first, last in chunks(start_ms, end_ms, step_ms, self.max_points):
            for piece in self._range_split(promql, first, last, step_ms):
                parts.setdefault(piece.key(), []).append(piece)
        out = []
        for key in sorted(parts):
            pieces = parts[key]
            if len(pieces) == 1:
                out.append(pieces[0])
            else:
                out.append(
                    Series(
                        pieces[0].labels,
                        np.concatenate([p.t for p in pieces]),
                        np.concatenate([p.v for p in pieces]),
                    )
                )
        return out

    def query(self, query: str | PromQL, at: float) -> list[Series]:
        """``query`` at one instant: one point per series (a scalar: one unlabelled)."""
        promql = _text(query)
        data = self._call(
            "api/v1/query",
            {"query": promql, "time": _seconds_text(_ms(at, "time"))},
            promql,
        )
        kind = data.get("resultType")
        result = data.get("result")
        if kind == "scalar" and isinstance(result, list):
            return self._parsed([{"metric": {}, "value": result}], "vector")
        if kind not in ("vector", "matrix") or not isinstance(result, list):
            raise self._not_api(f"a {kind} result")
        return self._parsed(result, str(kind))

    def series_names(self, start: float, end: float, match: Sequence[str] = ()) -> set[str]:
        """Metric names with samples from ``start`` to ``end`` (only of series matching a
        ``match`` selector, when given): the store's own index, no samples read."""
        return self._label_values("__name__", start, end, match)

    def label_names(self, start: float, end: float, match: Sequence[str] = ()) -> set[str]:
        """Label names of the series from ``start`` to ``end`` (matching ``match``)."""
        params: dict[str, Any] = {
            "start": _seconds_text(_ms(start, "start")),
            "end": _seconds_text(_ms(end, "end")),
        }
        if match:
            params["match[]"] = list(match)
        return self._strings(self._call("api/v1/labels", params, "label names"))

    # -- internals ----------------------------------------------------------------------

    def _label_values(self, label: str, start: float, end: float, match: Sequence[str]) -> set[str]:
        params: dict[str, Any] = {
            "start": _seconds_text(_ms(start, "start")),
            "end": _seconds_text(_ms(end, "end")),
        }
        if match:
            params["match[]"] = list(match)
        return self._strings(self._call(f"api/v1/label/{label}/values", params, "label values"))

    def _strings(self, data: Any) -> set[str]:
        if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
            raise self._not_api("a list of names that is not one")
        return set(data)

    def _range_split(self, promql: str, first: int, last: int, step_ms: int) -> list[Series]:
        try:
            data = self._call(
                "api/v1/query_range",
                {
                    "query": promql,
                    "start": _seconds_text(first),
                    "end": _seconds_text(last),
                    "step": _seconds_text(step_ms),
                },
                promql,
            )
        except PrometheusQueryError as exc:
            points = (last - first) // step_ms + 1
            if not exc.too_large or points < 2:
                raise
            middle = first + (points // 2) * step_ms  # the first time of the second half
            return [
                *self._range_split(promql, first, middle - step_ms, step_ms),
                *self._range_split(promql, middle, last, step_ms),
            ]
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise self._not_api(f"a {data.get('resultType')} result to a range query")
        return self._parsed(result, "matrix")

    def _parsed(self, result: list[Any], kind: str) -> list[Series]:
        try:
            return _series(result, kind)
        except ValueError as exc:
            raise self._not_api(f"malformed samples ({_one_line(str(exc), 80)})") from None

    def _not_api(self, what: str) -> PrometheusQueryError:
        return PrometheusQueryError(
            f"{self.where} answered {what}: is it a Prometheus query API?", 200
        )

    def _call(self, path: str, params: dict[str, Any], what: str) -> Any:
        # the server stops a little before the client gives up, so its own message arrives
        server_timeout = f"{self.timeout * 0.9:.3f}"
        form = {**params, "timeout": server_timeout} if "query" in params else params
        try:
            # label values are GET only; the rest by POST, so long PromQL fits
            request = (
                self._http.build_request("GET", path, params=form)
                if "/label/" in path
                else self._http.build_request("POST", path, data=form)
            )
            response = http_policy.send(self._http, request, deadline=self.timeout, idempotent=True)
        except httpx.TimeoutException:
            raise PrometheusUnreachable(
                f"Prometheus at {self.where} did not answer within {self.timeout:g} s"
                f" ({_one_line(what, 120)})"
            ) from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise PrometheusURLError(
                f"bad Prometheus URL {self.where!r}: {_one_line(str(exc))}"
            ) from None
        except (httpx.TransportError, httpx.TooManyRedirects) as exc:
            reason = _one_line(str(exc)) or type(exc).__name__
            raise PrometheusUnreachable(
                f"cannot reach Prometheus at {self.where}: {reason}"
            ) from None
        self.requests += 1
        self.bytes_pulled += int(response.extensions.get(http_policy.WIRE_BYTES, 0))
        self.bytes_decoded += len(response.content)
        status = response.status_code
        body = self._json(response)
        if status in (401, 403):
            text = _one_line(response.text, 200)
            raise PrometheusAuthError(
                f"Prometheus at {self.where} refused the credentials ({status} "
                f"{response.reason_phrase}{': ' + text if text else ''}); give them with "
                "--header 'Authorization: Bearer TOKEN'"
            )
        if status >= 400 or (isinstance(body, dict) and body.get("status") == "error"):
            if isinstance(body, dict) and "error" in body:
                text = str(body.get("error"))
                kind = str(body.get("errorType", ""))
            else:
                text, kind = response.text, ""
            raise PrometheusQueryError(
                f"Prometheus at {self.where} answered {status}"
                f"{' (' + kind + ')' if kind else ''} to {_one_line(what, 160)}: "
                f"{_one_line(text) or response.reason_phrase}"
                f"{http_policy.attempts_text(response)}",
                status,
                kind,
            )
        if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
            raise self._not_api(f"{status} with {_one_line(response.text, 80)!r}")
        warnings = body.get("warnings")
        if isinstance(warnings, list):
            self.warnings.extend(str(w) for w in warnings if str(w) not in self.warnings)
        return body["data"]

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        try:
            return json.loads(response.content)
        except (ValueError, UnicodeDecodeError):
            return None


__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_POINTS",
    "PromClient",
    "PromQL",
    "PrometheusAuthError",
    "PrometheusError",
    "PrometheusQueryError",
    "PrometheusURLError",
    "PrometheusUnreachable",
    "chunks",
]
