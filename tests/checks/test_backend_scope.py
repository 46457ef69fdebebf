"""The Service/backend rules judge the objects applied together with a Service (its file,
its folder, its folder tree), not every look-alike anywhere in a repository."""

from __future__ import annotations

from pathlib import Path

from svcdoctor.checks import Settings
from svcdoctor.checks._carrying import webhook_calls
from svcdoctor.manifests import build_inventory, load
from tests.conftest import lint_paths

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {{name: {name}}}
spec:
  selector: {{{selector}}}
  ports: [{{port: 9200}}]
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 2
  template:
    metadata: {{labels: {{{labels}}}}}
    spec:
      containers: [{{name: app, image: {image}}}]
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _findings(root: Path, rule: str) -> list[tuple[str, str]]:
    result = lint_paths([str(root)], Settings(enabled=frozenset({rule})))
    return [
        (str(Path(f.location.file).relative_to(root)), f.severity.value)
        for f in result.findings
        if f.rule == rule
    ]


def test_copies_in_a_sibling_folder_are_not_a_mix(tmp_path: Path) -> None:
    # kubernetes/examples elasticsearch: a single-node variant beside production_cluster/
    _write(tmp_path / "es-svc.yaml", SERVICE.format(name="es", selector="component: es"))
    _write(
        tmp_path / "es.yaml",
        DEPLOYMENT.format(name="es", labels="component: es", image="elasticsearch:8"),
    )
    for role, image in (("master", "elasticsearch:8"), ("client", "es-client:8")):
        _write(
            tmp_path / "production_cluster" / f"es-{role}.yaml",
            DEPLOYMENT.format(name=f"es-{role}", labels="component: es", image=image),
        )
    assert _findings(tmp_path, "SVD206") == []


def test_two_apps_in_the_services_folder_are_a_mix(tmp_path: Path) -> None:
    _write(tmp_path / "app" / "svc.yaml", SERVICE.format(name="db", selector="app: db"))
    _write(
        tmp_path / "app" / "postgres.yaml",
        DEPLOYMENT.format(name="postgres", labels="app: db", image="postgres:16"),
    )
    _write(
        tmp_path / "app" / "redis.yaml",
        DEPLOYMENT.format(name="redis", labels="app: db", image="redis:7"),
    )
    assert _findings(tmp_path, "SVD206") == [("app/svc.yaml", "warning")]


def test_alternative_files_of_one_workload_are_not_a_mix(tmp_path: Path) -> None:
    _write(tmp_path / "svc.yaml", SERVICE.format(name="web", selector="app: web"))
    _write(tmp_path / "web.yaml", DEPLOYMENT.format(name="web", labels="app: web", image="a:1"))
    _write(
        tmp_path / "web-gpu.yaml",
        DEPLOYMENT.format(name="web", labels="app: web", image="a-gpu:1"),
    )
    assert _findings(tmp_path, "SVD206") == []


def test_partial_inputs_are_decided_per_folder_tree(tmp_path: Path) -> None:
    # a whole-repository run always has some workload in `default`: that is no evidence
    _write(tmp_path / "a" / "svc.yaml", SERVICE.format(name="api", selector="app: api"))
    _write(
        tmp_path / "b" / "other.yaml",
        DEPLOYMENT.format(name="other", labels="app: other", image="other:1"),
    )
    _write(
        tmp_path / "c" / "svc.yaml",
        SERVICE.format(name="web", selector="app: web, tier: front"),
    )
    _write(
        tmp_path / "c" / "sub" / "web.yaml",
        DEPLOYMENT.format(name="web", labels="app: web2, tier: front", image="web:1"),
    )
    found = dict(_findings(tmp_path, "SVD207"))
    assert found == {"a/svc.yaml": "info", "c/svc.yaml": "info"}
    result = lint_paths([str(tmp_path)], Settings(enabled=frozenset({"SVD207"})))
    messages = {Path(f.location.file).parent.name: f.message for f in result.findings}
    assert "partial inputs" in messages["a"]
    assert "partial inputs" not in messages["c"]
    assert all("has no endpoints" not in m for m in messages.values())


