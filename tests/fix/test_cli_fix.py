"""``svcdoctor fix`` end to end (in-process): diff, write, patch-dir, idempotence, exit
codes, --rule, --from-diagnosis and the files it refuses."""

from __future__ import annotations

import difflib
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
from svcdoctor.model import remedy

SHOP = Path(str(files("svcdoctor.examples") / "shop.yaml"))
FIXABLE = {"SVD101", "SVD102", "SVD103", "SVD104", "SVD105", "SVD106"}


def run(*args: str, cwd: Path, stdin: bytes | None = None) -> Result:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        return CliRunner().invoke(cli, ["fix", *args], input=stdin, catch_exceptions=False)


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
        "fixed shop.yaml (SVD101, SVD102, SVD103, SVD104, SVD105, SVD106, SVD202)"
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
            keep = {"lifecycle", "command", "args", "livenessProbe"}
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


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The example in a kustomize base: ``base/shop.yaml`` and its kustomization."""
    (tmp_path / "base").mkdir()
    shutil.copy(SHOP, tmp_path / "base" / "shop.yaml")
    (tmp_path / "base" / "kustomization.yaml").write_text("resources:\n- shop.yaml\n")
    return tmp_path / "base"


def test_patch_dir_writes_patches_and_kustomization(base: Path) -> None:
    shop = base / "shop.yaml"
    before = {p.name: p.read_bytes() for p in base.iterdir()}
    out = base.parent / "patches"
    result = run("--patch-dir", "patches", "base", cwd=base.parent)
    assert result.exit_code == 1, result.output
    assert {p.name: p.read_bytes() for p in base.iterdir()} == before
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../base"]  # the base, not its file
    del shop
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


def kustomize(folder: Path) -> str:
    """``kubectl kustomize DIR`` with the default load restrictor (the real kubectl)."""
    from tests.kubectl import kubectl_path

    built = subprocess.run(
        [str(kubectl_path()), "kustomize", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return built.stdout


def check_built(text: str, where: Path, base: list[dict[str, object]]) -> None:
    """The build holds the base's objects, the fixed ones fixed, nothing left to fix."""
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text)}
    assert set(docs) == {(d["kind"], d["metadata"]["name"]) for d in base}  # type: ignore[index]
    pod = docs[("Deployment", "checkout")]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 25
    assert pod["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 10}}
    (where / "built.yaml").write_text(text)
    assert not {r for r, _, _ in findings(where / "built.yaml")} & FIXABLE


@pytest.mark.parametrize("elsewhere", [False, True], ids=["overlay-beside", "other-tree"])
def test_patch_dir_outside_the_base_builds_with_default_kustomize(
    base: Path, tmp_path_factory: pytest.TempPathFactory, elsewhere: bool
) -> None:
    """`fix base/ --patch-dir overlays/fix` and `--patch-dir /elsewhere`: the overlay
    lists the base directory, which plain `kubectl kustomize` accepts."""
    folder = tmp_path_factory.mktemp("elsewhere") / "fix" if elsewhere else Path("overlays/fix")
    result = run("--patch-dir", str(folder), "base/", cwd=base.parent)
    assert result.exit_code == 1, result.output
    folder = folder if folder.is_absolute() else base.parent / folder
    resources = yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]
    assert len(resources) == 1
    assert (folder / resources[0]).resolve() == base.resolve()
    check_built(kustomize(folder), base.parent, list(yaml.safe_load_all(SHOP.read_text())))


