"""Objects of other kinds that the Service checks consult, read from raw objects: autoscalers
(their minimum owns the replica count), and custom resources, webhook configurations and
Argo Rollouts' experiments (``model.resource``). Read leniently: their fields are not ours
to validate."""

from __future__ import annotations

from typing import Any

from svcdoctor.manifests.fields import Fields
from svcdoctor.manifests.kinds import WEBHOOK_KINDS
from svcdoctor.manifests.yamlnodes import YMap, text_of
from svcdoctor.model import ObjectRef, Resource
from svcdoctor.model.service import SCALED_OBJECT, Autoscaler


def autoscaler(f: Fields) -> Autoscaler | None:
    """An autoscaler's target and minimum; a KEDA ScaledObject's target kind defaults to
    Deployment, its minimum to 0 (https://keda.sh/docs/2.16/reference/scaledobject-spec/)."""
    spec, keda = f.mapping(f.raw.body, "spec", "spec"), f.raw.kind == SCALED_OBJECT
    target = f.mapping(spec, "scaleTargetRef", "spec.scaleTargetRef")
    if target is None:
        return None
    field = "minReplicaCount" if keda else "minReplicas"
    least = f.integer(spec, field, f"spec.{field}")
    kind = f.text(target, "kind", "spec.scaleTargetRef.kind") or ("Deployment" if keda else "")
    name = f.text(target, "name", "spec.scaleTargetRef.name") or ""
    return Autoscaler(
        ref=f.ref,
        target=ObjectRef(kind, f.ref.namespace, name),
        min_replicas=(0 if keda else 1) if least is None else least,
        min_placeholder=f.placeholder(spec, field),
        location=f.raw.location,
    )


def other_autoscaler(f: Fields) -> Autoscaler | None:
    """A custom resource that scales a workload by `spec.scaleTargetRef`, as an HPA does (the
    Custom Pod Autoscaler's CustomPodAutoscaler, Datadog's WatermarkPodAutoscaler; judge476):
    it owns the replica count, its minimum unknown unless `spec.minReplicas` says it."""
    spec = f.raw.body.get("spec")
    target = spec.get("scaleTargetRef") if isinstance(spec, YMap) else None
    if not isinstance(spec, YMap) or not isinstance(target, YMap):
        return None
    kind, name, least = target.get("kind"), target.get("name"), spec.get("minReplicas")
    if not (isinstance(kind, str) and isinstance(name, str) and kind and name):
        return None
    count = least if isinstance(least, int) and not isinstance(least, bool) else None
    return Autoscaler(
        ref=f.ref,
        target=ObjectRef(kind, f.ref.namespace, name),
        min_replicas=1 if count is None else count,
        min_placeholder=count is None,
        location=f.raw.location,
    )


_POD_SEARCH_DEPTH = 8


