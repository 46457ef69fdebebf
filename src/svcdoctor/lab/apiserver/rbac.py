"""Who a token is and what it may do: RBAC ``Rule``s read from Role files, bearer token
authentication and the 403s of authorization."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from svcdoctor.lab.apiserver.resources import SERVED, Target, qualified
from svcdoctor.lab.apiserver.status import StatusError


@dataclass(frozen=True, slots=True)
class Rule:
    """One RBAC PolicyRule, granted in ``namespace`` (a Role's) or everywhere (None: a
    ClusterRole's); ``"*"`` matches any verb, group or resource."""

    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]  # "pods", "pods/log"
    names: frozenset[str] = frozenset()  # resourceNames: only requests naming one of them
    namespace: str | None = None

    def allows(
        self, verb: str, group: str, resource: str, namespace: str | None, name: str | None
    ) -> bool:
        plural, _, sub = resource.partition("/")
        return (
            bool(self.verbs & {verb, "*"})
            and bool(self.groups & {group, "*"})
            and bool(self.resources & {resource, "*", f"*/{sub}" if sub else plural})
            and (not self.names or name in self.names)
            and (self.namespace is None or self.namespace == namespace)
        )


def rbac_rules(text: str, namespace: str) -> tuple[Rule, ...]:
    """The rules of the Roles and ClusterRoles in a YAML text (other kinds are ignored):
    Role rules hold in ``namespace`` (the file's ``NAMESPACE`` placeholder or any namespace
    it names is replaced by it), ClusterRole rules everywhere."""
    rules = []
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict) or doc.get("kind") not in ("Role", "ClusterRole"):
            continue
        scope = namespace if doc["kind"] == "Role" else None
        for rule in doc.get("rules") or []:
            rules.append(
                Rule(
                    frozenset(rule.get("verbs") or ()),
                    frozenset(rule.get("apiGroups") or ()),
                    frozenset(rule.get("resources") or ()),
                    frozenset(rule.get("resourceNames") or ()),
                    scope,
                )
            )
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a token is, and what it may do: ``rules`` when given, else all but ``forbidden``."""

    user: str
    rules: tuple[Rule, ...] | None
    forbidden: frozenset[tuple[str, str]] = frozenset()

    def allows(self, verb: str, t: Target) -> bool:
        r = SERVED[t.resource]
        if self.rules is None:
            key = f"{t.resource}/{t.subresource}" if t.subresource else t.resource
            return (verb, key) not in self.forbidden
        rbac = f"{r.plural}/{t.subresource}" if t.subresource else r.plural
        return any(rule.allows(verb, r.group, rbac, t.namespace, t.name) for rule in self.rules)


def authenticate(identities: Mapping[str, Identity], authorization: str) -> Identity:
    """Who the bearer token of an ``Authorization`` header is (401 for an unknown one)."""
    scheme, _, token = authorization.partition(" ")
    given = token.strip().encode()
    if scheme.lower() == "bearer":
        for known, identity in list(identities.items()):
            if hmac.compare_digest(given, known.encode()):
                return identity
    raise StatusError(401, "Unauthorized", "Unauthorized")


def authorize(who: Identity, verb: str, t: Target) -> None:
    """Refuse (403, worded as RBAC's) what ``who`` may not do."""
    if who.allows(verb, t):
        return
    r = SERVED[t.resource]
    subject = f'{qualified(r)} "{t.name}"' if t.name else qualified(r)
    what = f"{r.plural}/{t.subresource}" if t.subresource else r.plural
    scope = f'in the namespace "{t.namespace}"' if t.namespace else "at the cluster scope"
    details = {"group": r.group, "kind": r.plural, **({"name": t.name} if t.name else {})}
    raise StatusError(
        403,
        "Forbidden",
        f'{subject} is forbidden: User "{who.user}" cannot {verb} resource "{what}" '
        f'in API group "{r.group}" {scope}',
        details,
    )
