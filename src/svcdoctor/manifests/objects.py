"""Raw objects → model objects. Wrong field types become SVD004 problems, not crashes."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any, TypeVar

from svcdoctor.checks.inputs import INVALID_FIELD
from svcdoctor.manifests.loader import LoadResult, RawObject
from svcdoctor.manifests.yamlnodes import YMap
from svcdoctor.model import (
    WORKLOAD_KINDS,
    Autoscaler,
    Container,
    ContainerPort,
    Finding,
    Inventory,
    Location,
    ObjectRef,
    PodTemplate,
    PreStop,
    Probe,
    Resource,
    Service,
    ServicePort,
    Workload,
)
from svcdoctor.model.duration import SLEEP, parse_duration

T = TypeVar("T")
_SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh", "ksh"})
_SLEEP = re.compile(r"(?:^|[\s;&|(/])sleep\s+(\d+(?:\.\d+)?)([smh]?)(?=$|[\s;&|)])")


class _Fields:
    """Typed access to one raw object; a field of the wrong type is reported once."""

    def __init__(self, raw: RawObject, problems: list[Finding]) -> None:
        self.raw = raw
        self.problems = problems
        meta = raw.body.get("metadata")
        meta = meta if isinstance(meta, YMap) else None
        self.ref = ObjectRef(
            raw.kind,
            _str(meta.get("namespace")) if meta else "",
            (_str(meta.get("name")) if meta else "") or "<unnamed>",
        )

    def _bad(self, parent: YMap, key: str, path: str, want: str, got: Any) -> None:
        shown = (
            repr(got)
            if not isinstance(got, dict | list)
            else ("a mapping" if isinstance(got, dict) else "a list")
        )
        self.problems.append(
            INVALID_FIELD.finding(
                Location(self.raw.location.file, parent.line_of(key)),
                f"{self.ref}: {path} must be {want}, got {shown}",
                subject=None,
            )
        )

    def get(self, parent: YMap | None, key: str, path: str, kind: type[T], want: str) -> T | None:
        if parent is None or key not in parent or parent[key] is None:
            return None
        value = parent[key]
        if kind is int and isinstance(value, bool):
            self._bad(parent, key, path, want, value)
            return None
        if isinstance(value, kind):
            return value
        self._bad(parent, key, path, want, value)
        return None

    def mapping(self, parent: YMap | None, key: str, path: str) -> YMap | None:
        return self.get(parent, key, path, YMap, "a mapping")

    def seq(self, parent: YMap | None, key: str, path: str) -> list[Any]:
        return self.get(parent, key, path, list, "a list") or []

    def maps(self, parent: YMap | None, key: str, path: str) -> list[tuple[str, YMap]]:
        """The mapping items of a list field, each with its path."""
        out: list[tuple[str, YMap]] = []
        items = self.seq(parent, key, path)
        for i, item in enumerate(items):
            if isinstance(item, YMap):
                out.append((f"{path}[{i}]", item))
            else:
                assert parent is not None
                self._bad(parent, key, f"{path}[{i}]", "a mapping", item)
        return out

    def integer(self, parent: YMap | None, key: str, path: str) -> int | None:
        return self.get(parent, key, path, int, "an integer")

    def text(self, parent: YMap | None, key: str, path: str) -> str | None:
        value = self.get(parent, key, path, object, "a string")
        return None if value is None else _str(value)

    def int_or_str(self, parent: YMap | None, key: str, path: str) -> int | str | None:
        value = self.get(parent, key, path, object, "an integer or a string")
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if isinstance(value, str):
            return int(value) if value.isdigit() else value
        assert parent is not None
        self._bad(parent, key, path, "an integer or a string", value)
        return None

    def labels(self, parent: YMap | None, key: str, path: str) -> dict[str, str]:
        found = self.mapping(parent, key, path)
        return {_str(k): _str(v) for k, v in found.items()} if found else {}

    def strings(self, parent: YMap | None, key: str, path: str) -> tuple[str, ...]:
        return tuple(_str(v) for v in self.seq(parent, key, path))


def _str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_inventory(loaded: LoadResult) -> Inventory:
    """Model objects for the checks, with every reading problem kept."""
    problems = list(loaded.problems)
    workloads: list[Workload] = []
    services: list[Service] = []
    autoscalers: list[Autoscaler] = []
    resources: list[Resource] = []
    for raw in loaded.objects:
        f = _Fields(raw, problems)
        if raw.kind in WORKLOAD_KINDS:
            workloads.append(_workload(f))
        elif raw.kind == "Service":
            services.append(_service(f))
        elif raw.kind == "HorizontalPodAutoscaler":
            if hpa := _autoscaler(f):
                autoscalers.append(hpa)
        else:
            resources.append(_resource(f))
    return Inventory(
        workloads=tuple(_instances_of_present_owners(workloads)),
        services=tuple(services),
        autoscalers=tuple(autoscalers),
        resources=tuple(resources),
        problems=tuple(problems),
        files=loaded.files,
        objects=loaded.documents,
        skipped=loaded.skipped,
    )


def _annotations(f: _Fields) -> dict[str, str]:
    return f.labels(
        f.mapping(f.raw.body, "metadata", "metadata"), "annotations", "metadata.annotations"
    )


def _workload(f: _Fields) -> Workload:
    body = f.raw.body
    spec = f.mapping(body, "spec", "spec")
    kind = f.raw.kind
    if kind == "Pod":
        meta = f.mapping(body, "metadata", "metadata")
        template = _pod_template(f, meta, spec, "spec", body.line)
    else:
        tpl_parent, prefix = spec, "spec"
        if kind == "CronJob":
            job = f.mapping(spec, "jobTemplate", "spec.jobTemplate")
            tpl_parent, prefix = (
                f.mapping(job, "spec", "spec.jobTemplate.spec"),
                "spec.jobTemplate.spec",
            )
        tpl = f.mapping(tpl_parent, "template", f"{prefix}.template")
        template = _pod_template(
            f,
            f.mapping(tpl, "metadata", f"{prefix}.template.metadata"),
            f.mapping(tpl, "spec", f"{prefix}.template.spec"),
            f"{prefix}.template.spec",
            tpl.line if tpl else body.line,
        )
    strategy, max_unavailable, max_surge = _strategy(f, spec)
    return Workload(
        ref=f.ref,
        location=f.raw.location,
        template=template,
        annotations=_annotations(f),
        replicas=f.integer(spec, "replicas", "spec.replicas"),
        strategy=strategy,
        max_unavailable=max_unavailable,
        max_surge=max_surge,
        owner=_owner(f),
    )


def _owner(f: _Fields) -> ObjectRef | None:
    meta = f.mapping(f.raw.body, "metadata", "metadata")
    for path, ref in f.maps(meta, "ownerReferences", "metadata.ownerReferences"):
        if ref.get("controller") is True:
            return ObjectRef(
                f.text(ref, "kind", f"{path}.kind") or "",
                f.ref.namespace,
                f.text(ref, "name", f"{path}.name") or "",
            )
    return None


def _instances_of_present_owners(workloads: list[Workload]) -> list[Workload]:
    """Drop Pods and ReplicaSets (as in ``kubectl get`` output) whose controlling owner is
    among the inputs: they are instances of that workload, not workloads of their own."""
    present = {w.ref for w in workloads}
    deployments = {(w.ref.namespace, w.ref.name) for w in workloads if w.ref.kind == "Deployment"}

    def owned(w: Workload) -> bool:
        owner = w.owner
        if owner is None:
            return False
        if owner in present:
            return True
        # a pod's ReplicaSet is often absent while its Deployment (name-<hash>) is present
        return (
            owner.kind == "ReplicaSet"
            and (owner.namespace, owner.name.rsplit("-", 1)[0]) in deployments
        )

    return [w for w in workloads if not owned(w)]


_STRATEGY_KEYS = {
    "Deployment": "strategy",
    "Rollout": "strategy",
    "StatefulSet": "updateStrategy",
    "DaemonSet": "updateStrategy",
}


def _strategy(
    f: _Fields, spec: YMap | None
) -> tuple[str | None, int | str | None, int | str | None]:
    kind = f.raw.kind
    key = _STRATEGY_KEYS.get(kind)
    if key is None:
        return None, None, None
    strategy = f.mapping(spec, key, f"spec.{key}")
    if kind == "Rollout":
        for name, label in (("canary", "Canary"), ("blueGreen", "BlueGreen")):
            if strategy and name in strategy:
                return label, *_bounds(f, f.mapping(strategy, name, f"spec.strategy.{name}"), "")
        return None, None, None
    path = f"spec.{key}.rollingUpdate"
    rolling = f.mapping(strategy, "rollingUpdate", path)
    kind_of = f.text(strategy, "type", f"spec.{key}.type") or "RollingUpdate"
    return kind_of, *_bounds(f, rolling, f"{path}.")


def _bounds(
    f: _Fields, node: YMap | None, prefix: str
) -> tuple[int | str | None, int | str | None]:
    """``maxUnavailable`` and ``maxSurge`` of a rolling update (``prefix``: their path)."""
    return (
        f.int_or_str(node, "maxUnavailable", f"{prefix}maxUnavailable"),
        f.int_or_str(node, "maxSurge", f"{prefix}maxSurge"),
    )


def _pod_template(
    f: _Fields, meta: YMap | None, spec: YMap | None, path: str, line: int
) -> PodTemplate:
    containers = [_container(f, c, p) for p, c in f.maps(spec, "containers", f"{path}.containers")]
    for p, c in f.maps(spec, "initContainers", f"{path}.initContainers"):
        if c.get("restartPolicy") == "Always":  # a native sidecar runs beside the app
            containers.append(_container(f, c, p))
    affinity = f.mapping(spec, "affinity", f"{path}.affinity")
    spread = bool(f.seq(spec, "topologySpreadConstraints", f"{path}.topologySpreadConstraints"))
    spread = spread or bool(affinity and affinity.get("podAntiAffinity"))
    return PodTemplate(
        labels=f.labels(meta, "labels", "metadata.labels"),
        annotations=f.labels(meta, "annotations", "metadata.annotations"),
        containers=tuple(containers),
        line=spec.line if spec else line,
        grace_seconds=f.integer(
            spec, "terminationGracePeriodSeconds", f"{path}.terminationGracePeriodSeconds"
        ),
        grace_line=(
            spec.line_of("terminationGracePeriodSeconds")
            if spec and "terminationGracePeriodSeconds" in spec
            else None
        ),
        spread=spread,
    )


def _container(f: _Fields, c: YMap, path: str) -> Container:
    ports = []
    for p_path, p in f.maps(c, "ports", f"{path}.ports"):
        number = f.integer(p, "containerPort", f"{p_path}.containerPort")
        if number is not None:
            ports.append(
                ContainerPort(
                    number,
                    f.text(p, "name", f"{p_path}.name"),
                    f.text(p, "protocol", f"{p_path}.protocol") or "TCP",
                )
            )
    named = {p.name: p.number for p in ports if p.name}
    lifecycle = f.mapping(c, "lifecycle", f"{path}.lifecycle")
    return Container(
        name=f.text(c, "name", f"{path}.name") or "<unnamed>",
        line=c.line,
        image=f.text(c, "image", f"{path}.image") or "",
        command=f.strings(c, "command", f"{path}.command"),
        args=f.strings(c, "args", f"{path}.args"),
        ports=tuple(ports),
        readiness=_probe(f, c, "readinessProbe", path, named),
        liveness=_probe(f, c, "livenessProbe", path, named),
        startup=_probe(f, c, "startupProbe", path, named),
        prestop=_prestop(
            f,
            f.mapping(lifecycle, "preStop", f"{path}.lifecycle.preStop"),
            f"{path}.lifecycle.preStop",
        ),
        env=tuple(
            (name, _str(e.get("value")))
            for e_path, e in f.maps(c, "env", f"{path}.env")
            if (name := f.text(e, "name", f"{e_path}.name")) and e.get("value") is not None
        ),
    )


def _probe(f: _Fields, c: YMap, key: str, path: str, named: dict[str, int]) -> Probe | None:
    probe = f.mapping(c, key, f"{path}.{key}")
    if probe is None:
        return None
    path = f"{path}.{key}"

    def port(handler: YMap | None, where: str) -> int | str | None:
        value = f.int_or_str(handler, "port", f"{where}.port")
        return named.get(value, value) if isinstance(value, str) else value

    if (h := f.mapping(probe, "httpGet", f"{path}.httpGet")) is not None:
        p = port(h, f"{path}.httpGet")
        headers = sorted(
            f"{_str(x.get('name'))}={_str(x.get('value'))}"
            for _, x in f.maps(h, "httpHeaders", f"{path}.httpGet.httpHeaders")
        )
        target = (
            "httpGet",
            _str(h.get("scheme") or "HTTP").upper(),
            _str(h.get("host")),
            _str(p),
            _str(h.get("path") or "/"),
            *headers,
        )
        return Probe("httpGet", target, probe.line, port=p)
    if (h := f.mapping(probe, "tcpSocket", f"{path}.tcpSocket")) is not None:
        p = port(h, f"{path}.tcpSocket")
        return Probe("tcpSocket", ("tcpSocket", _str(h.get("host")), _str(p)), probe.line, port=p)
    if (h := f.mapping(probe, "grpc", f"{path}.grpc")) is not None:
        p = port(h, f"{path}.grpc")
        return Probe("grpc", ("grpc", _str(p), _str(h.get("service"))), probe.line, port=p)
    if (h := f.mapping(probe, "exec", f"{path}.exec")) is not None:
        command = f.strings(h, "command", f"{path}.exec.command")
        return Probe("exec", ("exec", *command), probe.line, command=command)
    return None


def _prestop(f: _Fields, hook: YMap | None, path: str) -> PreStop | None:
    if hook is None:
        return None
    if (h := f.mapping(hook, "sleep", f"{path}.sleep")) is not None:
        seconds = f.integer(h, "seconds", f"{path}.sleep.seconds")
        return PreStop("sleep", hook.line, float(seconds) if seconds is not None else None)
    if (h := f.mapping(hook, "exec", f"{path}.exec")) is not None:
        command = f.strings(h, "command", f"{path}.exec.command")
        return PreStop("exec", hook.line, sleep_in(command), command)
    for handler in ("httpGet", "tcpSocket"):
        if handler in hook:
            return PreStop(handler, hook.line)
    return None


def sleep_in(command: Sequence[str]) -> float | None:
    """Seconds a preStop command sleeps (``sleep 5``, ``sh -c "sleep 5 && …"``), if any."""
    if not command:
        return None
    words = list(command)
    if words[0].rsplit("/", 1)[-1] in _SHELLS and "-c" in words[1:]:
        script = " ".join(words[words.index("-c") + 1 :])
    else:
        script = shlex.join(words)
    total = 0.0
    for number, unit in _SLEEP.findall(script.replace("'", " ").replace('"', " ")):
        total += parse_duration(number + (unit or "s"), SLEEP)
    return total if total else None


def _service(f: _Fields) -> Service:
    spec = f.mapping(f.raw.body, "spec", "spec")
    ports = []
    for path, p in f.maps(spec, "ports", "spec.ports"):
        number = f.integer(p, "port", f"{path}.port")
        if number is None:
            continue
        target = f.int_or_str(p, "targetPort", f"{path}.targetPort")
        ports.append(
            ServicePort(
                port=number,
                target=number if target in (None, 0, "") else target,  # API defaulting
                line=p.line,
                name=f.text(p, "name", f"{path}.name"),
                protocol=f.text(p, "protocol", f"{path}.protocol") or "TCP",
                app_protocol=f.text(p, "appProtocol", f"{path}.appProtocol"),
            )
        )
    selector = f.mapping(spec, "selector", "spec.selector")
    return Service(
        ref=f.ref,
        location=f.raw.location,
        type=f.text(spec, "type", "spec.type") or "ClusterIP",
        selector={_str(k): _str(v) for k, v in selector.items()} if selector else None,
        ports=tuple(ports),
        headless=f.text(spec, "clusterIP", "spec.clusterIP") == "None",
        session_affinity=f.text(spec, "sessionAffinity", "spec.sessionAffinity") or "None",
        external_traffic_policy=f.text(spec, "externalTrafficPolicy", "spec.externalTrafficPolicy"),
        annotations=_annotations(f),
    )


def _autoscaler(f: _Fields) -> Autoscaler | None:
    spec = f.mapping(f.raw.body, "spec", "spec")
    target = f.mapping(spec, "scaleTargetRef", "spec.scaleTargetRef")
    if target is None:
        return None
    return Autoscaler(
        ref=f.ref,
        target=ObjectRef(
            f.text(target, "kind", "spec.scaleTargetRef.kind") or "",
            f.ref.namespace,
            f.text(target, "name", "spec.scaleTargetRef.name") or "",
        ),
        min_replicas=f.integer(spec, "minReplicas", "spec.minReplicas") or 1,
        location=f.raw.location,
    )


_POD_SEARCH_DEPTH = 8


def _resource(f: _Fields) -> Resource:
    """What another object says about pods; read leniently (a custom resource's fields are
    not ours to validate)."""
    body = f.raw.body
    meta = body.get("metadata")
    spec = body.get("spec")
    host = ""
    subsets: tuple[dict[str, str], ...] = ()
    if f.raw.kind == "DestinationRule" and isinstance(spec, YMap):
        host = _str(spec.get("host"))
        listed = spec.get("subsets")
        items = listed if isinstance(listed, list) else []
        subsets = tuple(_plain_labels(s.get("labels")) for s in items if isinstance(s, YMap))
    return Resource(
        ref=f.ref,
        location=f.raw.location,
        api_version=_str(body.get("apiVersion")),
        labels=_plain_labels(meta.get("labels")) if isinstance(meta, YMap) else {},
        pod_labels=tuple(_pod_labels(spec, _POD_SEARCH_DEPTH)),
        host=host,
        subsets=subsets,
    )


def _plain_labels(value: Any) -> dict[str, str]:
    if not isinstance(value, YMap):
        return {}
    return {_str(k): _str(v) for k, v in value.items() if not isinstance(v, dict | list)}


def _pod_labels(node: Any, depth: int) -> list[dict[str, str]]:
    """Labels of the pod templates (``metadata`` beside a ``spec`` with ``containers``) and
    ``podMetadata`` found under a custom resource's spec."""
    found: list[dict[str, str]] = []
    if depth <= 0:
        return found
    if isinstance(node, list):
        for item in node:
            found.extend(_pod_labels(item, depth - 1))
        return found
    if not isinstance(node, YMap):
        return found
    meta, spec = node.get("metadata"), node.get("spec")
    if isinstance(meta, YMap) and isinstance(spec, YMap) and "containers" in spec:
        found.append(_plain_labels(meta.get("labels")))
    pod_meta = node.get("podMetadata")
    if isinstance(pod_meta, YMap):
        found.append(_plain_labels(pod_meta.get("labels")))
    for key, value in node.items():
        if key != "metadata" and isinstance(value, YMap | list):
            found.extend(_pod_labels(value, depth - 1))
    return found