def resource(f: Fields) -> Resource:
    """What another object says about pods; read leniently (a custom resource's fields are
    not ours to validate)."""
    body = f.raw.body
    meta = body.get("metadata")
    spec = body.get("spec")
    host = ""
    subsets: tuple[dict[str, str], ...] = ()
    if f.raw.kind == "DestinationRule" and isinstance(spec, YMap):
        host = text_of(spec.get("host"))
        listed = spec.get("subsets")
        items = listed if isinstance(listed, list) else []
        subsets = tuple(_plain_labels(s.get("labels")) for s in items if isinstance(s, YMap))
    selector: dict[str, str] = {}
    scrapes: tuple[str, ...] = ()
    if f.raw.kind == "ServiceMonitor" and isinstance(spec, YMap):
        chosen = spec.get("selector")
        selector = _plain_labels(chosen.get("matchLabels")) if isinstance(chosen, YMap) else {}
        listed = spec.get("endpoints")
        items = listed if isinstance(listed, list) else []
        scrapes = tuple(text_of(e.get("port")) for e in items if isinstance(e, YMap))
    ports: tuple[str, ...] = ()
    if f.raw.kind == "SidecarSet" and isinstance(spec, YMap):
        # OpenKruise injects its containers into the pods its selector matches:
        # https://openkruise.io/docs/user-manuals/sidecarset
        chosen = spec.get("selector")
        selector = _plain_labels(chosen.get("matchLabels")) if isinstance(chosen, YMap) else {}
        ports = _port_names(spec.get("containers"))
    webhooks = _webhooks(body.get("webhooks")) if f.raw.kind in WEBHOOK_KINDS else ()
    if f.raw.kind == "TrafficSplit" and isinstance(spec, YMap):
        host = text_of(spec.get("service"))  # the SMI apex Service it splits
    api_version = text_of(body.get("apiVersion"))
    group = api_version.rpartition("/")[0]  # Resource.group, before there is a Resource
    upstreams = _upstreams(spec, *_PROXY_ROUTES[group]) if group in _PROXY_ROUTES else ()
    return Resource(
        ref=f.ref,
        location=f.raw.location,
        api_version=api_version,
        labels=_plain_labels(meta.get("labels")) if isinstance(meta, YMap) else {},
        annotations=_plain_labels(meta.get("annotations")) if isinstance(meta, YMap) else {},
        pod_labels=tuple(_pod_labels(spec, _POD_SEARCH_DEPTH)),
        host=host,
        subsets=subsets,
        webhooks=webhooks,
        selector=selector,
        scrapes=tuple(s for s in scrapes if s),
        ports=ports,
        upstreams=upstreams,
    )


# Layer-7 proxies' own route objects, by API group: the key of a list of backends, the key
# naming a backend's Service, and the setting (key, value) that sends it to the ClusterIP
# instead of the pods. Contour programs Envoy with each Service's endpoints (EDS:
# HTTPProxy's and ExtensionService's `services[].name`, https://projectcontour.io/docs/main/config/api/);
# NGINX's VirtualServer sends to the endpoints unless `use-cluster-ip: true`
# (https://docs.nginx.com/nginx-ingress-controller/configuration/virtualserver-and-virtualserverroute-resources/#upstream);
# Traefik's IngressRoute unless `nativeLB: true`
# (https://doc.traefik.io/traefik/routing/providers/kubernetes-crd/); APISIX's ApisixRoute
# unless `resolveGranularity: service`
# (https://apisix.apache.org/docs/ingress-controller/concepts/apisix_route/). judge164, judge165.
# Envoy Gateway's policies call their extension Services (EnvoyExtensionPolicy's extProc,
# SecurityPolicy's extAuth: `backendRefs`) through Envoy clusters of the Services' endpoints
# (https://gateway.envoyproxy.io/docs/tasks/extensibility/ext-proc/; aibrix's
# gateway-plugins, judge256). So does a gateway its InferencePool's endpoint picker, the one
# Service its `endpointPickerRef` (`extensionRef` before v1) names: Istio and kgateway make
# an Envoy cluster of its endpoints
# (https://gateway-api-inference-extension.sigs.k8s.io/api-types/inferencepool/;
# llm-d-inference-scheduler, vllm-project/semantic-router; judge426).
_PROXY_ROUTES: dict[str, tuple[str, str, tuple[str, object] | None]] = {
    "gateway.envoyproxy.io": ("backendRefs", "name", None),
    "inference.networking.k8s.io": ("endpointPickerRef", "name", None),
    "inference.networking.x-k8s.io": ("extensionRef", "name", None),
    "projectcontour.io": ("services", "name", None),
    "k8s.nginx.org": ("upstreams", "service", ("use-cluster-ip", True)),
    "traefik.io": ("services", "name", ("nativeLB", True)),
    "traefik.containo.us": ("services", "name", ("nativeLB", True)),
    "apisix.apache.org": ("backends", "serviceName", ("resolveGranularity", "service")),
}
_UPSTREAM_DEPTH = 6


