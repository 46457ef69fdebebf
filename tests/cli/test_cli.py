"""The installed console scripts, run as a user runs them: real processes, files and stdin."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from svcdoctor import __version__
from svcdoctor.checks import DOC_SECTIONS, RULES

BIN = Path(sys.executable).parent


def script(name: str) -> str:
    found = BIN / name
    if found.is_file():
        return str(found)
    which = shutil.which(name)
    assert which, f"console script {name} is not installed (pip install -e .)"
    return which


def run(
    *args: str,
    cwd: Path,
    stdin: str | None = None,
    program: str = "svcdoctor",
    close_stdin: bool = False,
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [script(program), *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
        preexec_fn=(lambda: os.close(0)) if close_stdin else None,
    )


def findings(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return list(json.loads(proc.stdout)["findings"])


def rules_of(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """rule id -> severity of each finding in a JSON report."""
    return {f["rule"]: f["severity"] for f in findings(proc)}


def assert_usage_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


# A Service and a Deployment with neither a preStop delay (SVD101) nor a readiness probe
# (SVD201): both warnings.
APP = """\
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  annotations: {}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: example/api:1
        ports: [{containerPort: 8080}]
"""

# Only an info finding (SVD401: a LoadBalancer with externalTrafficPolicy Cluster).
INFO_ONLY = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Cluster
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}
      containers:
      - name: web
        image: example/web:1
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /readyz, port: 8080}}
        lifecycle: {preStop: {sleep: {seconds: 5}}}
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    path = tmp_path / "app.yaml"
    path.write_text(APP)
    return path


# --- basics --------------------------------------------------------------------------------


@pytest.mark.parametrize("program", ["svcdoctor", "kubectl-svcdoctor"])
def test_version_of_each_console_script(tmp_path: Path, program: str) -> None:
    proc = run("--version", cwd=tmp_path, program=program)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"svcdoctor, version {__version__}"


def test_the_kubectl_plugin_lints_like_svcdoctor(tmp_path: Path, app: Path) -> None:
    plugin = run("lint", app.name, "-o", "json", cwd=tmp_path, program="kubectl-svcdoctor")
    direct = run("lint", app.name, "-o", "json", cwd=tmp_path)
    assert plugin.returncode == direct.returncode == 1
    assert plugin.stdout == direct.stdout


def test_lint_example_exits_1_because_it_has_warnings(tmp_path: Path) -> None:
    proc = run("lint", "--example", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "warning SVD105 shell-wrapped-entrypoint" in proc.stdout
    assert "info    SVD101 no-prestop-delay" in proc.stdout  # fixed with SVD105's
    assert proc.stdout.rstrip().splitlines()[-1].startswith("1 file, 8 objects")
    assert proc.stderr == ""


def test_exit_zero_reports_but_exits_0(tmp_path: Path) -> None:
    proc = run("lint", "--example", "--exit-zero", "-o", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {"warning", "error"} <= set(rules_of(proc).values())


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])  # text: see above
def test_every_format_prints_the_example_report(tmp_path: Path, fmt: str) -> None:
    proc = run("lint", "--example", "--format", fmt, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    if fmt in ("json", "sarif"):
        document = json.loads(proc.stdout)
        results = document["findings"] if fmt == "json" else document["runs"][0]["results"]
        assert len(results) >= 10
    else:
        lines = proc.stdout.splitlines()
        assert lines
        assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)


@pytest.mark.parametrize(
    ("fail_on", "info_only", "warnings"),
    [(None, 0, 1), ("info", 1, 1), ("error", 0, 0)],  # the default is warning
)
def test_fail_on_sets_the_lowest_severity_that_fails(
    tmp_path: Path, app: Path, fail_on: str | None, info_only: int, warnings: int
) -> None:
    (tmp_path / "info.yaml").write_text(INFO_ONLY)
    flags = ["--fail-on", fail_on] if fail_on else []
    info = run("lint", "info.yaml", "-o", "json", *flags, cwd=tmp_path)
    assert set(rules_of(info).values()) == {"info"}  # the fixture is what it claims
    assert info.returncode == info_only
    warn = run("lint", app.name, "-o", "json", *flags, cwd=tmp_path)
    assert set(rules_of(warn).values()) == {"warning"}
    assert warn.returncode == warnings


# --- usage errors: exit 2, one line, no traceback ----------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        ([], ["give PATHS"]),
        (["--format", "xml", "app.yaml"], ["'xml'", "text"]),
        (["--disable", "SVD999", "app.yaml"], ["--disable", "unknown rule 'SVD999'"]),
        (["--enable", "no-such-rule", "app.yaml"], ["--enable", "'no-such-rule'"]),
        (["--severity", "X", "app.yaml"], ["--severity", "RULE=LEVEL"]),
        (["--severity", "SVD101=loud", "app.yaml"], ["'loud'", "info, warning, error"]),
        (["--severity", "SVD999=info", "app.yaml"], ["unknown rule 'SVD999'"]),
        (["--kube-version", "banana", "app.yaml"], ["--kubernetes-version", "'banana'"]),
        (["--fail-on", "fatal", "app.yaml"], ["'fatal'"]),
        (["--max-file-mb", "0", "app.yaml"], ["--max-file-mb"]),
        (["--config", "nope.toml", "app.yaml"], ["nope.toml", "cannot read"]),
    ],
    ids=[
        "no-paths",
        "unknown-format",
        "unknown-disable",
        "unknown-enable",
        "severity-without-level",
        "severity-bad-level",
        "severity-unknown-rule",
        "kube-version-banana",
        "fail-on-unknown",
        "max-file-mb-zero",
        "missing-config",
    ],
)
def test_usage_errors_exit_2_with_one_line_and_no_report(
    tmp_path: Path, app: Path, args: list[str], fragments: list[str]
) -> None:
    proc = run("lint", *args, cwd=tmp_path)
    assert_usage_error(proc, *fragments)
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("toml", "fragments"),
    [
        ("bogus = 1\n", ["'bogus'"]),
        ('disable = ["SVD201"]\nseverity = {SVD101 = "loud"}\n', ["severity.SVD101", "'loud'"]),
        ('disable = "SVD201"\n', ["disable must be a list"]),
        ('disable = ["SVD999"]\n', ["unknown rule 'SVD999'"]),
        ("kube-version = 1.30\n", ["kubernetes-version", '"1.31"']),  # TOML's 1.30 is 1.3
        ("propagation-seconds = -1\n", ["propagation-seconds", "out of range", "≥ 0"]),
        ("max-file-mb = 0\n", ["max-file-mb", "more than 0"]),
        ("disable = [\n", []),  # not TOML at all
    ],
    ids=[
        "unknown-key",
        "bad-level",
        "not-a-list",
        "unknown-rule",
        "float-version",
        "negative",
        "zero-size-limit",
        "invalid-toml",
    ],
)
def test_a_bad_config_file_is_a_one_line_error_naming_the_file_and_key(
    tmp_path: Path, app: Path, toml: str, fragments: list[str]
) -> None:
    config = tmp_path / ".svcdoctor.toml"
    config.write_text(toml)
    proc = run("lint", app.name, cwd=tmp_path)
    assert_usage_error(proc, str(config), *fragments)


# --- input errors: exit 2, and the report is still printed ------------------------------------


def test_an_unreadable_input_exits_2_and_still_prints_the_json_report(
    tmp_path: Path, app: Path
) -> None:
    (tmp_path / "broken.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata:\n  a: 1\n b: 2\n"
    )
    proc = run("lint", "broken.yaml", app.name, "missing.yaml", "-o", "json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    report = findings(proc)
    (invalid,) = [f for f in report if f["rule"] == "SVD001"]
    assert (invalid["file"], invalid["line"], invalid["severity"]) == ("broken.yaml", 5, "error")
    (missing,) = [f for f in report if f["rule"] == "SVD003"]
    assert missing["file"] == "missing.yaml"
    assert {"SVD101", "SVD201"} <= {f["rule"] for f in report if f["file"] == app.name}
    assert json.loads(proc.stdout)["summary"]["input_errors"] == 2


@pytest.mark.parametrize("fmt", ["text", "sarif", "github"])
def test_input_errors_exit_2_in_every_format_even_with_exit_zero(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "logo.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    proc = run("lint", "logo.yaml", "--exit-zero", "--format", fmt, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "SVD003" in proc.stdout
    assert "binary" in proc.stdout


def test_max_file_mb_flag_sets_the_size_limit(tmp_path: Path, app: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(APP + "---\n" + "# padding\n" * 20_000)  # ~200 kB
    refused = run("lint", "big.yaml", "--max-file-mb", "0.1", "-o", "json", cwd=tmp_path)
    assert refused.returncode == 2
    (problem,) = findings(refused)
    assert problem["rule"] == "SVD003"
    assert "over the 0.1 MB limit" in problem["message"]
    accepted = run("lint", "big.yaml", "--max-file-mb", "1", "-o", "json", cwd=tmp_path)
    assert accepted.returncode == 1
    assert {"SVD101", "SVD201"} <= set(rules_of(accepted))


# --- configuration ------------------------------------------------------------------------------

PYPROJECT = """\
[project]
name = "someone-elses-project"

