"""Kubeconfig files for the lab's API server, shaped as kubectl writes them."""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml


def kubeconfig(
    server: str, ca_pem: bytes, token: str, context: str, namespace: str
) -> dict[str, Any]:
    """One cluster, one token user and one context (the current one) named ``context``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {
                "name": context,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
    }


def write(path: Path, config: dict[str, Any]) -> None:
    """Write ``config`` to ``path`` atomically, readable by its owner only (it holds a token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(config, f, sort_keys=False)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
