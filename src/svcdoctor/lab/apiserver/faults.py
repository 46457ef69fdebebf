"""Faults the lab's API server injects on request (``lab serve --api-fault SPEC``): what a
real API server does under load or trouble, so that clients can be tested against it.

A spec is ``KIND[:VALUE]``:

========================  ===============================================================
``429:SHARE``             that share of requests (0 < SHARE ≤ 1) is refused as priority and
                          fairness refuses: ``429``, ``Retry-After: 1``, a plain-text body
``500:SHARE``             ``500 InternalError`` (a Status), as a failing handler answers
``503:SHARE``             ``503 ServiceUnavailable`` (a Status)
``504:SHARE``             ``504 Timeout`` (a Status), as the request-timeout filter answers
``slow-body:RATE``        whole responses (not watches or logs) trickle at RATE bytes/s
``cut-watch:SECONDS``     every watch is cut SECONDS after it started: the connection is
                          closed mid-stream, without the final chunk
``gone-watch[:KEPT]``     a watch from a resourceVersion more than KEPT (default 0) behind
                          the newest gets ``410 Gone`` (an ERROR event), as after compaction
``loss-after:SECONDS``    SECONDS after the server started (``ApiServer.arm_faults``: the
                          lab's announcement) it stops listening and drops every
                          connection (the server is gone)
========================  ===============================================================

The shares are deterministic, not random: each status fault counts the requests it sees and
answers requests 1, 1 + 1/SHARE, 1 + 2/SHARE … (``429:0.5``: the 1st, 3rd, 5th …), so a
test knows which request fails. The status faults are checked in the order given; the first
that fires answers. ``/healthz``, ``/livez`` and ``/readyz`` are never faulted (priority and
fairness exempts them: the ``probes`` FlowSchema). Connections are cut with an abort, as a
crashed server or a cut network path would.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from aiohttp import web

from svcdoctor.lab.apiserver.query import json_response
from svcdoctor.lab.apiserver.resources import dumps
from svcdoctor.lab.apiserver.status import StatusError

HEALTH_PATHS = ("/healthz", "/livez", "/readyz")
# kube-apiserver's maxinflight.go ``tooManyRequests`` (also called by priority-and-fairness.go):
# ``Retry-After: 1`` and http.Error's plain text; k8s.io/apiserver/pkg/server/filters
RETRY_AFTER = "1"
TOO_MANY = "Too many requests, please try again later.\n"
SLOW_TICK = 0.1  # seconds between the pieces of a slow body


class FaultKind(enum.StrEnum):
    TOO_MANY_REQUESTS = "429"
    INTERNAL_ERROR = "500"
    UNAVAILABLE = "503"
    TIMEOUT = "504"
    SLOW_BODY = "slow-body"
    CUT_WATCH = "cut-watch"
    GONE_WATCH = "gone-watch"
    LOSS_AFTER = "loss-after"

    @property
    def is_status(self) -> bool:
        return self in _STATUS


_STATUS = (
    FaultKind.TOO_MANY_REQUESTS,
    FaultKind.INTERNAL_ERROR,
    FaultKind.UNAVAILABLE,
    FaultKind.TIMEOUT,
)
_VALUE = {
    FaultKind.SLOW_BODY: "a rate in bytes per second, more than 0, such as slow-body:1",
    FaultKind.CUT_WATCH: "seconds, more than 0, such as cut-watch:2",
    FaultKind.GONE_WATCH: "a whole number of resourceVersions kept, such as gone-watch:0",
    FaultKind.LOSS_AFTER: "seconds, more than 0, such as loss-after:30",
}


class FaultError(ValueError):
    """A spec that is not one: its message is one line, naming the spec."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: its kind and value (a share, a rate, seconds or a count, by kind)."""

    kind: FaultKind
    value: float

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.value:g}"


def parse_fault(text: str) -> Fault:
    """``KIND[:VALUE]`` as the module docstring lists them; raises ``FaultError``."""
    name, colon, raw = text.strip().partition(":")
    try:
        kind = FaultKind(name.strip().lower())
    except ValueError:
        kinds = ", ".join(k.value for k in FaultKind)
        raise FaultError(f"{text!r}: unknown fault {name!r}; one of {kinds}") from None
    if not colon and kind is FaultKind.GONE_WATCH:
        return Fault(kind, 0.0)
    need = f"a share of requests in (0, 1], such as {kind}:0.3" if kind.is_status else _VALUE[kind]
    try:
        value = float(raw)
    except ValueError:
        raise FaultError(f"{text!r}: {kind} takes {need}") from None
    if kind.is_status:
        fits = 0 < value <= 1
    elif kind is FaultKind.GONE_WATCH:
        fits = value >= 0 and value == int(value)
    else:
        fits = 0 < value < math.inf
    if not fits or math.isnan(value):
        raise FaultError(f"{text!r}: {kind} takes {need}")
    return Fault(kind, value)


