"""The seam between svcdoctor and a live cluster: read-only access to raw API objects.

``ClusterReader`` is what scan and collect use; ``ApiReader`` (in ``api.py``) is the real
implementation. Objects are plain dicts exactly as the API returns them
(``apiVersion`` and ``kind`` filled in on list items), so that collect can write them as
``kubectl get -o json`` does and scan can read them with lint's loader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from svcdoctor.errors import SvcdoctorError

RBAC_FILE = "deploy/rbac/svcdoctor-read.yaml"


class ClusterError(SvcdoctorError):
    """A cluster problem the user must fix, as one line (the CLI exits 2 with it)."""


class Forbidden(ClusterError):
    """The credentials may not ``verb`` the ``resource`` (in ``namespace``)."""

    def __init__(self, verb: str, resource: str, namespace: str | None) -> None:
        where = f" in namespace {namespace}" if namespace else " cluster-wide"
        super().__init__(
            f"forbidden: cannot {verb} {resource}{where}; grant the read role in {RBAC_FILE}"
        )
        self.verb, self.resource, self.namespace = verb, resource, namespace


class Unreachable(ClusterError):
    """The API server did not answer (refused, cut, or past the deadline), after retries."""


class NotServed(ClusterError):
    """The server does not serve this resource (an older or trimmed API)."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED (BOOKMARKs are consumed by the reader)
    object: dict[str, Any]
    seen: float  # Unix time the event was received


@dataclass(frozen=True, slots=True)
class WatchGap:
    """A break in a watch: from ``start`` to ``end`` (Unix times) the changes of
    ``resource`` were not seen as they happened; ``relisted`` when the watch had to list
    again (410 Gone), so changes in between are lost, not only stamped late."""

    resource: str
    start: float
    end: float
    relisted: bool

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def text(self) -> str:
        gap = f"watch of {self.resource}: {self.seconds:.1f} s gap"
        if self.relisted:
            return f"{gap} (re-listed: the changes in it are lost)"
        return f"{gap} (resumed: the changes in it are stamped up to {self.seconds:.1f} s late)"


class ClusterReader(Protocol):
    """Read-only access to one cluster context.

    ``resource`` is a key of ``svcdoctor.cluster.resources.RESOURCES`` ("pods",
    "endpointslices", "events.events.k8s.io", ...). ``namespace=None`` means all namespaces
    for namespaced resources. Every call raises ``ClusterError`` (``Forbidden``,
    ``NotServed``) with a one-line message instead of a library exception.
    """

    context: str  # the kubeconfig context in use ("in-cluster" inside a pod)
    namespace: str  # the default namespace: -n, else the context's, else "default"

    def version(self) -> dict[str, str]:
        """``/version``: gitVersion, major, minor, platform."""
        ...

    def serves(self, resource: str) -> bool:
        """Whether the server serves this resource (discovery)."""
        ...

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every object, read in pages (``limit``/``continue``)."""
        ...

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """One object, or None when it does not exist."""
        ...

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
        until: float | None = None,
        on_gap: Callable[[WatchGap], None] | None = None,
    ) -> Iterator[WatchEvent]:
        """The current objects as ADDED, then every change until ``until`` (Unix time) or
        until the caller stops iterating; resumes from the last resourceVersion when the
        stream ends or is cut, re-lists after ``410 Gone``, and tells ``on_gap`` of each
        break that loses or delays changes. A watch that cannot be resumed raises."""
        ...

    def logs(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        since_seconds: int | None = None,
        limit_bytes: int | None = None,
    ) -> str:
        """``pods/log`` of one container."""
        ...
