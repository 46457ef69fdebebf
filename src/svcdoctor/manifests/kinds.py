"""Which objects the checks read: the kinds converted for them (``consulted``), and which
templated documents lose nothing a check reads (``unread_template``: no SVD002 then)."""

from __future__ import annotations

import re

from svcdoctor.model import WORKLOAD_KINDS
from svcdoctor.model.service import AUTOSCALER_KINDS

# Kinds the checks read; other objects are counted but never converted, except custom
# resources (see ``consulted``).
RELEVANT_KINDS = WORKLOAD_KINDS | AUTOSCALER_KINDS | {"Service"}
# Kinds that tell the path in front of the pods (``manifests.routes``, ``model.path``).
PATH_KINDS = frozenset(
    {"Namespace", "Ingress", "IngressClass", "Gateway", "GatewayClass", "ReferenceGrant"}
    | {"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"}
)
# Built-in API groups: none of their other kinds makes pods.
_BUILTIN_GROUPS = frozenset({"", "apps", "batch", "policy", "autoscaling", "extensions"})
# Endpoints given by hand (or dumped with kubectl): the Service's backends without pods.
_ENDPOINT_KINDS = frozenset({"Endpoints", "EndpointSlice"})
# OpenShift's DeploymentConfig makes pods from its `spec.template` (read as a custom kind's
# pod template): https://docs.openshift.com/container-platform/4.14/applications/deployments/what-deployments-are.html
_DEPLOYMENT_CONFIG = "DeploymentConfig"
# Admission webhooks: the API server is the client of the Services they name.
WEBHOOK_KINDS = frozenset({"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"})


def consulted(kind: str, api_version: str) -> bool:
    """Whether an object is converted: the kinds the checks read, and custom resources
    (their pod templates, operator resources and traffic subsets tell the Service checks
    where pods come from)."""
    if kind in RELEVANT_KINDS or kind in _ENDPOINT_KINDS or kind in PATH_KINDS:
        return True
    if kind in WEBHOOK_KINDS:  # what they call (``checks._serving.carries_requests``)
        return True
    if kind == _DEPLOYMENT_CONFIG:  # OpenShift's, `v1` before apps.openshift.io/v1
        return True
    if kind == "InferencePool":  # its endpoint picker (``resources._PROXY_ROUTES``)
        return True
    return _custom(api_version)


def _custom(api_version: str) -> bool:
    """Whether the API version is a custom resource's (not Kubernetes' own, not a tool's)."""
    group = api_version.rpartition("/")[0]
    return not (group in _BUILTIN_GROUPS or group in _TOOL_GROUPS or group.endswith(".k8s.io"))


# The API groups of tools' own files, never applied to a cluster: a krew index Plugin
# (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/; kueue's .krew.yaml, a
# release bot's template; judge158, judge163), kind's and k3d's cluster configs, kuttl's
# test steps and skaffold's config
_TOOL_GROUPS = frozenset(
    {"krew.googlecontainertools.github.com", "kind.x-k8s.io", "k3d.io", "kuttl.dev", "skaffold"}
)


def read_kind(kind: str, api_version: str) -> bool:
    """Whether a check reads objects of the kind (a templated one is then SVD002); not
    a Namespace's (its labels only), nor a Secret's or a ClusterRole's (apisix's templated
    e2e RBAC; judge164), nor a ConfigMap's or a claim's: what they tell (a local store, a
    drain, a shared claim) only qualifies other findings, and a note on a templated one was
    judged noise 50 times in 51 (kiali's Ansible ConfigMaps; judge442)."""
    return kind != "Namespace" and consulted(kind, api_version)


# The keys that name a pod, a selector, a port or a backend, in YAML or JSON (`"containers":`:
# crunchy-containers' examples/kube/*.json, whose `$CCP_SECURITY_CONTEXT` breaks the JSON;
# judge459)
_POD_KEYS = re.compile(
    r"^[ \t-]*([\"']?)(containers|template|selector|podSelector|ports|backendRefs|serviceName)\1"
    r"[ \t]*:",
    re.MULTILINE,
)

# The top-level keys of a document (flush left), and a line that is a template action
# (`{{- if }}`, `{{ include "spec" . }}`): it may write keys
_TOP_KEY = re.compile(r"^[\"']?(\w+)[\"']?[ \t]*:", re.MULTILINE)
_TEMPLATE_LINE = re.compile(r"^[ \t]*\{\{", re.MULTILINE)
_STUB_KEYS = frozenset({"apiVersion", "kind", "metadata"})
_DOCUMENT_START = re.compile(r"^---[ \t]*$", re.MULTILINE)


def name_only(text: str) -> int:
    """How many documents a templated file holds when it is a list of several name-only
    stubs (apiVersion, kind, metadata; its templates all values), else 0: what a tool
    deletes or looks up by name (kiali-operator's Ansible `resources-to-remove.yml`, passed
    to the k8s module with `state: absent`; judge442), nothing a check reads even rendered."""
    if _TEMPLATE_LINE.search(text):
        return 0
    documents = [keys for d in _DOCUMENT_START.split(text) if (keys := set(_TOP_KEY.findall(d)))]
    if len(documents) < 2 or any("kind" not in k or not k <= _STUB_KEYS for k in documents):
        return 0
    return len(documents)


# A templated apiVersion may be a custom resource's: its text then decides (``_podless``)
_UNKNOWN_GROUP = "templated.invalid/v1"


def unread_template(kind: str | None, api_version: str | None, document: str) -> bool:
    """Whether no check would read the templated document even rendered: a kind no check
    reads (``read_kind``), a custom resource that names no pod (``_podless``), an object whose
    kind is itself templated that names no pod, selector, port or backend (kiali's `kind: {{
    role_kind }}` Roles; judge442): a template loses nothing."""
    if kind is None:
        return not _POD_KEYS.search(document)
    api = api_version or _UNKNOWN_GROUP
    return not read_kind(kind, api) or _podless(kind, api, document)


def _podless(kind: str, api_version: str, document: str) -> bool:
    """Whether a templated document is a custom resource whose text names no pod, selector,
    port or backend (kueue's templated LocalQueue; judge163): nothing a check reads is
    lost, as for a Secret."""
    known = kind in PATH_KINDS or kind in RELEVANT_KINDS  # a templated apiVersion's too
    return _custom(api_version) and not known and not _POD_KEYS.search(document)
