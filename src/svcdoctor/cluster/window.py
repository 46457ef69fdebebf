"""What of a namespace's events belongs to one rollout-test. The events listed with the
Service's snapshot go back an hour (the API server's default ``--event-ttl``,
https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/), so an
earlier rollout's pod deletions (``Killing``, ``Deleted pod: …``) would count as this
test's. The test's own pods are the ones its watch saw (the old ReplicaSet's, listed when
the watch started, and the new one's): an event about any other pod is left out. This
needs no clock shared with the cluster's.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from svcdoctor.evidence.kubectl import POD_IN_MESSAGE, json_documents, objects


def event_pod(event: Mapping[str, Any]) -> str | None:
    """The pod an event is about: the object it regards, else the pod its message names
    (a ReplicaSet's ``Deleted pod: NAME``); None when it is about no pod."""
    regarding = event.get("involvedObject") or event.get("regarding") or {}
    if regarding.get("kind") == "Pod" and regarding.get("name"):
        return str(regarding["name"])
    found = POD_IN_MESSAGE.search(str(event.get("message") or event.get("note") or ""))
    return found.group(1) if found else None


def watched_pods(path: Path) -> set[str]:
    """The names of the pods in a watch stream (``pods.json`` of the bundle)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return set()
    return {
        str((obj.get("metadata") or {}).get("name"))
        for obj in objects(list(json_documents(text)))
        if obj.get("kind") == "Pod"
    }


def keep_events_of(path: Path, pods: Collection[str]) -> int:
    """Keep in the event List at ``path`` the events about ``pods`` or about no pod, and
    return how many were left out; with no pod known (the watch saw none) nothing is left
    out. A missing file is left alone."""
    if not pods:
        return 0
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return 0
    items = doc.get("items") or []
    kept = [e for e in items if (pod := event_pod(e)) is None or pod in pods]
    if len(kept) != len(items):
        path.write_text(json.dumps({**doc, "items": kept}, indent=2) + "\n", encoding="utf-8")
    return len(items) - len(kept)
