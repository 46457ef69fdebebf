"""A small, honest Kubernetes API server for the lab, in memory, over HTTPS.

``ObjectStore`` holds Kubernetes-shaped objects (the resources of ``SERVED``:
``svcdoctor.cluster.resources.RESOURCES`` plus batch/v1 Jobs) and a bounded log of their
changes; ``ApiServer`` serves it the way kube-apiserver does for the calls kubectl and
svcdoctor make: version, discovery, get, list (selectors, pagination over a consistent
snapshot, Table output), watch (resourceVersions, bookmarks, ``410 Gone``) and ``pods/log``
(also followed), behind bearer tokens authorized per verb (``forbidden`` pairs, or RBAC
``Rule``s read from a Role file with ``rbac_rules``).

Writes (``WRITABLE``): create, delete, deletecollection and patch of ConfigMaps, Pods and
Jobs, patch of Deployments, StatefulSets and Nodes (``kubectl cordon``), and pod evictions
(``POST pods/NAME/eviction``, policy/v1: a handler on ``EVICTION`` may refuse one, as a
PodDisruptionBudget does with 429, or act on it; otherwise the pod is deleted). Creates fill
the metadata (name from ``generateName``, uid, resourceVersion, creationTimestamp,
namespace) and the defaults kubectl shows, answer ``409 AlreadyExists`` and ``422 Invalid``
with real Status objects, and honour ``dryRun=All``. Deletes take ``gracePeriodSeconds`` and
``propagationPolicy`` from the query or a DeleteOptions body, and preconditions. Patches are
JSON merge patches, JSON patches (RFC 6902) and strategic merge patches (maps merged; the
lists Kubernetes merges by a key — containers, volumes, env, ports, volumeMounts … — merged
by it, other lists replaced; ``$patch: replace|delete`` honoured, other directives ignored).
Bodies are JSON: kubectl's typed generators (``kubectl create configmap|job NAME``) send
protobuf and get ``415``; ``kubectl create -f``, ``kubectl run``, deletes and patches send
JSON. ``/openapi/v3`` lists only the writable kinds' PATCH operations: enough for kubectl to
leave field validation and dry runs to the server.

The lab acts on writes through one hook per resource, ``ApiServer.admit(resource,
handler)``. ``handler(Admission)`` runs on the server's event loop before the store changes
(sync or async) and

* refuses by raising ``StatusError`` (``invalid(...)`` builds a 422): nothing is stored;
* returns None: the server does the default — store the created or patched object, or
  remove the deleted one now;
* returns an object: it is stored instead (create, patch), or, for a delete, stored as the
  object being deleted gracefully (the lab removes it later with ``ObjectStore.delete``);
* is called with ``dry_run`` set for ``dryRun=All`` requests: it may refuse, must not act,
  and nothing is stored whatever it returns.

The server stores the admitted object before it yields to the event loop again, so a handler
that schedules work (``loop.call_soon``, a task) finds it stored. The lab updates status with
``ObjectStore.put``/``delete``. Each object is encoded once, when it is put; lists and
watches join the stored bytes. A store without Namespace objects serves every namespace;
once it holds some, creates in other namespaces are ``404 NotFound``.

The modules, from the bottom up: ``resources`` (what is served, URL targets), ``status``
(Status errors), ``selectors`` (label and field selectors), ``store``, ``validation``
(and defaults), ``patching``, ``admission``, ``rbac``, ``tables``, ``query``; the
server's parts ``discovery``, ``watch``, ``logs``, ``writes``, ``faults`` (what it injects
when asked: 429s, 5xx, slow bodies, cut and expired watches, its own loss); ``server``.
"""

from svcdoctor.lab.apiserver.admission import Admission, Handler, Propagation, Verb
from svcdoctor.lab.apiserver.faults import Fault, FaultError, FaultKind, parse_fault
from svcdoctor.lab.apiserver.patching import PatchType, json_patch, merge_patch
from svcdoctor.lab.apiserver.rbac import Rule, rbac_rules
from svcdoctor.lab.apiserver.resources import EVICTION, SERVED, WRITABLE
from svcdoctor.lab.apiserver.server import ApiServer
from svcdoctor.lab.apiserver.status import StatusError, invalid
from svcdoctor.lab.apiserver.store import LogSource, ObjectStore
from svcdoctor.model.patch import strategic_merge_patch  # the one strategic merge, with fix

__all__ = [
    "EVICTION",
    "SERVED",
    "WRITABLE",
    "Admission",
    "ApiServer",
    "Fault",
    "FaultError",
    "FaultKind",
    "Handler",
    "LogSource",
    "ObjectStore",
    "PatchType",
    "Propagation",
    "Rule",
    "StatusError",
    "Verb",
    "invalid",
    "json_patch",
    "merge_patch",
    "parse_fault",
    "rbac_rules",
    "strategic_merge_patch",
]
