"""What a client's Job or Pod means to the lab, pure: the checks (what the lab can run),
a Job's defaults and pods, the plan of a pod's process (``Launch``: argv, env, files, the
Service addresses rewritten to a node's) and the statuses that follow from the facts of a
pod's process and a Job's pods. ``jobs.JobRunner`` acts on them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdoctor.lab.names import SERVICE, SERVICE_PORT
from svcdoctor.lab.objects import CLUSTER_IP, stamp
from svcdoctor.model.images import image_name

MANAGED_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet
_PYTHON = re.compile(r"^(.*/)?python(\d+(\.\d+)?)?$")
_FIELDS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "metadata.name": lambda pod: pod["metadata"]["name"],
    "metadata.namespace": lambda pod: pod["metadata"]["namespace"],
    "metadata.uid": lambda pod: pod["metadata"].get("uid", ""),
    "spec.nodeName": lambda pod: pod["spec"].get("nodeName", ""),
    "spec.serviceAccountName": lambda pod: pod["spec"].get("serviceAccountName", "default"),
    "status.hostIP": lambda pod: pod.get("status", {}).get("hostIP", ""),
    "status.podIP": lambda pod: pod.get("status", {}).get("podIP", ""),
}

Obj = dict[str, Any]


class Refused(Exception):
    """A request the lab does not accept: ``code`` and ``reason`` as kube-apiserver
    answers (422 Invalid names the ``field`` and its ``value``)."""

    def __init__(
        self, code: int, reason: str, message: str, field: str = "", value: Any = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.field = field
        self.value = value


def invalid_field(field: str, value: Any, detail: str) -> Refused:
    return Refused(422, "Invalid", detail, field, value)


class Waiting(Exception):
    """A pod cannot start yet (a ConfigMap it mounts does not exist)."""


# ---- from objects to a process (pure) ---------------------------------------------------
@dataclass(frozen=True, slots=True)
class Launch:
    """What to run for a pod: argv after the interpreter, the environment, the files to
    write (path relative to the pod's directory → text) and the working directory."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    files: Mapping[str, str]
    dirs: tuple[str, ...]
    cwd: str


def random_suffix(n: int = 5) -> str:
    return "".join(secrets.choice(_NAME_CHARS) for _ in range(n))


def check_pod_spec(spec: Obj, at: str = "spec") -> None:
    """Refuse (422) what the lab cannot run: other images than python, commands other
    than python's, more than one container, volumes other than configMap and emptyDir."""
    containers = spec.get("containers") or []
    if len(containers) != 1:
        raise invalid_field(
            f"{at}.containers", len(containers), "the lab runs pods of exactly one container"
        )
    if spec.get("initContainers"):
        raise invalid_field(f"{at}.initContainers", "…", "the lab runs no init containers")
    container = containers[0]
    image = str(container.get("image", ""))
    if not image_name(image).startswith("python"):
        raise invalid_field(
            f"{at}.containers[0].image",
            image,
            f"the lab runs only python images (the agent); got {image}",
        )
    command = [*(container.get("command") or []), *(container.get("args") or [])]
    if not command or not _PYTHON.match(str(command[0])):
        raise invalid_field(
            f"{at}.containers[0].command",
            command[:1],
            "the lab runs python commands only (python -I FILE ARGS)",
        )
    for i, volume in enumerate(spec.get("volumes") or []):
        if not ("configMap" in volume or "emptyDir" in volume):
            raise invalid_field(
                f"{at}.volumes[{i}]",
                volume.get("name"),
                "the lab mounts configMap and emptyDir volumes only",
            )
    for i, env in enumerate(container.get("env") or []):
        source = env.get("valueFrom")
        if source and "fieldRef" not in source and "configMapKeyRef" not in source:
            raise invalid_field(
                f"{at}.containers[0].env[{i}].valueFrom",
                env.get("name"),
                "the lab resolves value, fieldRef and configMapKeyRef only",
            )
        if source and "fieldRef" in source and source["fieldRef"].get("fieldPath") not in _FIELDS:
            path = source["fieldRef"].get("fieldPath")
            raise invalid_field(
                f"{at}.containers[0].env[{i}].valueFrom.fieldRef.fieldPath",
                path,
                f"supported values: {', '.join(_FIELDS)}",
            )


def service_rewrites(
    namespace: str, target: tuple[str, int], service: str = SERVICE
) -> dict[str, str]:
    """The Service's addresses a command may name (ClusterIP:port, its DNS names) → where
    they lead from this node (``target``: the VIP, or the node's userspace proxy)."""
    hosts = (
        CLUSTER_IP,
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}",
    )
    address = f"{target[0]}:{target[1]}"
    return {f"{h}:{SERVICE_PORT}": address for h in hosts if f"{h}:{SERVICE_PORT}" != address}


