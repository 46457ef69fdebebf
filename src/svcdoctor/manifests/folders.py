"""Where a namespace-less object that no kustomization builds lands: the namespace of the
folder's objects it goes with.

``kubectl apply -n NS -f DIR`` puts a folder's namespace-less objects in ``NS``, and kubectl
refuses an object that names another namespace, so a namespace-less Service beside a
Deployment in ``tutorial`` is meant for ``tutorial`` (redhat-developer-demos/istio-tutorial
keycloak/). A namespace-less Service joins the one namespace of the folder's workloads it
selects, a namespace-less workload that of the folder's Services selecting it, and an
autoscaler or a selector-bearing resource (a PodDisruptionBudget) the namespace its
workload joined. Nothing moves when it meets a namespace-less partner in its folder, above
or below it (it may meet that one where it is; a partner in a sibling folder is another
environment's copy: correspondence_tool_staff's config/kubernetes/development/ beside
production/, judge473), when the folder names two namespaces for it, or when the folder
holds a named twin of it (the same kind and name: an alternative file, argo-cd's
guestbook-with-namespace/).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from svcdoctor.model import Autoscaler, Resource, Service, Workload, selector_matches

Placed = Workload | Service | Resource | Autoscaler
Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Folders:
    """The run's objects that folder placement reads: ``named`` the Services and workloads
    that name a namespace, by folder; the namespace-less ones indexed for their partners
    (workloads by pod label, Services by selector pair) and workloads by folder."""

    named: dict[str, list[Workload | Service]] = field(default_factory=dict)
    loose_pods: dict[Pair, list[tuple[Workload, str]]] = field(default_factory=dict)
    loose_selectors: dict[Pair, list[tuple[Service, str]]] = field(default_factory=dict)
    loose_in: dict[str, list[Workload]] = field(default_factory=dict)


def gather(objects: Iterable[tuple[Placed, str]]) -> Folders:
    """The folders of ``objects`` (each with its normalised path) that no kustomization
    builds."""
    folders = Folders()
    for o, path in objects:
        if not isinstance(o, Workload | Service):
            continue
        home = posixpath.dirname(path)
        if o.ref.namespace:
            folders.named.setdefault(home, []).append(o)
        elif isinstance(o, Workload):
            folders.loose_in.setdefault(home, []).append(o)
            for pair in o.template.labels.items():
                folders.loose_pods.setdefault(pair, []).append((o, home))
        else:
            for pair in (o.selector or {}).items():
                folders.loose_selectors.setdefault(pair, []).append((o, home))
    return folders


def folder_namespace(folders: Folders, o: Placed, path: str) -> str:
    """The namespace the namespace-less ``o`` joins ("" for none: it stays where it is)."""
    if o.ref.namespace:
        return ""
    home = posixpath.dirname(path)
    if home not in folders.named:
        return ""
    if isinstance(o, Workload | Service):
        return _partners(folders, o, home)
    loose = folders.loose_in.get(home, [])
    if isinstance(o, Autoscaler):
        goes = [w for w in loose if (w.ref.kind, w.ref.name) == (o.target.kind, o.target.name)]
    elif o.selector:
        goes = [w for w in loose if selector_matches(o.selector, w.template.labels)]
    else:
        return ""
    joined = {_partners(folders, w, home) for w in goes}
    return joined.pop() if len(joined) == 1 else ""


def _partners(folders: Folders, o: Workload | Service, home: str) -> str:
    """The one namespace of the folder's named objects ``o`` meets (a Service selecting a
    workload's pods), unless it has a named twin there or a namespace-less partner."""
    named = folders.named.get(home, [])
    if any((n.ref.kind, n.ref.name) == (o.ref.kind, o.ref.name) for n in named):
        return ""
    if _loose_partner(folders, o, home):
        return ""
    found = {n.ref.namespace for n in named if _meet(o, n)}
    return found.pop() if len(found) == 1 else ""


def _loose_partner(folders: Folders, o: Workload | Service, home: str) -> bool:
    """Whether a namespace-less object in ``home``, above or below it meets ``o`` (looked up
    by label pair)."""
    if isinstance(o, Service):
        selector = o.selector or {}
        first = next(iter(selector.items()), None)
        pods = folders.loose_pods.get(first, []) if first else []
        return any(
            _in_line(home, there) and selector_matches(selector, w.template.labels)
            for w, there in pods
        )
    labels = o.template.labels
    return any(
        _in_line(home, there) and s.selector and selector_matches(s.selector, labels)
        for pair in labels.items()
        for s, there in folders.loose_selectors.get(pair, [])
    )


def _in_line(a: str, b: str) -> bool:
    """Whether folder ``a`` is ``b``, or one is inside the other."""
    return a == b or a.startswith(f"{b}/") or b.startswith(f"{a}/") or not a or not b


def _meet(a: Workload | Service, b: Workload | Service) -> bool:
    """Whether one of the two is a Service selecting the other's pods."""
    if isinstance(a, Service) and isinstance(b, Workload):
        return bool(a.selector) and selector_matches(a.selector or {}, b.template.labels)
    if isinstance(a, Workload) and isinstance(b, Service):
        return _meet(b, a)
    return False
