"""What the lab API serves (``SERVED``, ``WRITABLE``), what a resource URL names, and the
encodings every part shares (compact JSON, RFC 3339 times)."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from svcdoctor.cluster.resources import RESOURCES, Resource

SERVED: dict[str, Resource] = {**RESOURCES, "jobs": Resource("jobs", "Job", "batch", "v1")}
"""What the lab API serves: what svcdoctor reads, and the Jobs it runs its agent in."""


EVICTION = "pods/eviction"  # the subresource an admission handler is installed on

WRITABLE: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        ("configmaps", "pods", "jobs"),
        frozenset({"create", "delete", "deletecollection", "patch"}),
    ),
    **dict.fromkeys(("deployments", "statefulsets", "nodes"), frozenset({"patch"})),
    EVICTION: frozenset({"create"}),
}
"""The write verbs each resource takes (and the pods' eviction subresource: kubectl drain's
policy/v1 Eviction); the others are read-only."""

Key = tuple[str, str]  # (namespace, or "" for cluster-scoped objects; name)
BY_KIND = {(r.api_version, r.kind): key for key, r in SERVED.items()}


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource URL names."""

    resource: str  # a RESOURCES key
    namespace: str | None
    name: str | None
    subresource: str | None  # "log" for pods/log, "eviction" for pods/eviction


def object_key(resource: str, namespace: str | None, name: str) -> Key:
    return ((namespace or "") if SERVED[resource].namespaced else "", name)


def resource_of(api_version: str, kind: str) -> str:
    try:
        return BY_KIND[(api_version, kind)]
    except KeyError:
        raise ValueError(f"the lab API does not serve {api_version} {kind}") from None


def qualified(r: Resource) -> str:
    return f"{r.plural}.{r.group}" if r.group else r.plural


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)")


def parse_time(text: str) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (nanoseconds allowed), or None."""
    m = _TIME.fullmatch(text)
    if m is None:
        return None
    zone = "+00:00" if m[3] == "Z" else m[3]
    return dt.datetime.fromisoformat(m[1] + zone).timestamp() + float(m[2] or 0)
