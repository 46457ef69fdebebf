"""The pods clients create on ``lab serve`` run as the user their securityContext names,
else as nobody: never as root unless ``runAsUser: 0`` asks for it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.lab import jobs
from svcdoctor.lab.apiserver import ObjectStore

WHO = """
import json, os, pathlib, sys
pathlib.Path(sys.argv[1]).write_text("x")
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
                  "wrote": pathlib.Path(sys.argv[1]).exists()}), flush=True)
"""


def _spec(pod: dict[str, Any] | None = None, own: dict[str, Any] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "python:3.12",
        "command": ["python3", "-I", "/code/who.py", "/scratch/written"],
        "volumeMounts": [
            {"name": "code", "mountPath": "/code"},
            {"name": "scratch", "mountPath": "/scratch"},
        ],
    }
    if own is not None:
        container["securityContext"] = own
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [
            {"name": "code", "configMap": {"name": "code"}},
            {"name": "scratch", "emptyDir": {}},
        ],
        "restartPolicy": "Never",
    }
    if pod is not None:
        spec["securityContext"] = pod
    return spec


@pytest.mark.parametrize(
    ("pod", "own", "expected"),
    [
        (None, None, jobs.RunAs(65534, 65534)),
        ({"runAsUser": 1000}, None, jobs.RunAs(1000, 65534)),
        ({"runAsUser": 1000, "runAsGroup": 3000}, {"runAsUser": 2000}, jobs.RunAs(2000, 3000)),
        ({"runAsNonRoot": True}, {"runAsUser": 0}, jobs.RunAs(0, 0, "breaks non-root policy")),
        (None, {"runAsUser": 0}, jobs.RunAs(0, 0)),
    ],
)
def test_run_as_reads_the_security_context(
    pod: dict[str, Any] | None, own: dict[str, Any] | None, expected: jobs.RunAs
) -> None:
    found = jobs.run_as(_spec(pod, own))
    assert (found.uid, found.gid) == (expected.uid, expected.gid)
    assert (expected.refused in found.refused) if expected.refused else not found.refused


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A directory other users can enter, as the lab's /run/svcdoctor (tmp_path is not)."""
    folder = Path(tempfile.mkdtemp(prefix="svcdoctor-users-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_pods_run_unprivileged_unless_root_is_asked(reachable: Path) -> None:
    cases = {
        "default": _spec(),
        "named": _spec({"runAsUser": 1000, "runAsGroup": 3000}),
        "root": _spec(own={"runAsUser": 0}),
        "refused": _spec({"runAsNonRoot": True, "runAsUser": 0}),
    }

    async def main() -> dict[str, Any]:
        store = ObjectStore()
        place = jobs.Placement(1, lambda n: None, lambda n: "127.0.0.1", lambda n: ("127.0.0.1", 1))
        runner = jobs.JobRunner(store, place, reachable / "svcd000000-jobs", limit=10)
        store.put(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "code", "namespace": "lab"},
                "data": {"who.py": WHO},
            }
        )
        for name, spec in cases.items():
            obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
            obj["metadata"] |= {"namespace": "lab", "uid": name}
            store.put(runner.admit_pod(obj, dry_run=False))
        end = time.time() + 20
        phases: dict[str, Any] = {}
        while time.time() < end:
            phases = {n: store.get("v1", "Pod", "lab", n)["status"] for n in cases}  # type: ignore[index]
            if all(phases[n]["phase"] == "Succeeded" for n in ("default", "named", "root")):
                break
            await asyncio.sleep(0.1)
        out = {n: runner.pods[n].log.text() for n in cases}
        await runner.close()
        assert runner.errors == []
        return {"phases": phases, "logs": out}

    found = asyncio.run(main())
    who = {n: json.loads(found["logs"][n].split(" ", 1)[1]) for n in ("default", "named", "root")}
    assert who["default"] == {"uid": 65534, "gid": 65534, "groups": [], "wrote": True}
    assert who["named"] == {"uid": 1000, "gid": 3000, "groups": [], "wrote": True}
    assert (who["root"]["uid"], who["root"]["gid"]) == (0, 0)
    refused = found["phases"]["refused"]
    assert refused["phase"] == "Pending"
    waiting = refused["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "CreateContainerConfigError"
    assert "non-root" in waiting["message"]
