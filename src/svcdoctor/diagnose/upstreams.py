"""One proxy log, many Services: the upstreams in the request rows, and the evidence of one."""

from __future__ import annotations

import re
from dataclasses import replace

import polars as pl

from svcdoctor.errors import SvcdoctorError
from svcdoctor.model import Evidence


class UnknownService(SvcdoctorError, ValueError):
    """``--service`` names no upstream of the evidence."""


def names(requests: pl.DataFrame) -> list[str]:
    """The upstreams (Services) the request rows went to, busiest first."""
    if "upstream" not in requests.columns or requests.height == 0:
        return []
    counts = (
        requests.filter(pl.col("upstream").is_not_null() & (pl.col("role") != "error_log"))
        .group_by("upstream")
        .len()
        .sort(["len", "upstream"], descending=[True, False])
    )
    return [str(x) for x in counts.get_column("upstream").to_list()]


def _matches(upstream: str, namespace: str, name: str) -> bool:
    """ingress-nginx ``ns-name-port``, Envoy ``outbound|port||name.ns.svc.cluster.local``."""
    nginx = re.fullmatch(rf"{re.escape(namespace)}-{re.escape(name)}-[\w-]+", upstream)
    envoy = re.search(
        rf"\|{re.escape(name)}\.{re.escape(namespace)}(\.svc(\.[\w.-]+)?)?$", upstream
    )
    return bool(nginx or envoy)


def select(known: list[str], service: str) -> tuple[str, ...]:
    """The upstreams ``service`` names: an upstream as written in the log, or
    ``namespace/name`` (all of its ports)."""
    if service in known:
        return (service,)
    namespace, slash, name = service.partition("/")
    chosen = tuple(u for u in known if slash and _matches(u, namespace, name))
    if chosen:
        return chosen
    listed = ", ".join(known[:8]) + (", …" if len(known) > 8 else "")
    raise UnknownService(
        f"--service {service}: no such upstream in the evidence"
        + (f" (upstreams: {listed})" if known else " (its request rows name no upstream)")
    )


def restrict(evidence: Evidence, chosen: tuple[str, ...]) -> Evidence:
    """The evidence of the chosen upstreams: their request rows (and error-log rows of
    their backends), and the pods, events and endpoints of those backends when the pods
    can be told; lifecycle evidence that cannot be tied to a Service is kept."""
    rows = evidence.requests
    mine = pl.col("upstream").cast(pl.Utf8).is_in(list(chosen))
    backends = rows.filter(mine).get_column("backend").drop_nulls().unique()
    hosts = {str(b).rsplit(":", 1)[0].strip("[]") for b in backends.to_list()}
    orphan = pl.col("upstream").is_null() & pl.col("backend").cast(pl.Utf8).is_in(
        [str(b) for b in backends.to_list()]
    )
    requests = rows.filter(mine | orphan)
    pods = tuple(p for p in evidence.pods if p.ip in hosts)
    if not pods:
        return replace(evidence, requests=requests)
    known = {p.name for p in evidence.pods}
    kept = {p.name for p in pods}
    return replace(
        evidence,
        requests=requests,
        pods=pods,
        events=tuple(e for e in evidence.events if e.pod in kept or e.pod not in known),
        endpoints=tuple(c for c in evidence.endpoints if c.address in hosts or c.pod not in known),
    )


def of_service(evidence: Evidence, service: str | None) -> Evidence:
    """The evidence of one diagnosed Service when the request rows hold several (one proxy
    log), as ``diagnose`` restricted it; all of it otherwise."""
    known = names(evidence.requests)
    if service is None or len(known) < 2:
        return evidence
    return restrict(evidence, select(known, service))
