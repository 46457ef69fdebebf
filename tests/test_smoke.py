from tests.conftest import lint_text


def test_example_style_manifest_has_findings() -> None:
    result = lint_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  selector: {app: a}\n"
        "  ports: [{port: 80}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n"
        "spec:\n  replicas: 2\n  template:\n    metadata: {labels: {app: a}}\n    spec:\n"
        "      containers: [{name: a, image: a}]\n"
    )
    assert {f.rule for f in result.findings} >= {"SVD101", "SVD201"}
