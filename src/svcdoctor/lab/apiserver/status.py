"""The errors the server answers with Status objects, worded as kube-apiserver words them."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from svcdoctor.lab.apiserver.resources import BY_KIND, SERVED, qualified


class StatusError(Exception):
    """An error the server answers with a Status object (``code``, ``reason``, ``message``,
    optional ``details``); admission handlers raise it to refuse a write."""

    def __init__(
        self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if details:
            self.status["details"] = dict(details)

    @property
    def code(self) -> int:
        return int(self.status["code"])


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def invalid(obj: Mapping[str, Any], field_path: str, value: Any, detail: str) -> StatusError:
    """``422 Invalid`` for ``obj`` as kube-apiserver words it: ``Job.batch "x" is invalid:
    FIELD: Invalid value: VALUE: DETAIL``."""
    return invalid_causes(obj, [Cause(Why.INVALID, field_path, value, detail)])


class Why(enum.StrEnum):
    """The reasons of a 422's causes (apimachinery's ``field.ErrorType``)."""

    REQUIRED = "FieldValueRequired"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    DUPLICATE = "FieldValueDuplicate"
    NOT_FOUND = "FieldValueNotFound"

    @property
    def words(self) -> str:
        """How a cause's message starts."""
        return {
            Why.REQUIRED: "Required value",
            Why.INVALID: "Invalid value",
            Why.NOT_SUPPORTED: "Unsupported value",
            Why.DUPLICATE: "Duplicate value",
            Why.NOT_FOUND: "Not found",
        }[self]


@dataclass(frozen=True, slots=True)
class Cause:
    """One field error of a 422, as apimachinery's ``field.Error``."""

    reason: Why
    field: str
    value: Any = None
    detail: str = ""

    def message(self) -> str:
        head = self.reason.words
        if self.reason != Why.REQUIRED:
            head += ": " + json.dumps(self.value, ensure_ascii=False)
        return f"{head}: {self.detail}" if self.detail else head


def invalid_causes(obj: Mapping[str, Any], causes: Sequence[Cause]) -> StatusError:
    resource = BY_KIND.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    r = SERVED[resource] if resource else None
    kind = str(obj.get("kind") or "Object")
    qualified = f"{kind}.{r.group}" if r and r.group else kind
    found = obj.get("metadata")
    meta: Mapping[str, Any] = found if isinstance(found, dict) else {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    texts = [f"{c.field}: {c.message()}" for c in causes]
    listed = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details: dict[str, Any] = {"name": name, **({"group": r.group} if r and r.group else {})}
    details["kind"] = kind
    details["causes"] = [
        {"reason": c.reason, "message": c.message(), "field": c.field} for c in causes
    ]
    return StatusError(422, "Invalid", f'{qualified} "{name}" is invalid: {listed}', details)


def already_exists(resource: str, name: str) -> StatusError:
    r = SERVED[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    return StatusError(409, "AlreadyExists", f'{qualified(r)} "{name}" already exists', details)


def conflict(resource: str, name: str, why: str) -> StatusError:
    r = SERVED[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    message = f'Operation cannot be fulfilled on {qualified(r)} "{name}": {why}'
    return StatusError(409, "Conflict", message, details)


def not_found(resource: str, name: str) -> StatusError:
    r = SERVED[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    return StatusError(404, "NotFound", f'{qualified(r)} "{name}" not found', details)


PATH_NOT_FOUND = "the server could not find the requested resource"


def method_not_allowed() -> StatusError:
    return StatusError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def success(resource: str, name: str, uid: str) -> dict[str, Any]:
    """The Status a finished delete answers."""
    r = SERVED[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {**details, "uid": uid},
    }
