"""Property tests: the line-keeping YAML reader agrees with PyYAML, and selector matching
and Service targeting obey the Kubernetes rules."""

from __future__ import annotations

import math
import re
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdoctor.manifests.yamlnodes import YList, YMap, compose_documents, to_python
from svcdoctor.model import (
    Inventory,
    Location,
    ObjectRef,
    PodTemplate,
    Service,
    Workload,
    selector_matches,
)

# --- the YAML reader ---------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
json_like = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=25,
)
mappings = st.dictionaries(st.text(max_size=10), json_like, max_size=5)
dump_options = st.fixed_dictionaries(
    {"default_flow_style": st.sampled_from([False, True, None]), "allow_unicode": st.booleans()}
)


YAML_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


def read(text: str) -> list[Any]:
    roots, error = compose_documents(text)
    assert error is None, error
    return [None if root is None else to_python(root) for root in roots]


def same(a: Any, b: Any) -> bool:
    """Equality that also requires the same types (``1 == 1.0 == True`` in Python)."""
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and list(a) == list(b)
            and all(type(k) is type(k2) for k, k2 in zip(a, b, strict=True))
            and all(same(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b


def lines_are_set(value: Any) -> bool:
    if isinstance(value, YMap):
        keys_ok = set(value.key_lines) == set(value) and all(
            value.line <= n for n in value.key_lines.values()
        )
        return value.line >= 1 and keys_ok and all(map(lines_are_set, value.values()))
    if isinstance(value, YList):
        return value.line >= 1 and all(map(lines_are_set, value))
    return not isinstance(value, dict | list)  # every collection is a YMap or YList


@settings(max_examples=100, deadline=None)
@given(json_like, dump_options)
def test_a_single_document_reads_exactly_as_safe_load(data: Any, options: dict[str, Any]) -> None:
    text = yaml.safe_dump(data, **options)
    (value,) = read(text)
    assert same(value, yaml.safe_load(text)), text
    assert lines_are_set(value)


@settings(max_examples=60, deadline=None)
@given(st.lists(json_like, min_size=1, max_size=5), dump_options)
def test_several_documents_read_exactly_as_safe_load_all(
    docs: list[Any], options: dict[str, Any]
) -> None:
    text = yaml.safe_dump_all(docs, explicit_start=True, **options)
    values = read(text)
    expected = list(yaml.safe_load_all(text))
    assert len(values) == len(expected)
    assert all(map(same, values, expected)), text


@settings(max_examples=50, deadline=None)
@given(st.lists(mappings, min_size=1, max_size=6), dump_options)
def test_top_level_mappings_start_on_strictly_increasing_lines(
    docs: list[dict[str, Any]], options: dict[str, Any]
) -> None:
    text = yaml.safe_dump_all(docs, **options)
    values = read(text)
    assert len(values) == len(docs)
    lines = [v.line for v in values]
    assert all(isinstance(v, YMap) for v in values)
    assert lines == sorted(set(lines)), (lines, text)
    assert lines[0] >= 1
    # YAML also breaks lines at NEL, LS and PS (which safe_dump writes raw with allow_unicode).
    assert lines[-1] <= len(YAML_LINE_BREAK.findall(text)) + 1
    # Each document starts at or after the `---` that separates it from the one before
    # (``--- {}`` puts a flow mapping on the marker's line).
    separators = [
        n for n, line in enumerate(YAML_LINE_BREAK.split(text), start=1) if line.startswith("---")
    ]
    for line, separator in zip(lines[1:], separators, strict=True):
        assert line >= separator


# --- selectors and targeting ----------------------------------------------------------------

label_keys = st.sampled_from(["app", "tier", "version", "app.kubernetes.io/name", "team", "zone"])
label_values = st.sampled_from(["api", "web", "v1", "v2", "", "true", "1"])
label_sets = st.dictionaries(label_keys, label_values, max_size=6)


@given(label_sets)
def test_an_empty_selector_never_matches(labels: dict[str, str]) -> None:
    assert not selector_matches({}, labels)


@given(label_sets.filter(bool), label_sets)
def test_a_selector_matches_every_superset_of_it(
    selector: dict[str, str], extra: dict[str, str]
) -> None:
    labels = {**extra, **selector}
    assert selector_matches(selector, labels)


@given(label_sets.filter(bool), label_sets, st.data())
def test_changing_or_dropping_one_selected_label_breaks_the_match(
    selector: dict[str, str], extra: dict[str, str], data: st.DataObject
) -> None:
    labels = {**extra, **selector}
    key = data.draw(st.sampled_from(sorted(selector)))
    changed = {**labels, key: labels[key] + "-other"}
    assert not selector_matches(selector, changed)
    dropped = {k: v for k, v in labels.items() if k != key}
    assert not selector_matches(selector, dropped)


def workload(namespace: str, labels: dict[str, str], kind: str = "Deployment") -> Workload:
    return Workload(
        ref=ObjectRef(kind, namespace, "backend"),
        location=Location("app.yaml", 10),
        template=PodTemplate(labels=labels, annotations={}, containers=(), line=12),
    )


def service(namespace: str, selector: dict[str, str] | None) -> Service:
    return Service(
        ref=ObjectRef("Service", namespace, "frontend"),
        location=Location("app.yaml", 1),
        selector=selector,
    )


namespaces = st.sampled_from(["", "default", "shop", "kube-system"])


@given(namespaces, namespaces, label_sets.filter(bool), label_sets)
def test_a_service_targets_matching_pods_only_in_the_namespace_they_end_up_in(
    svc_ns: str, pod_ns: str, selector: dict[str, str], extra: dict[str, str]
) -> None:
    svc = service(svc_ns, selector)
    pods = workload(pod_ns, {**extra, **selector})
    inventory = Inventory(workloads=(pods,), services=(svc,))
    # an object without a namespace is in the one it is applied to: "default" here
    expected = (pods,) if (svc_ns or "default") == (pod_ns or "default") else ()
    assert inventory.targeted(svc) == expected
    assert inventory.services_of(pods) == ((svc,) if expected else ())


@given(namespaces, label_sets)
def test_a_service_without_a_selector_targets_nothing(ns: str, labels: dict[str, str]) -> None:
    svc = service(ns, None)
    inventory = Inventory(workloads=(workload(ns, labels),), services=(svc,))
    assert inventory.targeted(svc) == ()


@given(namespaces, label_sets.filter(bool))
def test_batch_workloads_never_back_a_service(ns: str, selector: dict[str, str]) -> None:
    svc = service(ns, selector)
    job = workload(ns, dict(selector), kind="Job")
    assert Inventory(workloads=(job,), services=(svc,)).targeted(svc) == ()
