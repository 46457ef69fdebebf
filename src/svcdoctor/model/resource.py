"""Objects of other kinds that the Service checks consult (they are not checked)."""

from __future__ import annotations

from dataclasses import dataclass, field

from svcdoctor.model.finding import Location, ObjectRef


@dataclass(frozen=True, slots=True)
class Resource:
    """An object that is neither a built-in workload nor a Service, kept for what it says
    about pods: a custom kind with a pod template (LeaderWorkerSet, Knative Service, a
    training job…: ``pod_labels``), an operator's custom resource (its name and labels), a
    traffic split (an Istio DestinationRule: ``host`` and the labels of its ``subsets``; an
    SMI TrafficSplit: ``host``, its apex Service), a Prometheus ServiceMonitor
    (``selector``, ``scrapes``: the ports it scrapes), or endpoints given as objects
    (``Endpoints``, ``EndpointSlice``), or a Namespace (its labels and annotations decide
    mesh injection and load balancer readiness gates).
    """

    ref: ObjectRef
    location: Location
    api_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    pod_labels: tuple[dict[str, str], ...] = ()
    host: str = ""
    subsets: tuple[dict[str, str], ...] = ()
    # a Prometheus ServiceMonitor: the Services it selects and the ports it scrapes; an
    # OpenKruise SidecarSet: the pods it selects and the port names its containers add
    selector: dict[str, str] = field(default_factory=dict)
    scrapes: tuple[str, ...] = ()
    ports: tuple[str, ...] = ()
    # an admission webhook configuration: (namespace, Service, failurePolicy) per webhook
    # namespace, Service, failure policy, port, timeout seconds
    webhooks: tuple[tuple[str, str, str, int, int], ...] = ()
    # a layer-7 proxy's own route object (Contour's HTTPProxy, NGINX's VirtualServer…): the
    # Services of its namespace it sends to pod by pod, balancing each request
    upstreams: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        """The API group (``""`` for core/v1)."""
        return self.api_version.rpartition("/")[0]