def unique(faults: Iterable[Fault]) -> tuple[Fault, ...]:
    """``faults``, refused when a kind is given twice."""
    kinds = [f.kind for f in faults]
    for kind in kinds:
        if kinds.count(kind) > 1:
            raise FaultError(f"{kind}: given twice; give each kind of fault once")
    return tuple(faults)


class _Share:
    """Fires on requests 1, 1 + 1/share, 1 + 2/share … of those it counts."""

    def __init__(self, share: float) -> None:
        self.share = Fraction(str(share))  # exact: 0.3 is 3/10
        self.seen = 0

    def fires(self) -> bool:
        self.seen += 1
        return math.ceil(self.seen * self.share) > math.ceil((self.seen - 1) * self.share)


def _refusal(kind: FaultKind) -> web.Response:
    """The response a status fault answers, as kube-apiserver words it."""
    if kind is FaultKind.TOO_MANY_REQUESTS:
        return web.Response(
            status=429,
            text=TOO_MANY,
            content_type="text/plain",
            headers={"Retry-After": RETRY_AFTER, "X-Content-Type-Options": "nosniff"},
        )
    # k8s.io/apimachinery pkg/api/errors: NewInternalError, NewServiceUnavailable, NewTimeoutError
    failure = {
        FaultKind.INTERNAL_ERROR: StatusError(
            500,
            "InternalError",
            "Internal error occurred: lab fault",
            {"causes": [{"message": "lab fault"}]},
        ),
        FaultKind.UNAVAILABLE: StatusError(
            503, "ServiceUnavailable", "the server is currently unable to handle the request"
        ),
        FaultKind.TIMEOUT: StatusError(
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - "
            "context deadline exceeded",
        ),
    }[kind]
    return json_response(dumps(failure.status), failure.code)


class Faults:
    """The faults of one server: which request to refuse, how to send a body, when to cut
    a watch and when the server is lost."""

    def __init__(self, faults: Sequence[Fault] = ()) -> None:
        self.faults = tuple(faults)
        self._shares = [(f.kind, _Share(f.value)) for f in self.faults if f.kind.is_status]
        by_kind = {f.kind: f.value for f in self.faults}
        self.slow_rate = by_kind.get(FaultKind.SLOW_BODY)
        self.cut_after = by_kind.get(FaultKind.CUT_WATCH)
        kept = by_kind.get(FaultKind.GONE_WATCH)
        self.history = None if kept is None else int(kept)
        self.loss_after = by_kind.get(FaultKind.LOSS_AFTER)

    def refusal(self, path: str) -> web.Response | None:
        """The status fault that fires on this request, if one does (every fault counts it)."""
        if path in HEALTH_PATHS:
            return None
        fired = [kind for kind, share in self._shares if share.fires()]
        return _refusal(fired[0]) if fired else None

    def oldest(self, newest: int) -> int | None:
        """The oldest resourceVersion a watch may resume from (``gone-watch``), or None."""
        return None if self.history is None else max(newest - self.history, 0)

    @contextlib.contextmanager
    def cutting(self, request: web.Request) -> Iterator[None]:
        """While a watch runs: cut its connection after ``cut_after`` seconds."""
        transport = request.transport
        if self.cut_after is None or transport is None:
            yield
            return
        timer = asyncio.get_running_loop().call_later(self.cut_after, transport.abort)
        try:
            yield
        finally:
            timer.cancel()

    async def send(self, request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
        """``response``, its body sent at ``slow_rate`` bytes per second when asked."""
        body = getattr(response, "body", None)
        if self.slow_rate is None or response.prepared or not isinstance(body, bytes):
            return response
        slow = web.StreamResponse(status=response.status, headers=response.headers)
        slow.headers.popall("Content-Length", None)
        slow.enable_chunked_encoding()
        step = max(1, int(self.slow_rate * SLOW_TICK))
        with contextlib.suppress(ConnectionError):  # the client gave up: normal
            await slow.prepare(request)
            for at in range(0, len(body), step):
                await slow.write(body[at : at + step])
                await asyncio.sleep(step / self.slow_rate)
        return slow
