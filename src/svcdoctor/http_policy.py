"""The one request policy of the HTTP APIs svcdoctor reads: the Kubernetes API and Prometheus.

- **Retries, with stamina:** idempotent requests (reads, and the set-up of a watch or a
  followed log) are retried with jittered exponential backoff on 429, 5xx and broken
  connections, honouring ``Retry-After`` (what the API server's priority and fairness sends
  under load), bounded in attempts and in total time. A write is retried only where the
  server cannot have acted on it: a 429 (priority and fairness rejects a request before it
  runs) or a connection that was never made. A ``Retry-After`` longer than ``max_wait`` is
  not waited for: the answer goes back to the caller, which says so.
- **A deadline that covers the whole response**, body included: a server that sends its
  answer a byte at a time is cut off at the deadline, as kubectl's ``--request-timeout``
  does, rather than bounding only each read. Streams (watches, followed logs) have no
  overall deadline; their callers bound each read instead (an idle deadline).

Sources: client-go retries a request answered with ``Retry-After`` (429, or 5xx) up to 10
times (k8s.io/client-go/rest/request.go, ``checkWait``/``maxRetries``); the API server's
priority and fairness rejects with 429 and ``Retry-After`` before the request executes
(https://kubernetes.io/docs/concepts/cluster-administration/flow-control/).
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx2 as httpx
import stamina
import stamina.instrumentation

# stamina logs each retry as a WARNING through the standard library's logging, which an
# unconfigured CLI prints as bare lines; a retry that succeeds is not the user's business,
# and one that fails says how many attempts it took in its error
stamina.instrumentation.set_on_retry_hooks([])

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WIRE_BYTES = "svcdoctor.wire_bytes"  # response extension: the bytes as the server sent them
ATTEMPTS = "svcdoctor.attempts"  # response extension: how many requests it took


@dataclass(frozen=True, slots=True)
class Policy:
    """How hard to try: ``attempts`` and ``total_seconds`` bound the retries of one call;
    waits grow from ``first_wait`` to ``max_wait`` (plus jitter); a longer ``Retry-After``
    is not waited for. ``reconnect`` also retries a refused connection: for resuming a
    watch (a restarting API server), not for a first call (a wrong address fails fast)."""

    attempts: int = 6
    total_seconds: float = 60.0
    first_wait: float = 0.25
    max_wait: float = 10.0
    reconnect: bool = False


DEFAULT = Policy()


class DeadlineExceeded(httpx.TimeoutException):
    """The whole response did not arrive within the request's deadline."""


class _Retryable(Exception):
    """An answer worth asking again for (carried out of stamina's loop when it gives up)."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for (seconds or an HTTP date), if any."""
    text = response.headers.get("retry-after", "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(text).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def _backoff(idempotent: bool, policy: Policy) -> Callable[[BaseException], bool | float]:
    """stamina's backoff hook: whether to retry this failure, or how long to wait first."""

    def hook(exc: BaseException) -> bool | float:
        if isinstance(exc, _Retryable):
            asked = retry_after(exc.response)
            if asked is None:
                return True
            return asked if asked <= policy.max_wait else False
        if isinstance(exc, httpx.ConnectError):
            return policy.reconnect  # nothing was sent
        return idempotent and isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError)

    return hook


def send(
    client: httpx.Client,
    request: httpx.Request,
    *,
    deadline: float | None,
    stream: bool = False,
    policy: Policy = DEFAULT,
    idempotent: bool | None = None,
) -> httpx.Response:
    """Send ``request`` under the policy: the final answer (a 429 or 5xx too, once the
    retries are spent; ``ATTEMPTS`` in its extensions says how many it took). Without
    ``stream`` the body is read within ``deadline`` seconds of each attempt's start
    (``DeadlineExceeded`` otherwise); with ``stream`` the open response is returned.
    ``idempotent`` defaults to the method's (a POSTed query is idempotent too)."""
    if idempotent is None:
        idempotent = request.method in READ_METHODS
    attempts = 0
    try:
        for attempt in stamina.retry_context(
            on=_backoff(idempotent, policy),
            attempts=policy.attempts,
            timeout=policy.total_seconds,
            wait_initial=policy.first_wait,
            wait_max=policy.max_wait,
        ):
            with attempt:
                attempts += 1
                response = _once(client, request, deadline, stream)
                retryable = response.status_code in RETRIED_STATUSES
                if retryable and (idempotent or response.status_code == 429):
                    raise _Retryable(response)
                response.extensions[ATTEMPTS] = attempts
                return response
    except _Retryable as exc:
        exc.response.extensions[ATTEMPTS] = attempts
        return exc.response
    raise AssertionError("stamina ended without an answer")  # pragma: no cover


def _once(
    client: httpx.Client, request: httpx.Request, deadline: float | None, stream: bool
) -> httpx.Response:
    started = time.monotonic()
    response = client.send(request, stream=True)
    if stream and response.status_code < 400:
        return response
    try:
        raw = bytearray()
        for chunk in response.iter_raw():
            raw += chunk
            if deadline is not None and time.monotonic() - started > deadline:
                raise DeadlineExceeded(
                    f"the whole answer did not arrive within {deadline:g} s "
                    f"({len(raw)} bytes so far)",
                    request=request,
                )
    finally:
        response.close()
    # the body as sent (still compressed: the new response decodes it as httpx would)
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        content=bytes(raw),
        request=request,
        extensions={**response.extensions, WIRE_BYTES: len(raw)},
    )


def attempts_text(response: httpx.Response) -> str:
    """`` (after N attempts)`` when it took more than one, for an error's one line."""
    count = response.extensions.get(ATTEMPTS, 1)
    return f" (after {count} attempts)" if isinstance(count, int) and count > 1 else ""