def test_patch_dir_containing_the_files_lists_them_and_reruns_alike(shop: Path) -> None:
    """`fix . --patch-dir .`: files inside DIR are listed as files; a second run does not
    read the patches as manifests and writes the same files."""
    result = run("--patch-dir", ".", ".", cwd=shop.parent)
    assert result.exit_code == 1, result.output
    kustomization = yaml.safe_load((shop.parent / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["shop.yaml"]
    written = {p.name: p.read_bytes() for p in shop.parent.iterdir()}
    check_built(kustomize(shop.parent), shop.parent, list(yaml.safe_load_all(SHOP.read_text())))
    (shop.parent / "built.yaml").unlink()
    again = run("--patch-dir", ".", ".", cwd=shop.parent)
    assert again.exit_code == 1, again.output
    assert "7 findings fixed in 3 objects of 1 file" in again.stderr
    assert {p.name: p.read_bytes() for p in shop.parent.iterdir()} == written


def test_patch_dir_drops_its_stale_patches(shop: Path) -> None:
    assert run("--patch-dir", ".", ".", cwd=shop.parent).exit_code == 1
    assert (shop.parent / "deployment-shop-cart.yaml").is_file()
    assert run("--patch-dir", ".", "--rule", "SVD106", ".", cwd=shop.parent).exit_code == 1
    names = {p.name for p in shop.parent.iterdir()}
    assert names == {"shop.yaml", "kustomization.yaml", "deployment-shop-cart.yaml"}


def test_patch_dir_refuses_files_kustomize_would_not_load(shop: Path, base: Path) -> None:
    """A plain file outside DIR (kustomize's load restrictor refuses it): one line saying
    what to do, exit 2, nothing written."""
    result = run("--patch-dir", "patches", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 2
    message = result.stderr.strip().splitlines()[-1]
    assert "no kustomization builds shop.yaml" in message
    assert "kustomization.yaml (`resources: [shop.yaml]`)" in message
    assert not (shop.parent / "patches").exists()
    # a kustomization that does not list the file does not build it either
    (base / "kustomization.yaml").write_text("resources: []\n")
    result = run("--patch-dir", "patches", "base", cwd=base.parent)
    assert result.exit_code == 2
    assert "no kustomization builds base/shop.yaml" in result.stderr


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("base/fix", "it is inside base, whose kustomization builds base/shop.yaml"),
        ("base", "it is base, whose kustomization builds base/shop.yaml"),
        ("mine", "it holds kustomization.yaml, not written by svcdoctor fix"),
    ],
)
def test_patch_dir_refuses_to_clash_with_the_users_kustomizations(
    base: Path, folder: str, message: str
) -> None:
    (base.parent / "mine").mkdir()
    (base.parent / "mine" / "kustomization.yaml").write_text("resources: [../base]\n")
    before = {p: p.read_bytes() for p in base.parent.rglob("*") if p.is_file()}
    result = run("--patch-dir", folder, "base", cwd=base.parent)
    assert result.exit_code == 2
    assert message in result.stderr
    assert {p: p.read_bytes() for p in base.parent.rglob("*") if p.is_file()} == before


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
        (["-"], "no Kubernetes objects to fix (stdin was empty)"),
        (["-", "x.yaml"], "stdin) is fixed on its own"),
        (["--patch-dir", "d", "-"], "stdin is no file"),
        (["x.yaml"], "no Kubernetes objects to fix (1 file read, none holds one)"),
        (["--write", "--patch-dir", "d", "x.yaml"], "exclude each other"),
        (["--rule", "SVD999", "x.yaml"], "SVD999"),
    ],
)
def test_input_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "x.yaml").write_text("a: 1\n")
    result = run(*args, cwd=tmp_path)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "--allow-empty" not in result.output  # lint's flag: fix has none


def test_helm_template_and_minified_json_are_refused_with_a_reason(
    tmp_path: Path, shop: Path
) -> None:
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
    assert "skipped shop.json: cannot round-trip it: its JSON layout is not one member" in (
        result.stderr
    )
    assert result.exit_code == 0
    result = run("--patch-dir", ".", "shop.json", cwd=tmp_path)
    assert result.exit_code == 1
    # kustomize reads the List and patches its items
    check_built(kustomize(tmp_path), tmp_path, docs)


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


