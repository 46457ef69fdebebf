"""The field validation (422 causes) and the defaults of the objects clients create."""

from __future__ import annotations

import base64
import copy
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from svcdoctor.lab.apiserver.selectors import LABEL_KEY, LABEL_VALUE
from svcdoctor.lab.apiserver.status import Cause, Why

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


_SUBDOMAIN_TEXT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


_LABEL_TEXT = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


_CONFIG_KEY_TEXT = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)


_RESTART_POLICIES = ("Always", "OnFailure", "Never")


_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet


_JOB_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate(resource: str, obj: Mapping[str, Any]) -> list[Cause]:
    """The field errors of an object about to be stored (empty: valid)."""
    causes = _validate_meta(obj.get("metadata"), resource)
    spec = obj.get("spec")
    if resource == "configmaps":
        causes += _validate_configmap(obj)
    elif resource == "pods":
        causes += _validate_pod_spec(spec, "spec", _RESTART_POLICIES)
    elif resource == "jobs":
        causes += _validate_job(spec)
    elif spec is not None and not isinstance(spec, dict):
        causes.append(Cause(Why.INVALID, "spec", spec, "must be an object"))
    return causes


def _validate_meta(meta: Any, resource: str) -> list[Cause]:
    if not isinstance(meta, dict):
        return [Cause(Why.REQUIRED, "metadata.name", None, "name is required")]
    causes: list[Cause] = []
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        causes.append(Cause(Why.REQUIRED, "metadata.name", None, "name is required"))
    elif len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        causes.append(Cause(Why.INVALID, "metadata.name", name, _SUBDOMAIN_TEXT))
    elif resource == "jobs" and len(name) > 63:
        causes.append(
            Cause(Why.INVALID, "metadata.name", name, "must be no more than 63 characters")
        )
    for what in ("labels", "annotations"):
        causes += _validate_strings(meta.get(what), f"metadata.{what}", labels=what == "labels")
    return causes


def _validate_strings(value: Any, path: str, *, labels: bool = False) -> list[Cause]:
    if value is None:
        return []
    if not isinstance(value, dict):
        return [Cause(Why.INVALID, path, value, "must be a map of strings")]
    causes = []
    for key, item in value.items():
        if not isinstance(item, str):
            causes.append(Cause(Why.INVALID, f"{path}[{key}]", item, "must be a string"))
        elif labels and (
            not LABEL_KEY.fullmatch(key)
            or len(key.rpartition("/")[2]) > 63
            or not LABEL_VALUE.fullmatch(item)
            or len(item) > 63
        ):
            causes.append(Cause(Why.INVALID, path, {key: item}, "not a valid label key and value"))
    return causes


def _validate_configmap(obj: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for what in ("data", "binaryData"):
        causes += _validate_strings(obj.get(what), what)
        values = obj.get(what)
        for key in values if isinstance(values, dict) else {}:
            if len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
                causes.append(Cause(Why.INVALID, what, key, _CONFIG_KEY_TEXT))
    binary = obj.get("binaryData")
    for key, value in (binary if isinstance(binary, dict) else {}).items():
        try:
            base64.b64decode(str(value), validate=True)
        except ValueError:
            causes.append(Cause(Why.INVALID, f"binaryData[{key}]", value, "not base64"))
    return causes


def _validate_pod_spec(spec: Any, path: str, restart: Sequence[str]) -> list[Cause]:
    if not isinstance(spec, dict):
        return [Cause(Why.REQUIRED, f"{path}.containers", None, "")]
    causes: list[Cause] = []
    volumes: set[str] = set()
    for i, volume in enumerate(_list(spec, "volumes", path, causes)):
        name = volume.get("name") if isinstance(volume, dict) else None
        where = f"{path}.volumes[{i}].name"
        if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name) or len(name) > 63:
            causes.append(Cause(Why.INVALID, where, name, _LABEL_TEXT))
        elif name in volumes:
            causes.append(Cause(Why.DUPLICATE, where, name))
        else:
            volumes.add(name)
    containers = _list(spec, "containers", path, causes)
    if not containers:
        causes.append(Cause(Why.REQUIRED, f"{path}.containers", None, ""))
    names: set[str] = set()
    for i, container in enumerate(containers):
        causes += _validate_container(container, f"{path}.containers[{i}]", names, volumes)
    policy = spec.get("restartPolicy", restart[0])
    if policy not in restart:
        supported = ", ".join(f'"{p}"' for p in restart)
        causes.append(
            Cause(
                Why.NOT_SUPPORTED,
                f"{path}.restartPolicy",
                policy,
                f"supported values: {supported}",
            )
        )
    for key, low in (("activeDeadlineSeconds", 1), ("terminationGracePeriodSeconds", 0)):
        causes += _validate_count(spec, key, path, low)
    if not isinstance(spec.get("nodeName", ""), str):
        causes.append(Cause(Why.INVALID, f"{path}.nodeName", spec["nodeName"], ""))
    return causes