def rewrite(arg: str, mounts: Mapping[str, str], addresses: Mapping[str, str]) -> str:
    """One argument: a path under a mount → the lab's directory for it; a Service address
    (``host:port`` as a whole word, in a URL or a list) → where it leads from the node."""
    for mount, local in sorted(mounts.items(), key=lambda m: -len(m[0])):
        if arg == mount or arg.startswith(mount.rstrip("/") + "/"):
            arg = local + arg[len(mount.rstrip("/")) :]
            break
    for address, target in addresses.items():
        arg = re.sub(rf"(?<![\w.-]){re.escape(address)}(?![\w.-])", target, arg)
    return arg


def plan(
    pod: Obj,
    configmaps: Callable[[str], Obj | None],
    addresses: Mapping[str, str],
    root: Path,
) -> Launch:
    """The process for ``pod`` (already checked by ``check_pod_spec``): ``configmaps(name)``
    gives the ConfigMaps it mounts (raises ``Waiting`` while one is missing), ``addresses``
    the Service rewrites of its node, ``root`` the pod's own directory."""
    spec = pod["spec"]
    container = spec["containers"][0]
    files: dict[str, str] = {}
    dirs: list[str] = []
    volumes: dict[str, str] = {}
    for volume in spec.get("volumes") or []:
        local = f"volumes/{volume['name']}"
        volumes[volume["name"]] = local
        dirs.append(local)
        source = volume.get("configMap")
        if source is None:
            continue
        cm = configmaps(source.get("name", ""))
        if cm is None:
            if source.get("optional"):
                continue
            raise Waiting(f'configmap "{source.get("name")}" not found')
        data = {**cm.get("data", {})}
        items = source.get("items")
        chosen = {i["key"]: i.get("path", i["key"]) for i in items or [{"key": k} for k in data]}
        for key, path in chosen.items():
            if key in data:
                files[f"{local}/{path}"] = data[key]
    mounts = {
        m["mountPath"]: str(root / volumes[m["name"]])
        for m in container.get("volumeMounts") or []
        if m.get("name") in volumes
    }
    command = [*(container.get("command") or []), *(container.get("args") or [])]
    argv = tuple(rewrite(str(a), mounts, addresses) for a in command[1:])
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOSTNAME": pod["metadata"]["name"],
    }
    for entry in container.get("env") or []:
        env[entry["name"]] = _env_value(entry, pod, configmaps)
    workdir = str(container.get("workingDir") or "")
    cwd = rewrite(workdir, mounts, {}) if workdir else str(root)
    if not cwd.startswith(str(root)):
        cwd = str(root)  # a directory of the image: the lab has none
    return Launch(argv, env, files, tuple(dirs), cwd)


def _env_value(entry: Obj, pod: Obj, configmaps: Callable[[str], Obj | None]) -> str:
    source = entry.get("valueFrom")
    if not source:
        return str(entry.get("value", ""))
    if "fieldRef" in source:
        return str(_FIELDS[source["fieldRef"]["fieldPath"]](pod))
    ref = source["configMapKeyRef"]
    cm = configmaps(ref.get("name", ""))
    if cm is None or ref.get("key") not in cm.get("data", {}):
        if ref.get("optional"):
            return ""
        raise Waiting(f'configmap "{ref.get("name")}" key "{ref.get("key")}" not found')
    return str(cm["data"][ref["key"]])


# ---- statuses (pure) --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the lab knows of one pod's container."""

    created: float
    node_ip: str
    started: float | None = None  # the process started
    finished: float | None = None
    exit_code: int | None = None
    waiting: str = "ContainerCreating"  # why it has not started
    waiting_message: str = ""
    deadline_exceeded: bool = False