def _upstreams(
    node: Any,
    key: str,
    name: str,
    clusterip: tuple[str, object] | None,
    depth: int = _UPSTREAM_DEPTH,
) -> tuple[str, ...]:
    """The Services a proxy's route object sends to pod by pod: each item of a ``key`` list
    (or the one ``key`` mapping) under its spec that names one by ``name`` and does not set
    ``clusterip``."""
    found: list[str] = []
    if depth <= 0:
        return ()
    if isinstance(node, list):
        for item in node:
            found.extend(_upstreams(item, key, name, clusterip, depth - 1))
    elif isinstance(node, YMap):
        for k, value in node.items():
            items = [value] if isinstance(value, YMap) else value
            if k == key and isinstance(items, list):
                found.extend(
                    text_of(b.get(name))
                    for b in items
                    if isinstance(b, YMap)
                    and b.get(name)
                    and (clusterip is None or b.get(clusterip[0]) != clusterip[1])
                )
            elif isinstance(value, YMap | list):
                found.extend(_upstreams(value, key, name, clusterip, depth - 1))
    return tuple(found)


def _port_names(containers: object) -> tuple[str, ...]:
    """The names of the ports a list of containers declares."""
    items = containers if isinstance(containers, list) else []
    return tuple(
        name
        for c in items
        if isinstance(c, YMap) and isinstance(ports := c.get("ports"), list)
        for p in ports
        if isinstance(p, YMap) and (name := text_of(p.get("name")))
    )


def rollout_experiments(f: Fields) -> list[Resource]:
    """The Experiments a Rollout's canary steps create, as the resources that make their
    pods: each ``steps[].experiment.templates[]`` runs pods of the Rollout's template
    (``specRef``) labelled with its ``metadata.labels`` ("Metadata sets labels and
    annotations to use for the RS created from the template": RolloutExperimentTemplate in
    https://github.com/argoproj/argo-rollouts/blob/master/pkg/apis/rollouts/v1alpha1/types.go)."""
    spec = f.raw.body.get("spec")
    strategy = spec.get("strategy") if isinstance(spec, YMap) else None
    canary = strategy.get("canary") if isinstance(strategy, YMap) else None
    steps = canary.get("steps") if isinstance(canary, YMap) else None
    found = []
    for step in steps if isinstance(steps, list) else []:
        experiment = step.get("experiment") if isinstance(step, YMap) else None
        templates = experiment.get("templates") if isinstance(experiment, YMap) else None
        for t in templates if isinstance(templates, list) else []:
            meta = t.get("metadata") if isinstance(t, YMap) else None
            labels = _plain_labels(meta.get("labels")) if isinstance(meta, YMap) else {}
            if labels:
                name = f"{f.ref.name}-{text_of(t.get('name'))}"
                found.append(
                    Resource(
                        ref=ObjectRef("Experiment", f.ref.namespace, name),
                        location=f.raw.location,
                        api_version="argoproj.io/v1alpha1",
                        pod_labels=(labels,),
                    )
                )
    return found


def _webhooks(listed: Any) -> tuple[tuple[str, str, str, int, int], ...]:
    """(namespace, Service, failurePolicy, port, timeoutSeconds) of each webhook that calls a
    Service; the policy defaults to Fail, the port to 443 and the timeout to 10 s in
    admissionregistration.k8s.io/v1
    (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#failure-policy,
    #timeouts)."""
    found = []
    for hook in listed if isinstance(listed, list) else []:
        config = hook.get("clientConfig") if isinstance(hook, YMap) else None
        service = config.get("service") if isinstance(config, YMap) else None
        if isinstance(hook, YMap) and isinstance(service, YMap):
            policy = text_of(hook.get("failurePolicy")) or "Fail"
            port, timeout = service.get("port"), hook.get("timeoutSeconds")
            found.append(
                (
                    text_of(service.get("namespace")),
                    text_of(service.get("name")),
                    policy,
                    port if isinstance(port, int) and not isinstance(port, bool) else 443,
                    timeout if isinstance(timeout, int) and not isinstance(timeout, bool) else 10,
                )
            )
    return tuple(found)


def _plain_labels(value: Any) -> dict[str, str]:
    if not isinstance(value, YMap):
        return {}
    return {text_of(k): text_of(v) for k, v in value.items() if not isinstance(v, dict | list)}


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