def test_a_service_alone_in_a_test_folder_is_a_test_input(tmp_path: Path) -> None:
    """Kong's internal/dataplane/testdata/golden/*/in.yaml: a translator test's input Services,
    never applied, no workload meant (judge332): no SVD207; a typo beside its workload there
    is still one (a note, as any finding in a test's folder)."""
    golden = tmp_path / "internal" / "dataplane" / "testdata" / "golden" / "grpc"
    _write(golden / "in.yaml", SERVICE.format(name="grpcbin", selector="app: grpcbin"))
    inputs = tmp_path / "translator" / "gateway" / "testutils" / "inputs"  # kgateway (judge343)
    _write(inputs / "http-routing.yaml", SERVICE.format(name="example", selector="app: example"))
    policy = tmp_path / "test" / "conformance" / "chainsaw" / "validate"  # Kyverno (judge352)
    _write(policy / "resource.yaml", SERVICE.format(name="bad", selector="app: bad"))
    _write(tmp_path / "examples" / "svc.yaml", SERVICE.format(name="api", selector="app: api"))
    typo = tmp_path / "test" / "typo"
    _write(typo / "svc.yaml", SERVICE.format(name="web", selector="app: wbe"))
    _write(typo / "web.yaml", DEPLOYMENT.format(name="web", labels="app: web", image="web:1"))
    assert dict(_findings(tmp_path, "SVD207")) == {
        "examples/svc.yaml": "info",
        "test/typo/svc.yaml": "info",
    }


def test_a_workload_beside_it_in_the_namespace_it_names_is_no_partial_input(
    tmp_path: Path,
) -> None:
    """NVIDIA/gpu-operator's config/rbac Service and config/manager Deployment, both in
    `system`: the inputs hold its namespace's workload, with other labels (judge107)."""
    named = "metadata: {name: api, namespace: system}"
    _write(
        tmp_path / "rbac" / "svc.yaml",
        SERVICE.format(name="api", selector="app: api").replace("metadata: {name: api}", named),
    )
    _write(
        tmp_path / "manager" / "manager.yaml",
        DEPLOYMENT.format(name="op", labels="app: op", image="op:1").replace(
            "metadata: {name: op}", "metadata: {name: op, namespace: system}"
        ),
    )
    result = lint_paths([str(tmp_path)], Settings(enabled=frozenset({"SVD207"})))
    (finding,) = result.findings
    assert "partial inputs" not in finding.message


def test_a_templated_document_beside_it_may_be_its_workload(tmp_path: Path) -> None:
    """opsgy/loki-rule-operator: deploy/deployment.yaml holds `{{ $TAG }}`, which lint does
    not read (SVD002); the Service beside it selects that workload's pods (judge108)."""
    _write(tmp_path / "svc.yaml", SERVICE.format(name="op", selector="app: op"))
    templated = DEPLOYMENT.format(name="op", labels="app: op", image="op:1")
    _write(tmp_path / "deployment.yaml", templated.replace("app: op", "app: op, v: {{ $TAG }}"))
    _write(tmp_path / "other" / "svc.yaml", SERVICE.format(name="web", selector="app: web"))
    assert dict(_findings(tmp_path, "SVD207")) == {"other/svc.yaml": "info"}


def test_a_broken_document_beside_it_may_be_its_workload(tmp_path: Path) -> None:
    """hwameistor's minio-distributed.yaml: two rendered documents run together without
    `---` (SVD001), the StatefulSet the Services select among them (judge373)."""
    workload = DEPLOYMENT.format(name="minio", labels="app: minio", image="minio:1")
    broken = workload.replace("spec:\n  replicas", "spec:\n  replicas: 2\nkind: x\n  replicas", 1)
    _write(
        tmp_path / "minio.yaml",
        SERVICE.format(name="minio", selector="app: minio") + "---\n" + broken,
    )
    _write(tmp_path / "other" / "svc.yaml", SERVICE.format(name="web", selector="app: web"))
    assert dict(_findings(tmp_path, "SVD207")) == {"other/svc.yaml": "info"}


