"""Exit 2 is for usage and inputs that cannot be read; a finding, whatever its severity or
rule, exits by --fail-on, and --exit-zero always means 0 for findings (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli

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


def test_unreadable_input_is_still_exit_2_even_with_exit_zero(tmp_path: Path) -> None:
    code, out = _lint(tmp_path, BROKEN, "--exit-zero")
    assert code == 2, out
    assert "SVD001" in out
