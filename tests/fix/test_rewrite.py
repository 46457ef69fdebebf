"""Round-trip rewriting: only the changed nodes' lines move, everything else is
byte-identical (comments, quoting, flow style, anchors, documents, line endings)."""

from __future__ import annotations

import difflib
from typing import Any

import pytest
import yaml

pytest.importorskip("ruamel.yaml")

from svcdoctor.fix import CannotRewrite, Target, rewrite

GRACE = {"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 45}}}}
PRESTOP = {
    "spec": {
        "template": {
            "spec": {
                "containers": [{"name": "web", "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}]
            }
        }
    }
}

DEPLOYMENT = """\
# leading comment: kept
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web   # trailing comment
  namespace: shop
  annotations: {a: "1", b: 'two'}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels:
        app: "web"
    spec:
      # the app
      containers:
      - name: web
        image: 'example/web:1.0'
        args: ["--port", "8080"]   # flow, double quotes
        env:
          - name: A
            value: "x"
      - name: side
        image: example/side
      terminationGracePeriodSeconds: 10
"""


def deploy(name: str = "web", line: int = 2, ns: str | None = "shop") -> Target:
    return Target("Deployment", name, ns, line)


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    removed, added = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def patched(text: str, patch: dict[str, Any], target: Target | None = None) -> str:
    return rewrite(text.encode(), [(target or deploy(), patch)]).decode()


def test_scalar_change_moves_one_line() -> None:
    out = patched(DEPLOYMENT, GRACE)
    removed, added = changed_lines(DEPLOYMENT, out)
    assert removed == ["      terminationGracePeriodSeconds: 10"]
    assert added == ["      terminationGracePeriodSeconds: 45"]


def test_insertion_keeps_everything_else_byte_identical() -> None:
    out = patched(DEPLOYMENT, PRESTOP)
    removed, added = changed_lines(DEPLOYMENT, out)
    assert removed == []
    assert added == [
        "        lifecycle:",
        "          preStop:",
        "            sleep:",
        "              seconds: 5",
    ]
    # inserted in the web container, indented as the file indents it
    assert out.index("lifecycle") < out.index("- name: side")
    body = yaml.safe_load(out)
    assert body["spec"]["template"]["spec"]["containers"][0]["lifecycle"] == {
        "preStop": {"sleep": {"seconds": 5}}
    }


def test_sequences_indented_either_way_and_mixed() -> None:
    text = DEPLOYMENT.replace("      - name: web", "        - name: web").replace(
        "        image: 'example/web:1.0'", "          image: 'example/web:1.0'"
    )
    text = text.replace('        args: ["--port"', '          args: ["--port"')
    text = text.replace(
        "      - name: side\n        image: example/side",
        "        - name: side\n          image: example/side",
    )
    text = text.replace("        env:\n", "          env:\n").replace(
        "          - name: A\n            value", "            - name: A\n              value"
    )
    assert yaml.safe_load(text)  # still valid
    out = patched(text, PRESTOP)
    removed, added = changed_lines(text, out)
    assert removed == []
    assert added[0] == "          lifecycle:"


def test_handler_replaced_in_flow_and_block_style() -> None:
    text = DEPLOYMENT.replace(
        "        image: 'example/web:1.0'\n",
        "        image: 'example/web:1.0'\n"
        "        lifecycle:\n          preStop: {exec: {command: [sh, -c, 'sleep 1']}}\n",
    )
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "lifecycle": {"preStop": {"exec": None, "sleep": {"seconds": 5}}},
                        }
                    ]
                }
            }
        }
    }
    out = patched(text, patch)
    removed, added = changed_lines(text, out)
    assert removed == ["          preStop: {exec: {command: [sh, -c, 'sleep 1']}}"]
    assert added == ["          preStop: {sleep: {seconds: 5}}"]


def test_multi_document_only_the_target_changes() -> None:
    other = DEPLOYMENT.replace("namespace: shop", "namespace: other")
    text = other + "---\n" + DEPLOYMENT + "...\n---\n# last\n" + other
    second = text.split("\n").index("---") + 2  # line of the shop Deployment
    out = patched(text, GRACE, deploy(line=second))
    removed, added = changed_lines(text, out)
    assert (removed, added) == (
        ["      terminationGracePeriodSeconds: 10"],
        ["      terminationGracePeriodSeconds: 45"],
    )
    docs = list(yaml.safe_load_all(out))
    graces = [d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] for d in docs if d]
    assert graces == [10, 45, 10]


def test_same_name_picks_the_object_at_its_line() -> None:
    text = DEPLOYMENT + "---\n" + DEPLOYMENT
    line = text.split("\n").index("---") + 2
    out = patched(text, GRACE, deploy(line=line))
    docs = list(yaml.safe_load_all(out))
    assert [d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] for d in docs] == [
        10,
        45,
    ]


def test_crlf_bom_and_missing_final_newline_are_kept() -> None:
    text = DEPLOYMENT.rstrip("\n").replace("\n", "\r\n")
    data = b"\xef\xbb\xbf" + text.encode()
    out = rewrite(data, [(deploy(), GRACE)])
    assert out.startswith(b"\xef\xbb\xbf")
    assert not out.endswith(b"\n")
    assert out.count(b"\r\n") == out.count(b"\n")
    assert out.replace(b"45", b"10") == data


def test_anchors_elsewhere_are_kept_and_anchored_targets_refused() -> None:
    text = DEPLOYMENT.replace("    matchLabels: {app: web}", "    matchLabels: &labels {app: web}")
    out = patched(text, GRACE)
    assert "&labels {app: web}" in out
    anchored = DEPLOYMENT.replace("    spec:\n      # the app", "    spec: &pod\n      # the app")
    with pytest.raises(CannotRewrite, match="anchor"):
        patched(anchored, GRACE)


def test_literal_block_script_keeps_its_style() -> None:
    text = DEPLOYMENT.replace(
        '        args: ["--port", "8080"]   # flow, double quotes\n',
        "        command:\n        - sh\n        - -c\n        - |\n"
        "          ./migrate\n          ./server\n",
    )
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "web", "command": ["sh", "-c", "./migrate\nexec ./server\n"]}
                    ]
                }
            }
        }
    }
    out = patched(text, patch)
    removed, added = changed_lines(text, out)
    assert (removed, added) == (["          ./server"], ["          exec ./server"])


def test_nothing_to_change_returns_the_same_bytes() -> None:
    data = DEPLOYMENT.encode()
    patch = {"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 10}}}}
    assert rewrite(data, [(deploy(), patch)]) is data


def test_unreadable_for_ruamel_is_refused() -> None:
    text = DEPLOYMENT.replace("  replicas: 2\n", "  replicas: 2\n  replicas: 3\n")
    with pytest.raises(CannotRewrite):
        patched(text, GRACE)