def test_a_namespace_the_inputs_run_no_pod_in_is_another_installers(tmp_path: Path) -> None:
    """IBM/cloud-native-starter's security/IKS re-exposes Istio's Grafana and Kiali in
    istio-system, whose pods Istio's installer makes (judge381); a Service of a namespace
    the inputs do run pods in stays flagged."""
    kiali = SERVICE.format(name="kiali", selector="app: kiali")
    _write(
        tmp_path / "iks" / "svc.yaml",
        kiali.replace("{name: kiali}", "{name: kiali, namespace: istio-system}"),
    )
    _write(tmp_path / "app" / "svc.yaml", SERVICE.format(name="web", selector="app: web"))
    _write(
        tmp_path / "app" / "deploy.yaml",
        DEPLOYMENT.format(name="api", labels="app: api", image="api:1"),
    )
    assert dict(_findings(tmp_path, "SVD207")) == {"app/svc.yaml": "info"}


def test_a_near_miss_beside_the_service_is_a_warning(tmp_path: Path) -> None:
    _write(tmp_path / "svc.yaml", SERVICE.format(name="checkout", selector="app: chekout"))
    _write(
        tmp_path / "deploy.yaml",
        DEPLOYMENT.format(name="checkout", labels="app: checkout", image="checkout:1"),
    )
    assert _findings(tmp_path, "SVD207") == [("svc.yaml", "warning")]


DAEMONSET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}}}
spec:
  template:
    metadata: {{labels: {{{labels}}}}}
    spec:
      containers: [{{name: app, image: {image}}}]
"""


def test_alternative_variants_in_other_folders_do_not_add_up(tmp_path: Path) -> None:
    # issue 30: a Deployment variant and a DaemonSet variant of one component, both matched
    # by the Service: the DaemonSet's pods hid the single-replica Deployment
    _write(tmp_path / "svc.yaml", SERVICE.format(name="proxy", selector="app: proxy"))
    one = DEPLOYMENT.format(name="proxy", labels="app: proxy", image="proxy:1")
    _write(tmp_path / "deployment" / "proxy.yaml", one.replace("replicas: 2", "replicas: 1"))
    _write(
        tmp_path / "daemonset" / "proxy.yaml",
        DAEMONSET.format(name="proxy", labels="app: proxy", image="proxy:1"),
    )
    result = lint_paths([str(tmp_path)], Settings(enabled=frozenset({"SVD204"})))
    assert [(f.location.file.endswith("svc.yaml"), f.severity.value) for f in result.findings] == [
        (True, "warning")
    ]
    assert "Deployment proxy: 1 replica" in result.findings[0].message


def test_two_one_replica_variants_are_still_one_pod(tmp_path: Path) -> None:
    _write(tmp_path / "svc.yaml", SERVICE.format(name="web", selector="app: web"))
    one = DEPLOYMENT.format(name="web", labels="app: web", image="web:1")
    _write(tmp_path / "plain" / "web.yaml", one.replace("replicas: 2", "replicas: 1"))
    rollout = one.replace("apps/v1", "argoproj.io/v1alpha1").replace("Deployment", "Rollout")
    _write(tmp_path / "canary" / "web.yaml", rollout.replace("replicas: 2", "replicas: 1"))
    assert _findings(tmp_path, "SVD204") == [("svc.yaml", "warning")]


def test_workloads_of_one_folder_are_applied_together(tmp_path: Path) -> None:
    # one folder is one `kubectl apply -f`: a Deployment and a DaemonSet there both run
    _write(tmp_path / "svc.yaml", SERVICE.format(name="proxy", selector="app: proxy"))
    one = DEPLOYMENT.format(name="proxy", labels="app: proxy", image="proxy:1")
    _write(tmp_path / "proxy.yaml", one.replace("replicas: 2", "replicas: 1"))
    _write(
        tmp_path / "proxy-ds.yaml",
        DAEMONSET.format(name="proxy", labels="app: proxy", image="proxy:1"),
    )
    assert _findings(tmp_path, "SVD204") == []


def test_an_autoscaler_scales_its_own_variant_not_a_sibling_folder_s(tmp_path: Path) -> None:
    """ContainerSolutions/k8s-deployment-strategies canary/: istio/ holds an HPA (min 1) of
    my-app-v1, native/ its own my-app-v1 of 2 replicas: the HPA scales istio's copy only."""
    hpa = (
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\n"
        "metadata: {name: my-app-v1}\nspec:\n  minReplicas: 1\n  maxReplicas: 4\n"
        "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: my-app-v1}\n"
    )
    for variant in ("istio", "native"):
        _write(tmp_path / variant / "svc.yaml", SERVICE.format(name="my-app", selector="app: a"))
        _write(
            tmp_path / variant / "app.yaml",
            DEPLOYMENT.format(name="my-app-v1", labels="app: a", image="example/app:1"),
        )
    _write(tmp_path / "istio" / "hpa.yaml", hpa)
    assert _findings(tmp_path, "SVD204") == [("istio/svc.yaml", "warning")]