def pod_status(facts: PodFacts, container: str, image: str) -> Obj:
    """The pod's status as the kubelet reports it."""
    ip = facts.node_ip
    state: Obj
    if facts.finished is not None and facts.exit_code is not None:
        phase = "Succeeded" if facts.exit_code == 0 else "Failed"
        state = {
            "terminated": {
                "exitCode": facts.exit_code,
                "reason": "Completed" if facts.exit_code == 0 else "Error",
                "startedAt": stamp(facts.started or facts.created),
                "finishedAt": stamp(facts.finished),
            }
        }
    elif facts.started is not None:
        phase, state = "Running", {"running": {"startedAt": stamp(facts.started)}}
    else:
        phase = "Pending"
        waiting: Obj = {"reason": facts.waiting}
        if facts.waiting_message:
            waiting["message"] = facts.waiting_message
        state = {"waiting": waiting}
    running = phase == "Running"
    status: Obj = {
        "phase": phase,
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True" if running else "False"},
            {"type": "Ready", "status": "True" if running else "False"},
        ],
        "hostIP": ip,
        "hostIPs": [{"ip": ip}],
        "startTime": stamp(facts.created),
        "containerStatuses": [
            {
                "name": container,
                "image": image,
                "imageID": f"docker.io/library/{image}",
                "ready": running,
                "started": running,
                "restartCount": 0,
                "state": state,
            }
        ],
    }
    if facts.started is not None:  # the node's network: the pod is hostNetwork-like
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    if facts.deadline_exceeded:
        status["reason"] = "DeadlineExceeded"
        status["message"] = "Pod was active on the node longer than the specified deadline"
    return status


@dataclass(frozen=True, slots=True)
class JobFacts:
    started: float
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    finished: float | None = None
    outcome: str | None = None  # Complete | Failed
    reason: str = ""  # Failed: DeadlineExceeded | BackoffLimitExceeded
    message: str = ""


def job_status(facts: JobFacts) -> Obj:
    """The Job's status as the Job controller writes it (1.31+: SuccessCriteriaMet or
    FailureTarget first, then Complete or Failed)."""
    status: Obj = {
        "startTime": stamp(facts.started),
        "active": facts.active,
        "ready": facts.ready,
        "terminating": 0,
        "uncountedTerminatedPods": {},
    }
    if facts.succeeded:
        status["succeeded"] = facts.succeeded
    if facts.failed:
        status["failed"] = facts.failed
    if facts.outcome is not None and facts.finished is not None:
        when = stamp(facts.finished)
        first, reason, message = (
            (
                "SuccessCriteriaMet",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            if facts.outcome == "Complete"
            else ("FailureTarget", facts.reason, facts.message)
        )
        status["conditions"] = [
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastProbeTime": when,
                "lastTransitionTime": when,
            }
            for kind in (first, facts.outcome)
        ]
        if facts.outcome == "Complete":
            status["completionTime"] = when
    return status


def job_defaults(job: Obj) -> Obj:
    """The Job with the defaults and labels the API server and Job controller add."""
    uid = job["metadata"]["uid"]
    name = job["metadata"]["name"]
    spec = dict(job.get("spec") or {})
    template = dict(spec.get("template") or {})
    meta = dict(template.get("metadata") or {})
    labels = {**(meta.get("labels") or {})}
    for key in MANAGED_LABELS:
        labels[key] = uid
    for key in JOB_NAME_LABELS:
        labels[key] = name
    meta["labels"] = labels
    template["metadata"] = meta
    pod_spec = dict(template.get("spec") or {})
    pod_spec.setdefault("restartPolicy", "Never")
    pod_spec.setdefault("terminationGracePeriodSeconds", 30)
    template["spec"] = pod_spec
    spec["template"] = template
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    spec.setdefault("selector", {"matchLabels": {MANAGED_LABELS[0]: uid}})
    job_meta = dict(job["metadata"])
    job_meta["labels"] = {
        **(job_meta.get("labels") or {}),
        MANAGED_LABELS[0]: uid,
        MANAGED_LABELS[1]: uid,
        JOB_NAME_LABELS[0]: name,
        JOB_NAME_LABELS[1]: name,
    }
    return {**job, "metadata": job_meta, "spec": spec}


def check_job(job: Obj) -> None:
    spec = job.get("spec") or {}
    for key in ("parallelism", "completions"):
        if spec.get(key, 1) != 1:
            raise invalid_field(f"spec.{key}", spec.get(key), "the lab runs Jobs of one pod (1)")
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    if pod_spec.get("restartPolicy", "Never") not in ("Never", "OnFailure"):
        raise invalid_field(
            "spec.template.spec.restartPolicy",
            pod_spec.get("restartPolicy"),
            'supported values: "OnFailure", "Never"',
        )
    check_pod_spec(pod_spec, "spec.template.spec")


def job_pod(job: Obj, name: str) -> Obj:
    """The pod the Job controller creates from the Job's template."""
    template = job["spec"]["template"]
    meta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{job['metadata']['name']}-",
            "namespace": job["metadata"]["namespace"],
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job["metadata"]["name"],
                    "uid": job["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": dict(template["spec"]),
    }


def owned_by(obj: Obj, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
