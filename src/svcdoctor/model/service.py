"""Facts about Services and autoscalers."""

from __future__ import annotations

from dataclasses import dataclass, field

from svcdoctor.model.finding import Location, ObjectRef

# What a Service selector's null value (a template's, such as ytt's `app: #@ x`) selects: no
# label value can hold `<` (https://kubernetes.io/docs/concepts/overview/working-with-objects/
# labels/#syntax-and-character-set), so it matches no pod, not even one whose label is null too.
# In a strategic-merge patch, a null deletes the key (kustomize's ``_merge_service``).
NULL_SELECTED = "<null>"


@dataclass(frozen=True, slots=True)
class ServicePort:
    port: int
    target: int | str  # targetPort, defaulted to ``port``
    line: int
    name: str | None = None
    protocol: str = "TCP"
    app_protocol: str | None = None


@dataclass(frozen=True, slots=True)
class Service:
    """A core/v1 Service. ``selector`` is ``None`` for selector-less Services."""

    ref: ObjectRef
    location: Location
    type: str = "ClusterIP"
    selector: dict[str, str] | None = None
    ports: tuple[ServicePort, ...] = ()
    headless: bool = False
    session_affinity: str = "None"
    external_traffic_policy: str | None = None
    internal_traffic_policy: str | None = None  # Local: a node's clients reach its pods only
    annotations: dict[str, str] = field(default_factory=dict)
    traffic_distribution: str | None = None  # spec.trafficDistribution (PreferClose, ...)
    labels: dict[str, str] = field(default_factory=dict)  # its own (what monitors select)
    # publishNotReadyAddresses: its endpoints are every pod, ready or not, terminating or not
    publish_not_ready: bool = False
    load_balancer_class: str | None = None  # spec.loadBalancerClass: which LB implements it
    # the folder of the kustomization whose labels create the selector: the file has none
    selector_created_by: str = ""


# KEDA's ScaledObject: https://keda.sh/docs/2.16/reference/scaledobject-spec/; the
# Predictive Horizontal Pod Autoscaler, an HPA's spec with a model beside it
# (https://predictive-horizontal-pod-autoscaler.readthedocs.io/; its examples; judge406)
SCALED_OBJECT = "ScaledObject"
AUTOSCALER_KINDS = frozenset(
    {"HorizontalPodAutoscaler", SCALED_OBJECT, "PredictiveHorizontalPodAutoscaler"}
)


@dataclass(frozen=True, slots=True)
class Autoscaler:
    """A HorizontalPodAutoscaler, or a KEDA ScaledObject (which makes one): it owns the
    replica count of its target."""

    ref: ObjectRef
    target: ObjectRef
    min_replicas: int = 1
    min_placeholder: bool = False  # its minimum is a placeholder a tool fills in: unknown
    location: Location | None = None  # where it was read (None: made in code)

    @property
    def min_field(self) -> str:
        """The field that sets its minimum (KEDA's ``minReplicaCount``)."""
        return "minReplicaCount" if self.ref.kind == SCALED_OBJECT else "minReplicas"
