"""A rollout-test's bundle keeps only the events of the pods its watch saw: an earlier
rollout's deletions (``Killing`` of its pods, ``Deleted pod: …`` of its ReplicaSet) are
left out, events about no pod stay, and nothing is left out when the watch saw no pod."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from svcdoctor.cluster.collect import kube_list, stream
from svcdoctor.cluster.window import event_pod, keep_events_of, watched_pods


def _event(name: str, reason: str, kind: str, target: str, message: str = "") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": kind, "name": target}, "reason": reason,
            "message": message, "lastTimestamp": "2026-12-05T17:00:00Z"}  # fmt: skip


def _pod(name: str) -> dict[str, Any]:
    return {"type": "ADDED", "object": {"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": name}}}  # fmt: skip


def test_events_of_pods_the_test_did_not_see_are_left_out(tmp_path: Path) -> None:
    (tmp_path / "pods.json").write_text(stream([_pod("api-new-1"), _pod("api-old-1")]))
    events = [
        _event("a", "Killing", "Pod", "api-older-1"),  # an earlier rollout's pod
        _event("b", "SuccessfulDelete", "ReplicaSet", "api-older", "Deleted pod: api-older-1"),
        _event("c", "Killing", "Pod", "api-old-1"),  # this test's
        _event("d", "SuccessfulDelete", "ReplicaSet", "api-old", "Deleted pod: api-old-1"),
        _event("e", "ScalingReplicaSet", "Deployment", "api", "Scaled up replica set api-new"),
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(kube_list(events)))
    assert event_pod(events[1]) == "api-older-1"
    assert event_pod(events[4]) is None
    pods = watched_pods(tmp_path / "pods.json")
    assert pods == {"api-new-1", "api-old-1"}
    assert keep_events_of(path, pods) == 2
    kept = [e["metadata"]["name"] for e in json.loads(path.read_text())["items"]]
    assert kept == ["c", "d", "e"]
    assert keep_events_of(path, pods) == 0  # idempotent


def test_without_watched_pods_nothing_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps(kube_list([_event("a", "Killing", "Pod", "x")])))
    assert watched_pods(tmp_path / "pods.json") == set()  # no such file
    assert keep_events_of(path, set()) == 0
    assert keep_events_of(tmp_path / "missing.json", {"x"}) == 0
    assert len(json.loads(path.read_text())["items"]) == 1
