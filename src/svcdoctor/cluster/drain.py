"""``rollout-test --mode drain|scale-down``: a node emptied as ``kubectl drain
--ignore-daemonsets --delete-emptydir-data`` empties it, then uncordoned.

Which pods go follows kubectl drain's filters (kubernetes/kubectl pkg/drain/filters.go):
pods already being deleted are left to finish, DaemonSet pods are skipped
(--ignore-daemonsets), mirror (static) pods are skipped, emptyDir data is lost
(--delete-emptydir-data), a pod with no controller is refused (kubectl drain refuses it
without --force): nothing is cordoned then. svcdoctor's own pods (its load agent) are left
alone: the load runs on another node (``agent_node``). Each pod is evicted through the
Eviction API; a refusal (429: its PodDisruptionBudget forbids it now) is retried every
``EVICTION_RETRY`` s, as kubectl drain does, until the drain's bound, then it ends with a
one-line error naming the budget. The node is uncordoned when the test ends, whatever ends
it (``cordoned``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from svcdoctor.cluster.agentjob import MANAGED_BY, MANAGER, shielded
from svcdoctor.cluster.api import ApiReader, ApiStatus
from svcdoctor.cluster.reader import ClusterError
from svcdoctor.cluster.rollout_plan import Refused

# kubectl drain retries an eviction refused with 429 after 5 s (kubernetes/kubectl
# pkg/drain/drain.go, evictPods: "error when evicting pods/... (will retry after 5s)");
# lab/cluster.py EVICTION_RETRY is the same pause
EVICTION_RETRY = 5.0
# a static pod's mirror in the API (k8s.io/api core/v1 MirrorPodAnnotationKey)
MIRROR = "kubernetes.io/config.mirror"
POLL = 0.5  # seconds between looks at the evicted pods, until they are gone
CORDON = {"spec": {"unschedulable": True}}  # the patch kubectl cordon sends (strategic)
UNCORDON = {"spec": {"unschedulable": None}}  # kubectl uncordon's: the field removed


@dataclass(frozen=True, slots=True)
class Victims:
    """What a drain of the node does to its pods: ``evict`` them (namespace, name, uid),
    leave the ``skipped`` ones (a line each, for the notes)."""

    evict: tuple[tuple[str, str, str], ...]
    skipped: tuple[str, ...]


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((o for o in owners if o.get("controller")), None)


def victims(node: str, pods: Sequence[Mapping[str, Any]]) -> Victims:
    """The pods on ``node`` a drain evicts, by kubectl drain's filters (pure; see the
    module docstring); ``Refused`` naming the pods with no controller."""
    evict, skipped, orphans = [], [], []
    for pod in pods:
        meta = pod.get("metadata") or {}
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        labels = meta.get("labels") or {}
        owner = _controller(pod)
        phase = (pod.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp"):
            skipped.append(f"{name}: being deleted already")
        elif labels.get(MANAGED_BY) == MANAGER:
            skipped.append(f"{name}: svcdoctor's own")
        elif (
            owner is not None
            and owner.get("kind") == "DaemonSet"
            and phase
            not in (
                "Succeeded",
                "Failed",
            )
        ):
            skipped.append(f"{name}: a DaemonSet's (as kubectl drain --ignore-daemonsets)")
        elif MIRROR in (meta.get("annotations") or {}):
            skipped.append(f"{name}: a static pod's mirror")
        elif owner is None and phase not in ("Succeeded", "Failed"):
            orphans.append(name)
        else:
            evict.append((str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid"))))
    if orphans:
        listed = ", ".join(orphans[:3]) + (f" and {len(orphans) - 3} more" if orphans[3:] else "")
        raise Refused(
            f"{node} runs pods that declare no controller ({listed}): kubectl drain refuses "
            "to evict them without --force, and so does rollout-test"
        )
    return Victims(tuple(evict), tuple(skipped))


def check_node(node: str, obj: Mapping[str, Any] | None) -> None:
    """``Refused`` when the node is missing or cordoned already (uncordoning it at the end
    would undo someone else's cordon)."""
    if obj is None:
        raise Refused(f"node {node} not found")
    if (obj.get("spec") or {}).get("unschedulable"):
        raise Refused(f"node {node} is cordoned already: uncordon it first or pick another")


def agent_node(drained: str, nodes: Sequence[Mapping[str, Any]]) -> str:
    """A node for the load agent: Ready, schedulable, not the drained one (the first by
    name); ``Refused`` when there is none."""
    for obj in sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name"))):
        name = str((obj.get("metadata") or {}).get("name"))
        conditions = (obj.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        if name != drained and ready and not (obj.get("spec") or {}).get("unschedulable"):
            return name
    raise Refused(f"no Ready, schedulable node besides {drained} to run the load from")


@contextmanager
def cordoned(api: ApiReader, node: str, notes: list[str]) -> Iterator[None]:
    """Cordon ``node`` for the block; uncordon it at its end, also after Ctrl-C, SIGTERM
    and errors, without being interrupted itself (a failed uncordon is a note saying what
    to run)."""
    try:
        with shielded():  # a Ctrl-C during the PATCH must still reach the uncordon below
            api.patch("nodes", "", node, CORDON)
        yield
    finally:
        with shielded():
            try:
                api.patch("nodes", "", node, UNCORDON)
            except ClusterError as exc:
                notes.append(f"uncordoning {node} failed ({exc}): run kubectl uncordon {node}")
            else:
                notes.append(f"{node} uncordoned")


def evict_all(
    api: ApiReader,
    node: str,
    pods: Sequence[tuple[str, str, str]],
    until: float,
    progress: Callable[[str], None] = lambda _: None,
) -> None:
    """Evict ``pods``, each refusal (429) retried every ``EVICTION_RETRY`` s until
    ``until``; then wait (until ``until``) for every evicted pod to be gone. A
    ``ClusterError`` naming the pod and the budget when the time runs out."""
    started = time.time()
    pending = list(pods)
    refused: dict[tuple[str, str, str], str] = {}
    while pending:
        for pod in list(pending):
            ns, name, uid = pod
            try:
                api.evict(ns, name, uid or None)
            except ApiStatus as exc:
                if exc.code != 429:
                    raise
                refused[pod] = str(exc)
                progress(f"eviction of {ns}/{name} refused; retrying in {EVICTION_RETRY:g} s")
                continue
            pending.remove(pod)
            progress(f"evicted {ns}/{name}")
        if not pending:
            break
        if time.time() + EVICTION_RETRY > until:
            ns, name, _ = pending[0]
            raise ClusterError(
                f"the drain of {node} waited {time.time() - started:.0f} s to evict {ns}/{name}: "
                f"{refused[pending[0]]}"
            )
        time.sleep(EVICTION_RETRY)
    while True:
        left = [p for p in pods if _still_there(api, p)]
        if not left:
            return
        if time.time() > until:
            ns, name, _ = left[0]
            raise ClusterError(f"the drain of {node}: {ns}/{name} was evicted but never went")
        time.sleep(POLL)


def _still_there(api: ApiReader, pod: tuple[str, str, str]) -> bool:
    """As kubectl drain waits for a deletion: gone, or replaced by a pod of another uid."""
    ns, name, uid = pod
    found = api.get("pods", ns, name)
    return found is not None and str((found.get("metadata") or {}).get("uid")) == uid
