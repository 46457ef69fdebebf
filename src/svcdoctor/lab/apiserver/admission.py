"""The lab's hook on writes: an ``Admission`` (one write as a handler sees it) and the
``Handler`` that refuses, accepts or replaces it."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from svcdoctor.lab.apiserver.patching import PatchType


class Verb(enum.StrEnum):
    """The writes an admission handler sees."""

    CREATE = "create"
    DELETE = "delete"
    PATCH = "patch"


class Propagation(enum.StrEnum):
    """A delete's propagationPolicy: what happens to the objects the deleted one owns."""

    ORPHAN = "Orphan"
    BACKGROUND = "Background"
    FOREGROUND = "Foreground"


@dataclass(frozen=True, slots=True)
class Admission:
    """One write, as an admission handler sees it (see the module docstring).

    ``obj`` is what the server would store: the created object (metadata and defaults
    filled), the patched object, or for a delete the stored object marked for deletion
    (``deletionTimestamp``, ``deletionGracePeriodSeconds``); ``old`` the stored object
    before a patch or delete. ``grace_seconds`` and ``propagation`` are a delete's options
    as asked (None: not asked: pods then use ``terminationGracePeriodSeconds``, and the
    default propagation is Orphan for Jobs, Background otherwise); ``patch_type``
    (strategic | merge | json) and ``patch`` a patch's, decoded.
    """

    verb: Verb
    resource: str
    namespace: str
    name: str
    obj: dict[str, Any]
    old: dict[str, Any] | None = None
    dry_run: bool = False
    grace_seconds: int | None = None
    propagation: Propagation | None = None
    patch_type: PatchType | None = None
    patch: Any = None


Handler = Callable[[Admission], dict[str, Any] | Awaitable[dict[str, Any] | None] | None]
"""An admission handler: refuse (raise ``StatusError``), accept (None) or replace (a dict)."""