[tool.svcdoctor]
disable = ["SVD201"]
fail-on = "error"

[tool.svcdoctor.severity]
no-prestop-delay = "error"
"""


def test_config_is_found_from_the_working_directory_upwards(tmp_path: Path) -> None:
    project = tmp_path / "project"
    work = project / "deploy" / "prod"
    work.mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (work / "app.yaml").write_text(APP)

    plain = run("lint", str(work / "app.yaml"), "-o", "json", cwd=tmp_path)
    assert rules_of(plain) == {"SVD101": "warning", "SVD201": "warning"}

    configured = run("lint", "app.yaml", "-o", "json", cwd=work)
    assert rules_of(configured) == {"SVD101": "error"}
    assert configured.returncode == 1  # fail-on error, and SVD101 is now an error


def test_cli_flags_override_the_config_file(tmp_path: Path, app: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    severity = run("lint", app.name, "-o", "json", "--severity", "SVD101=info", cwd=tmp_path)
    assert rules_of(severity) == {"SVD101": "info"}
    assert severity.returncode == 0  # fail-on error from the file, nothing reaches it

    fail_on = run(
        "lint",
        app.name,
        "-o",
        "json",
        "--severity",
        "SVD101=info",
        "--fail-on",
        "info",
        cwd=tmp_path,
    )
    assert fail_on.returncode == 1

    enabled = run("lint", app.name, "-o", "json", "--enable", "SVD201", cwd=tmp_path)
    assert rules_of(enabled) == {"SVD201": "warning"}  # runs although the file disables it

    disabled = run("lint", app.name, "-o", "json", "--disable", "no-prestop-delay", cwd=tmp_path)
    assert rules_of(disabled) == {}
    assert disabled.returncode == 0


def test_svcdoctor_toml_wins_over_pyproject_and_config_flag_wins_over_both(
    tmp_path: Path, app: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / ".svcdoctor.toml").write_text('disable = ["SVD101"]\n')
    (tmp_path / "ci.toml").write_text('enable = ["SVD201"]\n[severity]\nSVD201 = "info"\n')
    assert rules_of(run("lint", app.name, "-o", "json", cwd=tmp_path)) == {"SVD201": "warning"}
    chosen = run("lint", app.name, "-o", "json", "--config", "ci.toml", cwd=tmp_path)
    assert rules_of(chosen) == {"SVD201": "info"}


# --- stdin ------------------------------------------------------------------------------------


def test_helm_template_output_on_stdin_is_linted_with_stdin_lines(tmp_path: Path) -> None:
    rendered = (
        "---\n# Source: api/templates/service.yaml\n"
        + APP.replace("---\n", "---\n# Source: api/templates/deployment.yaml\n")
        + "---\n# Source: api/templates/empty.yaml\n"
    )
    proc = run("lint", "-", "-o", "json", cwd=tmp_path, stdin=rendered)
    assert proc.returncode == 1, proc.stderr
    report = findings(proc)
    assert {f["file"] for f in report} == {"stdin"}
    lines = rendered.splitlines()
    for finding in report:
        assert 1 <= finding["line"] <= len(lines)
    summary = json.loads(proc.stdout)["summary"]
    assert (summary["objects"], summary["skipped_non_kubernetes"]) == (2, 0)


def test_an_unrendered_chart_on_stdin_is_svd002(tmp_path: Path) -> None:
    template = 'apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ include "api.name" . }}\n'
    proc = run("lint", "-", cwd=tmp_path, stdin=template)
    assert proc.returncode == 1  # a finding (error severity): exit by --fail-on, never 2
    assert "stdin:4" in proc.stdout
    assert "SVD002" in proc.stdout
    assert "helm template" in proc.stdout


def test_a_closed_stdin_does_not_break_linting_files(tmp_path: Path, app: Path) -> None:
    files = run("lint", app.name, "-o", "json", cwd=tmp_path, close_stdin=True)
    assert "Traceback" not in files.stderr
    assert files.returncode == 1
    dash = run("lint", "-", "-o", "json", cwd=tmp_path, close_stdin=True)
    assert "Traceback" not in dash.stderr
    assert dash.returncode == 2
    (problem,) = findings(dash)
    assert (problem["rule"], problem["file"]) == ("SVD003", "stdin")


# --- suppressions -------------------------------------------------------------------------------


def test_a_suppression_annotation_with_a_reason_suppresses(tmp_path: Path) -> None:
    text = APP.replace(
        "annotations: {}", 'annotations: {ignore.svcdoctor.io/SVD101: "drains on SIGTERM"}'
    )
    proc = run("lint", "-", "-o", "json", cwd=tmp_path, stdin=text)
    assert rules_of(proc) == {"SVD201": "warning"}
    assert json.loads(proc.stdout)["summary"]["suppressed"] == 1
    assert proc.returncode == 1


@pytest.mark.parametrize("reason", ['""', '"   "'])
def test_a_suppression_without_a_reason_is_svd005_and_suppresses_nothing(
    tmp_path: Path, reason: str
) -> None:
    text = APP.replace("annotations: {}", f"annotations: {{ignore.svcdoctor.io/SVD101: {reason}}}")
    proc = run("lint", "-", "-o", "json", cwd=tmp_path, stdin=text)
    assert proc.returncode == 1  # an invalid suppression is a finding (error), never exit 2
    report = findings(proc)
    assert {"SVD005", "SVD101", "SVD201"} == {f["rule"] for f in report}
    (invalid,) = [f for f in report if f["rule"] == "SVD005"]
    assert "no reason" in invalid["message"]
    assert json.loads(proc.stdout)["summary"]["suppressed"] == 0


# --- rules ----------------------------------------------------------------------------------------


def test_rules_lists_every_rule_in_id_order_with_full_names(tmp_path: Path) -> None:
    proc = run("rules", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("SVD")]
    assert [row[0] for row in rows] == sorted(RULES)
    for row in rows:
        assert row[1] == RULES[row[0]].name


@pytest.mark.parametrize("key", ["svd101", "no-prestop-delay"])
def test_rules_explain_prints_every_doc_section(tmp_path: Path, key: str) -> None:
    proc = run("rules", "explain", key, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# SVD101 no-prestop-delay")
    for section in DOC_SECTIONS:
        assert f"## {section}" in proc.stdout
    assert "ignore.svcdoctor.io/SVD101" in proc.stdout


def test_rules_explain_of_an_unknown_rule_exits_2(tmp_path: Path) -> None:
    proc = run("rules", "explain", "NOPE", cwd=tmp_path)
    assert_usage_error(proc, "'NOPE'")
    assert proc.stdout == ""


def test_starting_the_cli_imports_no_analysis_libraries() -> None:
    """`svcdoctor lint` and `--version` start fast: polars, numpy and the lab load only
    when a command needs them."""
    code = (
        "import sys, svcdoctor.cli; "
        "print(sorted(m for m in ('polars', 'numpy', 'svcdoctor.lab') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_lab_scenario_choices_are_the_scenarios() -> None:
    from svcdoctor.cli._lab import SCENARIO_NAMES
    from svcdoctor.lab import SCENARIOS

    assert tuple(SCENARIOS) == SCENARIO_NAMES


# --- whole repositories, empty input, namespaces (issue 14) ------------------------------------

ROOT = Path(__file__).resolve().parent.parent.parent


def repository(root: Path) -> Path:
    """A checkout as found on GitHub: plain manifests, a Helm chart, dashboards and JS
    configs beside them."""
    files = {
        "deploy/app.yaml": APP,
        "charts/api/Chart.yaml": "apiVersion: v2\nname: api\nversion: 0.1.0\n",
        "charts/api/values.yaml": "replicaCount: 1\nimage: {repository: example/api}\n",
        "charts/api/templates/service.yaml": (
            'apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ include "api.fullname" . }}\n'
        ),
        "charts/api/templates/deployment.yaml": "{{- if .Values.enabled }}\nkind: Deployment\n",
        "dashboards/api.json": json.dumps(
            {"panels": [{"targets": [{"legendFormat": "{{pod}}"}]}]}, indent="\t"
        ),
        "web/tsconfig.json": '{\n  // JSONC\n  "compilerOptions": {}\n}\n',
        ".github/workflows/ci.yaml": "on: push\njobs: {}\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_repository_with_charts_and_json_is_linted_without_input_errors(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path / "repo")
    proc = run("lint", ".", "--format", "json", cwd=repo)
    assert proc.returncode == 1, proc.stderr  # the app's warnings, not an input error
    summary = json.loads(proc.stdout)["summary"]
    assert summary["input_errors"] == 0
    assert {f["rule"] for f in findings(proc)} >= {"SVD101", "SVD201"}
    notes = [ln for ln in proc.stderr.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 2, proc.stderr
    assert "skipped 2 files in the templates/ (or other folders) of 1 Helm chart" in notes[0]
    assert "(charts/api)" in notes[0]
    assert "helm template RELEASE charts/api | svcdoctor lint -" in notes[0]
    assert "skipped 4 files holding no Kubernetes object" in notes[1]  # Chart, values, 2 JSON


def test_exclude_flag_and_config_key(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    proc = run("lint", ".", "--exclude", "deploy", "--allow-empty", cwd=repo)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "0 objects" in proc.stdout
    (repo / ".svcdoctor.toml").write_text('exclude = ["deploy/"]\nallow-empty = true\n')
    proc = run("lint", ".", cwd=repo)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "left out 1 path matching exclude patterns" in proc.stderr
    (repo / ".svcdoctor.toml").write_text('exclude = "deploy"\n')
    assert_usage_error(run("lint", ".", cwd=repo), "exclude must be a list")


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(["-"], ""), (["-"], "# helm template printed nothing\n---\n"), (["empty.yaml"], None)],
    ids=["empty-stdin", "only-comments", "empty-file"],
)
def test_an_empty_input_exits_2_unless_allowed(
    tmp_path: Path, args: list[str], stdin: str | None
) -> None:
    (tmp_path / "empty.yaml").write_text("")
    for fmt in ("text", "json"):
        proc = run("lint", *args, "--format", fmt, cwd=tmp_path, stdin=stdin)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
        assert len(errors) == 1, proc.stderr
        assert "no Kubernetes objects to check" in errors[0]
        assert "--allow-empty" in errors[0]
    assert run("lint", *args, "--allow-empty", cwd=tmp_path, stdin=stdin).returncode == 0


def test_the_pre_commit_hook_passes_a_commit_of_chart_templates_and_values(
    tmp_path: Path,
) -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    program, *args = shlex.split(hook["entry"])
    repo = repository(tmp_path / "repo")
    staged = [
        "charts/api/templates/service.yaml",
        "charts/api/values.yaml",
        "charts/api/Chart.yaml",
        "dashboards/api.json",
        "web/tsconfig.json",
    ]
    proc = run(*args, *staged, cwd=repo, program=program)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert set(hook["types_or"]) == {"yaml", "json"}


def test_namespace_flag_places_objects_without_one(tmp_path: Path) -> None:
    text = APP.replace("  name: api\n", "  name: api\n  namespace: shop\n")
    (tmp_path / "app.yaml").write_text(text)
    # not given: the Service joins the one namespace of its file's workload it selects
    alone = rules_of(run("lint", "app.yaml", "--format", "json", cwd=tmp_path))
    assert {"SVD101", "SVD201"} <= set(alone)
    default = rules_of(run("lint", "app.yaml", "-n", "default", "--format", "json", cwd=tmp_path))
    assert "SVD101" not in default  # the Service goes to default, the Deployment to shop
    shop = rules_of(run("lint", "app.yaml", "-n", "shop", "--format", "json", cwd=tmp_path))
    assert {"SVD101", "SVD201"} <= set(shop)
    (tmp_path / ".svcdoctor.toml").write_text('namespace = "shop"\n')
    assert "SVD101" in rules_of(run("lint", "app.yaml", "--format", "json", cwd=tmp_path))
    assert_usage_error(run("lint", "app.yaml", "-n", "Shop_1", cwd=tmp_path), "--namespace")


def test_piped_text_is_plain_and_not_wrapped(tmp_path: Path) -> None:
    long_name = "a-service-with-a-name-long-enough-to-push-the-header-past-eighty-columns"
    text = APP.replace("{name: api}", "{name: " + long_name + "}")
    (tmp_path / "app.yaml").write_text(text)
    env_free = run("lint", "app.yaml", cwd=tmp_path)
    assert "\x1b[" not in env_free.stdout
    lines = env_free.stdout.splitlines()
    header = next(ln for ln in lines if "SVD204" in ln or "SVD101" in ln)
    assert header.startswith("  warning ")
    assert any(len(ln) > 80 for ln in lines)  # long lines stay whole
    assert all(not ln.startswith(" " * 6 + "container") for ln in lines)  # no wrapped tail


def test_plain_consoles_print_brackets_as_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    """rollout-test and probe print the analyses' sentences, which may name a config table
    (``[tool.svcdoctor.hops]``): rich's markup would swallow it."""
    from svcdoctor.cli._output import stdout_console

    stdout_console(markup=False).print("its leg (say so in [tool.svcdoctor.hops]); [bold]x[/]")
    assert capsys.readouterr().out == "its leg (say so in [tool.svcdoctor.hops]); [bold]x[/]\n"
