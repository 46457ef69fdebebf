"""A folder of complete example files (each with its workloads and Services, such as Kong's
examples/): one example's Service is not backed by another example's workload (judge34
class G), while split files of one app (a Service file beside a Deployment file) still are."""

from __future__ import annotations

from pathlib import Path

from svcdoctor.manifests import build_inventory, load

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {app}}}}}
  template:
    metadata: {{labels: {{app: {app}}}}}
    spec:
      containers:
      - {{name: httpbin, image: kong/httpbin:0.1.0, ports: [{{containerPort: 80}}]}}
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {{name: {name}}}
spec:
  selector: {{app: {app}}}
  ports: [{{port: 80, targetPort: 80}}]
"""


def _targets(tmp_path: Path, files: dict[str, str]) -> dict[str, list[str]]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    inventory = build_inventory(load([str(tmp_path)]))
    return {s.ref.name: [w.ref.name for w in inventory.targeted(s)] for s in inventory.services}


def test_an_example_service_is_not_backed_by_another_examples_workload(tmp_path: Path) -> None:
    one = DEPLOYMENT.format(name="httpbin", app="httpbin")
    one += "---\n" + SERVICE.format(name="httpbin", app="httpbin")
    # upstream typo (Kong examples/kong-upstream-policy-httproute.yaml): selects app=httpbin
    two = DEPLOYMENT.format(name="httpbin-test", app="httpbin-test")
    two += "---\n" + SERVICE.format(name="httpbin-test", app="httpbin")
    found = _targets(tmp_path, {"example-one.yaml": one, "example-two.yaml": two})
    assert found == {"httpbin": ["httpbin"], "httpbin-test": []}


def test_split_files_of_one_app_are_still_linked(tmp_path: Path) -> None:
    files = {
        "deployment.yaml": DEPLOYMENT.format(name="web", app="web"),
        "service.yaml": SERVICE.format(name="web", app="web"),
    }
    assert _targets(tmp_path, files) == {"web": ["web"]}