def test_from_diagnosis_schema_2_applies_the_plan_it_carries(shop: Path) -> None:
    """A diagnosis of schema 2 carries the plan: its preStop and grace are used as they
    are (the older ``recommended_*`` keys, here different, are not read)."""
    document = json.loads(
        diagnosis(
            {
                "window_seconds": 8.75,
                "recommended_prestop_seconds": 99,
                "recommended_grace_seconds": 99,
                "latency_p999_seconds": 11.2,
                "plan": {"prestop_seconds": 14, "hook": "sleep", "grace_seconds": 31},
            }
        )
    )
    (shop.parent / "d.json").write_text(json.dumps({"schema_version": 2, **document}))
    result = run("--write", "--from-diagnosis", "d.json", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 1, result.output
    assert "diagnosed race window 8.75 s: preStop 14 s" in result.stderr
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(shop.read_text())}
    web = docs["frontend"]["spec"]["template"]["spec"]
    assert web["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 14}}
    assert web["terminationGracePeriodSeconds"] == 31


def test_from_diagnosis_schema_2_takes_the_plan_back_and_plans_nothing(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The diagnosis' plan, read back as a ShutdownPlan, is what the race fix applies: its
    preStop and grace, with no second plan_shutdown for the window."""
    plan = remedy.ShutdownPlan(
        prestop_seconds=17,
        hook=remedy.HookKind.SLEEP,
        grace_seconds=43,
        rules=("SVD101", "SVD102"),
        window_seconds=11.25,
        source=remedy.WindowSource.DIAGNOSED,
        version_known=False,
        needed_grace_seconds=43,
    )
    assert remedy.plan_from_data(remedy.plan_data(plan)) == plan
    details = {"window_seconds": 11.25, "latency_p999_seconds": 9.0}
    document = json.loads(diagnosis({**details, "plan": remedy.plan_data(plan)}))
    (shop.parent / "d.json").write_text(json.dumps({"schema_version": 2, **document}))
    calls: list[remedy.ShutdownFacts] = []
    planner = remedy.plan_shutdown

    def spy(facts: remedy.ShutdownFacts) -> remedy.ShutdownPlan:
        calls.append(facts)
        return planner(facts)

    monkeypatch.setattr(remedy, "plan_shutdown", spy)
    args = ("--write", "--rule", "SVD101,SVD102,SVD103", "--from-diagnosis", "d.json")
    result = run(*args, "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 1, result.output
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(shop.read_text())}
    web = docs["frontend"]["spec"]["template"]["spec"]
    assert web["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 17}}
    assert web["terminationGracePeriodSeconds"] == 43
    assert calls == []


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
    result = run("--patch-dir", ".", "api.yaml", cwd=tmp_path)
    assert result.exit_code == 1, result.output
    kustomization = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    assert kustomization["patches"] == [
        {"path": "deployment-api.yaml", "target": {"kind": "Deployment", "name": "api"}}
    ]
    patch = yaml.safe_load((tmp_path / "deployment-api.yaml").read_text())
    assert patch["metadata"] == {"name": "api"}
    assert run("--write", "api.yaml", cwd=tmp_path).exit_code == 1
    assert "preStop" in (tmp_path / "api.yaml").read_text()
    assert run("--write", "api.yaml", cwd=tmp_path).exit_code == 0


def test_stdin_diff_and_write_as_a_filter(shop: Path) -> None:
    """`fix -` prints the diff labelled <stdin>; `fix --write -` prints the whole input,
    fixed exactly as --write fixes the file, and leaves a fixed input as it is."""
    data = shop.read_bytes()
    diff = run("-", cwd=shop.parent, stdin=data)
    assert diff.exit_code == 1, diff.output
    assert diff.stdout.startswith("--- <stdin>\n+++ <stdin>\n@@ ")
    assert diff.stdout == run("-f", "-", cwd=shop.parent, stdin=data).stdout
    written = run("--write", "-", cwd=shop.parent, stdin=data)
    assert written.exit_code == 1, written.output
    assert written.stderr.startswith("fixed <stdin> (SVD101, SVD102, SVD103")
    assert run("--write", "shop.yaml", cwd=shop.parent).exit_code == 1
    assert written.stdout_bytes == shop.read_bytes()
    again = run("--write", "-", cwd=shop.parent, stdin=written.stdout_bytes)
    assert again.exit_code == 0, again.output
    assert again.stdout_bytes == written.stdout_bytes


def test_stdin_write_keeps_crlf_and_prints_what_it_cannot_fix_unchanged(tmp_path: Path) -> None:
    crlf = NO_NAMESPACE.replace("\n", "\r\n").encode()
    result = run("--write", "-", cwd=tmp_path, stdin=crlf)
    assert result.exit_code == 1, result.output
    out = result.stdout_bytes
    assert out.count(b"\r\n") == out.count(b"\n")
    assert b"preStop" in out
    assert out.replace(b"\r\n", b"\n").startswith(
        NO_NAMESPACE.split("      containers", maxsplit=1)[0].encode()
    )
    helm = NO_NAMESPACE.encode() + b"---\nkind: Service\nmetadata:\n  name: {{ .Values.x }}\n"
    result = run("--write", "-", cwd=tmp_path, stdin=helm)
    assert "skipped stdin: Helm template (SVD002" in result.stderr
    assert result.stdout_bytes == helm


def test_diff_of_a_directory_applies_with_git(shop: Path) -> None:
    """Paths read from `.` are shown as `a/shop.yaml`, not `a/./shop.yaml` (which
    git apply rejects)."""
    result = run(".", cwd=shop.parent)
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("--- a/shop.yaml\n+++ b/shop.yaml\n")
    # a file above the working directory: its path as it is (for patch -p0)
    (shop.parent / "sub").mkdir()
    outside = run("../" + shop.name, cwd=shop.parent / "sub")
    assert outside.stdout.startswith("--- ../shop.yaml\n+++ ../shop.yaml\n")
    if shutil.which("git"):
        subprocess.run(
            ["git", "apply", "--unsafe-paths", "-"],
            input=result.stdout,
            text=True,
            cwd=shop.parent,
            check=True,
        )
        assert not {r for r, _, _ in findings(shop)} & FIXABLE


@pytest.mark.parametrize("indent", [4, 2])
def test_json_laid_out_as_kubectl_writes_it_is_fixed_in_place(tmp_path: Path, indent: int) -> None:
    """`kubectl get -o json`-style JSON (a List, one member a line): only the changed
    members' lines move, lint finds none of the fixed rules, a second run changes nothing;
    the same from stdin."""
    docs = list(yaml.safe_load_all(SHOP.read_text()))
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=indent) + "\n"
    path = tmp_path / "shop.json"
    path.write_text(text)
    result = run("--write", "shop.json", cwd=tmp_path)
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("fixed shop.json (SVD101, SVD102, SVD103")
    after = path.read_text()
    removed = [
        line for line in difflib.ndiff(text.splitlines(), after.splitlines()) if line[0] == "-"
    ]
    # only the replaced values go: a script, a grace period, an exec hook, a strategy,
    # a sleep, a liveness handler (in its place); every other line of the file stays
    assert sorted(line[2:].strip() for line in removed) == sorted(
        [
            '"./migrate-assets && ./frontend --listen :8080"',
            '"terminationGracePeriodSeconds": 15,',
            '"exec": {',
            '"command": [',
            '"sh",',
            '"-c",',
            '"sleep 10"',
            "]",
            '"type": "Recreate"',
            '"seconds": 2',
            '"grpc": {',
            '"port": 5050,',
            '"service": "hipstershop.CheckoutService"',
        ]
    )
    assert not {r for r, _, _ in findings(path)} & FIXABLE
    assert run("--write", "shop.json", cwd=tmp_path).exit_code == 0
    assert path.read_text() == after
    piped = run("--write", "-", cwd=tmp_path, stdin=text.encode())
    assert piped.exit_code == 1, piped.output
    assert piped.stdout == after


PREFIX = """\
# leading comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: "1"}
--- # the workload
# between
"""
SUFFIX = """\
...
---
# a trailing document of comments only
"""
PRESTOP = """\
        lifecycle:
          preStop:
            sleep:
              seconds: 5
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_multi_document_file_with_comments_and_markers(tmp_path: Path, newline: str) -> None:
    """Comments between documents, `--- # comment`, `...` end markers, a document of
    comments only, CRLF: the one insertion is the only change, byte for byte."""
    text = PREFIX + NO_NAMESPACE + SUFFIX
    (tmp_path / "m.yaml").write_bytes(text.replace("\n", newline).encode())
    result = run("--write", "m.yaml", cwd=tmp_path)
    assert result.exit_code == 1, result.output
    want = PREFIX + NO_NAMESPACE + PRESTOP + SUFFIX
    assert (tmp_path / "m.yaml").read_bytes() == want.replace("\n", newline).encode()
    assert run("--write", "m.yaml", cwd=tmp_path).exit_code == 0


def test_yaml_list_kind_items_are_fixed(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(NO_NAMESPACE))
    text = "# kubectl get -o yaml\n" + yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": docs}, sort_keys=False
    )
    (tmp_path / "list.yaml").write_text(text)
    result = run("--write", "list.yaml", cwd=tmp_path)
    assert result.exit_code == 1, result.output
    fixed = yaml.safe_load((tmp_path / "list.yaml").read_text())
    pod = fixed["items"][1]["spec"]["template"]["spec"]
    assert pod["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert fixed["items"][0] == docs[0]
    added = [
        line
        for line in difflib.ndiff(
            text.splitlines(), (tmp_path / "list.yaml").read_text().splitlines()
        )
        if line[0] in "+-"
    ]
    assert [line[0] for line in added] == ["+"] * 4


def test_from_diagnosis_refuses_a_newer_schema(shop: Path) -> None:
    """A diagnosis written by a newer svcdoctor is refused in one line, not half read."""
    document = json.loads(diagnosis({"window_seconds": 8.75, "recommended_prestop_seconds": 14}))
    (shop.parent / "d.json").write_text(json.dumps({"schema_version": 3, **document}))
    result = run("--diff", "--from-diagnosis", "d.json", "shop.yaml", cwd=shop.parent)
    assert result.exit_code == 2, result.output
    assert "schema_version 3 is newer than this svcdoctor reads (2)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