def test_an_operator_s_asset_is_a_note(tmp_path: Path) -> None:
    """openshift/kueue-operator's bindata/assets/kueue-operator/deployment.yaml (judge143):
    the operator applies its embedded manifest and sets the replicas in code; one replica
    there is an info that says so. The same files outside bindata/ are a warning; under
    assets/ they are a note only where the image is a placeholder the operator fills."""
    one = DEPLOYMENT.format(name="web", labels="app: web", image='"${IMAGE}"')
    for folder, expected in (
        ("bindata/assets/op", "info"),
        ("assets/op", "info"),
        ("deploy", "warning"),
    ):
        root = tmp_path / folder.replace("/", "-")
        _write(root / folder / "svc.yaml", SERVICE.format(name="web", selector="app: web"))
        _write(root / folder / "web.yaml", one.replace("replicas: 2", "replicas: 1"))
        assert _findings(root, "SVD204") == [(f"{folder}/svc.yaml", expected)], folder
    plain = tmp_path / "plain"
    _write(plain / "assets/svc.yaml", SERVICE.format(name="web", selector="app: web"))
    _write(
        plain / "assets/web.yaml",
        one.replace("replicas: 2", "replicas: 1").replace('"${IMAGE}"', "web:1"),
    )
    assert _findings(plain, "SVD204") == [("assets/svc.yaml", "warning")]


def test_an_operator_s_asset_with_its_replicas_unset_is_no_rollout_gap(tmp_path: Path) -> None:
    """openshift/cluster-authentication-operator's bindata/oauth-apiserver/deploy.yaml
    (judge272): replicas unset because the operator sets them in code (one per control-plane
    node), maxUnavailable 1: not "the only pod is removed" (no SVD106). Outside bindata/
    the same file leaves the API default, 1, and is."""
    unset = DEPLOYMENT.format(name="api", labels="app: api", image="example/api:1").replace(
        "  replicas: 2\n",
        "  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1, maxSurge: 0}}\n",
    )
    for folder, found in (("bindata/oauth-apiserver", []), ("deploy", [("deploy/api.yaml",)])):
        root = tmp_path / folder.replace("/", "-")
        _write(root / folder / "svc.yaml", SERVICE.format(name="api", selector="app: api"))
        _write(root / folder / "api.yaml", unset)
        assert [f[:1] for f in _findings(root, "SVD106")] == found, folder


WEBHOOK = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: pyrra}
webhooks:
  - name: slo.pyrra.dev
    failurePolicy: Fail
    clientConfig: {service: {name: pyrra-kubernetes, namespace: monitoring, port: 9443}}
"""


def test_a_webhook_calls_the_copy_of_its_service_nearest_it(tmp_path: Path) -> None:
    """pyrra's examples/kubernetes/manifests-webhook registers a webhook on Service
    pyrra-kubernetes; the variant in manifests/ runs without webhooks: its copy of the
    Service is not called (judge334)."""
    service = SERVICE.format(name="pyrra-kubernetes", selector="app: pyrra").replace(
        "{name: pyrra-kubernetes}", "{name: pyrra-kubernetes, namespace: monitoring}"
    )
    for variant in ("manifests", "manifests-webhook"):
        _write(tmp_path / variant / "service.yaml", service)
    _write(tmp_path / "manifests-webhook" / "webhook.yaml", WEBHOOK)
    inventory = build_inventory(load([str(tmp_path)]))
    called = {
        Path(s.location.file).parent.name: bool(webhook_calls(inventory, s))
        for s in inventory.services
    }
    assert called == {"manifests": False, "manifests-webhook": True}
