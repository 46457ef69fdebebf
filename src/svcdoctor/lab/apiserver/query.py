"""What the requests share: query flags and integers, selections, JSON responses."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from svcdoctor.lab.apiserver.resources import Target
from svcdoctor.lab.apiserver.selectors import Requirement, parse_fields, parse_labels
from svcdoctor.lab.apiserver.status import bad_request
from svcdoctor.lab.apiserver.store import Selection


def is_true(value: str | None) -> bool:
    return value in ("1", "t", "T", "true", "TRUE", "True")


def int_param(query: Mapping[str, str], name: str, default: int) -> int:
    value = query.get(name, "")
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise bad_request(f"invalid {name}: {value!r} is not an integer") from None


def json_response(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type="application/json")


def selection(t: Target, query: Mapping[str, str]) -> Selection:
    fields = parse_fields(t.resource, query.get("fieldSelector", ""))
    if t.name:  # a watch on one object's URL
        fields.append(Requirement("metadata.name", "=", frozenset({t.name})))
    return Selection(t.resource, t.namespace, parse_labels(query.get("labelSelector", "")), fields)