def _validate_container(
    container: Any, path: str, names: set[str], volumes: set[str]
) -> list[Cause]:
    if not isinstance(container, dict):
        return [Cause(Why.INVALID, path, container, "must be an object")]
    causes: list[Cause] = []
    name = container.get("name")
    if not name:
        causes.append(Cause(Why.REQUIRED, f"{path}.name", None))
    elif not isinstance(name, str) or not _DNS_LABEL.fullmatch(name) or len(name) > 63:
        causes.append(Cause(Why.INVALID, f"{path}.name", name, _LABEL_TEXT))
    elif name in names:
        causes.append(Cause(Why.DUPLICATE, f"{path}.name", name))
    else:
        names.add(name)
    image = container.get("image")
    if not isinstance(image, str) or not image.strip():
        causes.append(Cause(Why.REQUIRED, f"{path}.image", None))
    for key in ("command", "args"):
        value = container.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            causes.append(Cause(Why.INVALID, f"{path}.{key}", value, "must be strings"))
    for i, env in enumerate(_list(container, "env", path, causes)):
        if not isinstance(env, dict) or not isinstance(env.get("name"), str) or not env["name"]:
            causes.append(Cause(Why.REQUIRED, f"{path}.env[{i}].name", None))
        elif "value" in env and not isinstance(env["value"], str):
            causes.append(Cause(Why.INVALID, f"{path}.env[{i}].value", env["value"], ""))
    for i, mount in enumerate(_list(container, "volumeMounts", path, causes)):
        where = f"{path}.volumeMounts[{i}]"
        if not isinstance(mount, dict) or not mount.get("mountPath"):
            causes.append(Cause(Why.REQUIRED, f"{where}.mountPath", None))
        elif mount.get("name") not in volumes:
            causes.append(Cause(Why.NOT_FOUND, f"{where}.name", mount.get("name")))
    return causes


def _list(obj: Mapping[str, Any], key: str, path: str, causes: list[Cause]) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        causes.append(Cause(Why.INVALID, f"{path}.{key}", value, "must be a list"))
        return []
    return value


def _validate_count(spec: Mapping[str, Any], key: str, path: str, low: int) -> list[Cause]:
    value = spec.get(key)
    if value is None or (is_int(value) and value >= low):
        return []
    word = "must be greater than zero" if low else "must be greater than or equal to 0"
    return [Cause(Why.INVALID, f"{path}.{key}", value, word)]


def _validate_job(spec: Any) -> list[Cause]:
    if not isinstance(spec, dict):
        return [Cause(Why.REQUIRED, "spec.template", None)]
    causes: list[Cause] = []
    for key, low in (
        ("activeDeadlineSeconds", 1),
        ("ttlSecondsAfterFinished", 0),
        ("backoffLimit", 0),
        ("completions", 0),
        ("parallelism", 0),
    ):
        causes += _validate_count(spec, key, "spec", low)
    template = spec.get("template")
    if not isinstance(template, dict):
        return [*causes, Cause(Why.REQUIRED, "spec.template", None)]
    meta = template.get("metadata")
    causes += _validate_strings(
        meta.get("labels") if isinstance(meta, dict) else None,
        "spec.template.metadata.labels",
        labels=True,
    )
    pod_spec = template.get("spec")
    if isinstance(pod_spec, dict) and "restartPolicy" not in pod_spec:
        pod_spec = {**pod_spec, "restartPolicy": "Always"}  # the pod template's default
    return causes + _validate_pod_spec(pod_spec, "spec.template.spec", ("OnFailure", "Never"))


def defaults(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (metadata filled) with the defaults kube-apiserver adds, for what kubectl and
    the lab read: a copy."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    if resource == "pods":
        _pod_defaults(obj.setdefault("spec", {}))
        obj["status"] = {"phase": "Pending", "qosClass": _qos(obj["spec"])}
    elif resource == "jobs":
        spec = obj["spec"]
        uid, name = meta["uid"], meta["name"]
        template = spec["template"]
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update(dict.fromkeys(("controller-uid", _JOB_LABELS[0]), uid))
        labels.update(dict.fromkeys(("job-name", _JOB_LABELS[1]), name))
        spec.setdefault("selector", {"matchLabels": {_JOB_LABELS[0]: uid}})
        for key, value in (
            ("parallelism", 1),
            ("completions", 1),
            ("backoffLimit", 6),
            ("completionMode", "NonIndexed"),
            ("suspend", False),
            ("podReplacementPolicy", "TerminatingOrFailed"),
            ("manualSelector", None),
        ):
            if value is not None:
                spec.setdefault(key, value)
        _pod_defaults(template.setdefault("spec", {}))
        if not meta.get("labels"):
            meta["labels"] = dict(labels)
        meta["generation"] = 1
        obj["status"] = {}
    return obj


def _pod_defaults(spec: dict[str, Any]) -> None:
    for key, value in (
        ("restartPolicy", "Always"),
        ("terminationGracePeriodSeconds", 30),
        ("dnsPolicy", "ClusterFirst"),
        ("schedulerName", "default-scheduler"),
        ("serviceAccountName", "default"),
        ("securityContext", {}),
        ("enableServiceLinks", True),
    ):
        spec.setdefault(key, value)
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            image = container.get("image", "")
            latest = ":" not in image.rpartition("/")[2] or image.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("resources", {})


def _qos(spec: Mapping[str, Any]) -> str:
    """The pod's QoS class, from its containers' requests and limits."""
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(_guaranteed(r) for r in resources)
    return "Guaranteed" if guaranteed else "Burstable"


def _guaranteed(resources: Mapping[str, Any]) -> bool:
    """Limits for cpu and memory, and requests (defaulted to the limits) equal to them."""
    limits = resources.get("limits") or {}
    requests = {**limits, **(resources.get("requests") or {})}
    return all(k in limits and requests[k] == limits[k] for k in ("cpu", "memory"))


def generated_name(prefix: str) -> str:
    """``generateName`` + 5 random characters, as the apiserver names objects."""
    return prefix[:58] + "".join(random.choice(_NAME_CHARS) for _ in range(5))
