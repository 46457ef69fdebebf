"""The domain model: frozen dataclasses shared by every command."""

from svcdoctor.model.finding import Cause, Finding, Location, ObjectRef, Severity
from svcdoctor.model.inventory import Inventory, selector_matches, targets
from svcdoctor.model.service import Autoscaler, Service, ServicePort
from svcdoctor.model.workload import (
    BATCH_KINDS,
    DEFAULT_GRACE_SECONDS,
    SERVING_KINDS,
    WORKLOAD_KINDS,
    Container,
    ContainerPort,
    PodTemplate,
    PreStop,
    Probe,
    Workload,
)

__all__ = [
    "BATCH_KINDS",
    "DEFAULT_GRACE_SECONDS",
    "SERVING_KINDS",
    "WORKLOAD_KINDS",
    "Autoscaler",
    "Cause",
    "Container",
    "ContainerPort",
    "Finding",
    "Inventory",
    "Location",
    "ObjectRef",
    "PodTemplate",
    "PreStop",
    "Probe",
    "Service",
    "ServicePort",
    "Severity",
    "Workload",
    "selector_matches",
    "targets",
]
