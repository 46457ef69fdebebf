"""``svcdoctor fix`` end to end (in-process): diff, write, patch-dir, idempotence, exit
codes, --rule, --from-diagnosis and the files it refuses."""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

pytest.importorskip("ruamel.yaml")

from svcdoctor.checks import Settings
from svcdoctor.cli import cli
from svcdoctor.cli.lint import lint_paths

SHOP = Path(str(files("svcdoctor.examples") / "shop.yaml"))
FIXABLE = {"SVD101", "SVD102", "SVD103", "SVD104", "SVD105", "SVD106"}


def run(*args: str, cwd: Path) -> Result:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        return CliRunner().invoke(cli, ["fix", *args], catch_exceptions=False)


def findings(path: Path) -> list[tuple[str, str, str | None]]:
    result, _ = lint_paths([str(path)], Settings(), 32)
    return sorted(
        (f.rule, str(f.object), f.container) for f in result.findings if f.cause is not None
    )


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    shutil.copy(SHOP, tmp_path / "shop.yaml")
    return tmp_path / "shop.yaml"


def test_diff_is_default_and_touches_nothing(shop: Path) -> None:
    before = shop.read_bytes()
    result = run("shop.yaml", cwd=shop.parent)
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("--- a/shop.yaml\n+++ b/shop.yaml\n")
    assert "+              sleep:" in result.stdout
    assert "-      terminationGracePeriodSeconds: 15" in result.stdout
    assert "manual: shop.yaml:81 Service shop/cart SVD204" in result.stderr
    assert shop.read_bytes() == before
    # the diff applies with git apply / patch -p1
    if shutil.which("patch"):
        subprocess.run(
            ["patch", "-p1", "-s"], input=result.stdout, text=True, cwd=shop.parent, check=True
        )
        assert shop.read_bytes() != before
        assert not {r for r, _, _ in findings(shop)} & FIXABLE


def test_write_fixes_the_rules_adds_nothing_and_is_idempotent(shop: Path) -> None:
    before = findings(shop)
    result = run("--write", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith(
        "fixed shop.yaml (SVD101, SVD102, SVD103, SVD104, SVD105, SVD106)"
    )
    after = findings(shop)
    assert not {r for r, _, _ in after} & FIXABLE
    assert set(after) <= set(before)  # no new finding
    text = shop.read_text()
    again = run("--write", "shop.yaml", cwd=shop.parent)
    assert again.exit_code == 0, again.output
    assert shop.read_text() == text
    assert run("shop.yaml", cwd=shop.parent).stdout == ""


def test_write_changes_only_the_fixed_fields(shop: Path) -> None:
    original = list(yaml.safe_load_all(SHOP.read_text()))
    run("--write", "shop.yaml", cwd=shop.parent)
    fixed = list(yaml.safe_load_all(shop.read_text()))
    assert len(fixed) == len(original)
    for a, b in zip(original, fixed, strict=True):
        if a["kind"] != "Deployment":
            assert a == b
            continue
        assert {k: v for k, v in a.items() if k != "spec"} == {
            k: v for k, v in b.items() if k != "spec"
        }
        pa, pb = a["spec"]["template"]["spec"], b["spec"]["template"]["spec"]
        for ca, cb in zip(pa["containers"], pb["containers"], strict=True):
            keep = {"lifecycle", "command", "args"}
            assert {k: v for k, v in ca.items() if k not in keep} == {
                k: v for k, v in cb.items() if k not in keep
            }


def test_rule_limits_the_fixes(shop: Path) -> None:
    result = run("--write", "--rule", "SVD102", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 1
    assert result.stdout.startswith("fixed shop.yaml (SVD102)")
    rules = {r for r, _, _ in findings(shop)}
    assert "SVD102" not in rules
    assert {"SVD101", "SVD103"} <= rules


def test_kubernetes_version_picks_exec_sleep(shop: Path) -> None:
    result = run("--kubernetes-version", "1.28", "--rule", "SVD101", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 1
    assert "exec:" in result.stdout
    assert "sleep 5" in result.stdout


def test_patch_dir_writes_patches_and_kustomization(shop: Path) -> None:
    before = shop.read_bytes()
    out = shop.parent / "patches"
    result = run("--patch-dir", "patches", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 1, result.output
    assert shop.read_bytes() == before
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../shop.yaml"]
    targets = {(p["target"]["kind"], p["target"]["name"]) for p in kustomization["patches"]}
    assert targets == {
        ("Deployment", "frontend"),
        ("Deployment", "checkout"),
        ("Deployment", "cart"),
    }
    checkout = yaml.safe_load((out / "deployment-shop-checkout.yaml").read_text())
    assert checkout["metadata"] == {"name": "checkout", "namespace": "shop"}
    pod = checkout["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 25
    # the exec handler is removed explicitly (a strategic merge would keep both)
    assert pod["containers"][0]["lifecycle"]["preStop"] == {"exec": None, "sleep": {"seconds": 10}}


def test_patch_dir_builds_with_real_kustomize(shop: Path) -> None:
    """kubectl's kustomize applies the patches: the fixed objects come out, the rest as is."""
    from tests.kubectl import kubectl_path

    kubectl = kubectl_path()
    assert run("--patch-dir", "patches", "shop.yaml", cwd=shop.parent).exit_code == 1
    built = subprocess.run(
        [str(kubectl), "kustomize", "--load-restrictor", "LoadRestrictionsNone", "patches"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=shop.parent,
    )
    (shop.parent / "built.yaml").write_text(built.stdout)
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(built.stdout)}
    pod = docs[("Deployment", "checkout")]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 25
    assert pod["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 10}}
    # the kustomized output has nothing left to fix
    assert not {r for r, _, _ in findings(shop.parent / "built.yaml")} & FIXABLE


def test_nothing_to_fix_exits_0(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec:\n  template:\n"
        "    metadata: {labels: {app: w}}\n    spec:\n      containers: [{name: w, image: w}]\n"
    )
    result = run("--write", "ok.yaml", cwd=tmp_path)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.yaml"], "no such file"),
        (["-"], "stdin"),
        (["--write", "--patch-dir", "d", "x.yaml"], "exclude each other"),
        (["--rule", "SVD999", "x.yaml"], "SVD999"),
    ],
)
def test_input_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "x.yaml").write_text("a: 1\n")
    result = run(*args, cwd=tmp_path)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_helm_template_and_json_are_refused_with_a_reason(tmp_path: Path, shop: Path) -> None:
    text = shop.read_text()
    (tmp_path / "helm.yaml").write_text(
        text + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Values.name }}\n"
    )
    shop.unlink()
    result = run("--write", "helm.yaml", cwd=tmp_path)
    assert "skipped helm.yaml: Helm template (SVD002" in result.stderr
    assert (tmp_path / "helm.yaml").read_text().startswith(text)
    assert "fixed" not in result.stdout
    docs = list(yaml.safe_load_all(text))
    (tmp_path / "helm.yaml").unlink()
    (tmp_path / "shop.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    )
    result = run("--write", "shop.json", cwd=tmp_path)
    assert "skipped shop.json: JSON is not rewritten in place" in result.stderr
    assert result.exit_code == 0
    result = run("--patch-dir", "p", "shop.json", cwd=tmp_path)
    assert result.exit_code == 1
    assert (tmp_path / "p" / "kustomization.yaml").is_file()


def diagnosis(details: dict[str, object]) -> str:
    return json.dumps(
        {"causes": [{"cause": "backend", "details": {}}, {"cause": "race", "details": details}]}
    )


def test_from_diagnosis_carries_the_measured_numbers(shop: Path) -> None:
    (shop.parent / "d.json").write_text(
        diagnosis(
            {
                "window_seconds": 8.75,
                "recommended_prestop_seconds": 14,
                "recommended_grace_seconds": 31,
                "latency_p999_seconds": 11.2,
            }
        )
    )
    result = run("--write", "--from-diagnosis", "d.json", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 1, result.output
    assert "diagnosed race window 8.75 s: preStop 14 s" in result.stderr
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(shop.read_text())}
    web = docs["frontend"]["spec"]["template"]["spec"]
    assert web["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 14}}
    assert web["terminationGracePeriodSeconds"] == 31
    # linting with the same numbers finds nothing left to fix
    again = run("--from-diagnosis", "d.json", "shop.yaml", cwd=shop.parent)
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ("[]", "no 'causes' list"),
        (diagnosis({"excess_failures": 3}), "no race window"),
        (json.dumps({"causes": [{"cause": "backend", "details": {}}]}), "no race window"),
    ],
)
def test_from_diagnosis_bad_input_is_one_line_exit_2(
    shop: Path, content: str, message: str
) -> None:
    (shop.parent / "d.json").write_text(content)
    result = run("--from-diagnosis", "d.json", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


NO_NAMESPACE = """\
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 3
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: example/api:1
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /ready, port: 8080}}
"""


def test_objects_without_namespace_are_patched_as_written(tmp_path: Path) -> None:
    (tmp_path / "api.yaml").write_text(NO_NAMESPACE)
    result = run("--patch-dir", "p", "api.yaml", cwd=tmp_path)
    assert result.exit_code == 1, result.output
    kustomization = yaml.safe_load((tmp_path / "p" / "kustomization.yaml").read_text())
    assert kustomization["patches"] == [
        {"path": "deployment-api.yaml", "target": {"kind": "Deployment", "name": "api"}}
    ]
    patch = yaml.safe_load((tmp_path / "p" / "deployment-api.yaml").read_text())
    assert patch["metadata"] == {"name": "api"}
    assert run("--write", "api.yaml", cwd=tmp_path).exit_code == 1
    assert "preStop" in (tmp_path / "api.yaml").read_text()
    assert run("--write", "api.yaml", cwd=tmp_path).exit_code == 0
