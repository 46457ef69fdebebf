"""Bundles are redacted by default: collect over objects and logs carrying secrets (env
values, secret args, last-applied, tokens and headers in proxy and client logs) writes none
of them, counts them in collect.json, and ``diagnose`` says the same of the bundle with and
without redaction. Also real-shaped bundles of every access-log format (``tests/realshapes``)
with secrets injected: the same diagnosis once each file is redacted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.cluster.collect import Request, collect, watch_record
from svcdoctor.cluster.reader import WatchEvent
from svcdoctor.cluster.rollout import Plan
from svcdoctor.cluster.rollout_evidence import Evidence
from svcdoctor.diagnose import Settings, diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.evidence.redact import LAST_APPLIED, PLACEHOLDER, Redactor, redact_file
from svcdoctor.report.diagnosis import render_json
from tests.cluster.test_collect import NGINX_POD, FakeReader, _fixture_objects, _logs
from tests.realshapes import Spec, make_bundle

# jwt.io's example token
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwi"
    "aWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
SECRETS = (
    "hunter2",
    "rootpw",
    "t0k3n-cli",
    "cs-4242",
    "applied-secret",
    "acc-tok-1",
    "sig-abc-2",
    "sid-c00kie",
    JWT,
)
ENV = [
    {"name": "DB_PASSWORD", "value": "hunter2"},
    {"name": "DATABASE_URL", "value": "mysql://root:rootpw@mysql:3306/shop"},
    {"name": "GRPC_PORT", "value": "8080"},  # read by SVD3xx: makes the port gRPC
    {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "api", "key": "key"}}},
]
ARGS = ["--listen=:8080", "--token", "t0k3n-cli", "--client-secret=cs-4242"]


def _secret_container(container: dict[str, Any]) -> None:
    container["env"] = [dict(e) for e in ENV]
    container["args"] = list(ARGS)


def _objects() -> list[dict[str, Any]]:
    objects = _fixture_objects()
    for obj in objects:
        meta = obj["metadata"]
        if obj["kind"] == "Pod" and meta["name"].startswith("api-"):
            _secret_container(obj["spec"]["containers"][0])
            applied = {"kind": "Pod", "spec": {"env": [{"name": "X", "value": "applied-secret"}]}}
            meta.setdefault("annotations", {})[LAST_APPLIED] = json.dumps(applied)
        if obj["kind"] in ("Deployment", "ReplicaSet"):
            _secret_container(obj["spec"]["template"]["spec"]["containers"][0])
    return objects


def _secret_logs() -> dict[tuple[str, str, str], str]:
    logs = _logs()
    logs[NGINX_POD] = logs[NGINX_POD].replace(
        '"GET /api/items HTTP/1.1"', '"GET /api/items?access_token=acc-tok-1&page=2 HTTP/1.1"'
    )
    sidecar = ("shop", "api-7d9f8b6c5-x2x4q", "istio-proxy")
    logs[sidecar] = logs[sidecar].replace(
        '"GET /api/items HTTP/1.1"', '"GET /api/items?sig=sig-abc-2 HTTP/1.1"'
    )
    client = ("shop", "loadgen-6b7c8d9e0-zzzzz", "load")
    logs[client] = logs[client].replace(
        '"conn": "c1"}',
        f'"conn": "c1", "authorization": "Bearer {JWT}", "cookie": "sid=sid-c00kie"}}',
    )
    return logs


def _collect(tmp_path: Path, redact: bool) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / ("redacted" if redact else "kept")
    request = Request("shop", "api", out, client_logs="app.kubernetes.io/component=load")
    result = collect(FakeReader(_objects(), _secret_logs()), request, redactor=Redactor(redact))
    return out, result


def _verdict(bundle: Path) -> Any:
    """diagnose's JSON of the bundle, its folder's name left out."""
    text = render_json(diagnose(read_evidence([str(bundle)]), Settings()))
    return json.loads(text.replace(str(bundle), "BUNDLE"))


def _texts(bundle: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(bundle.iterdir()) if p.is_file()}


def test_collect_redacts_every_secret_and_diagnose_says_the_same(tmp_path: Path) -> None:
    kept, plain = _collect(tmp_path, redact=False)
    redacted, result = _collect(tmp_path, redact=True)
    assert plain["redacted"] is None
    everything = "".join(_texts(kept).values())
    for secret in SECRETS:  # the test's secrets reach the bundle when kept
        assert secret in everything, secret
    for name, text in _texts(redacted).items():
        for secret in SECRETS:
            assert secret not in text, (name, secret)
    assert result["redacted"] == {
        "env values": 10,  # DB_PASSWORD, DATABASE_URL: 3 pods, the ReplicaSet, the Deployment
        "command arguments": 10,  # --token's and --client-secret's values, the same 5
        "last-applied-configuration": 3,
        "authorization headers": 1,
        "cookies": 1,
        "URL tokens": 5,  # 2 access and 1 error lines of ingress-nginx, 2 sidecar lines
    }
    assert read_evidence([str(redacted)]).problems == ()
    assert _verdict(kept) == _verdict(redacted)
    pods = json.loads((redacted / "pods.json").read_text())["items"]
    app = pods[0]["spec"]["containers"][0]
    assert [e.get("value") for e in app["env"]] == [PLACEHOLDER, PLACEHOLDER, "8080", None]
    assert app["args"] == [
        "--listen=:8080",
        "--token",
        PLACEHOLDER,
        f"--client-secret={PLACEHOLDER}",
    ]


def test_the_grpc_env_value_reaches_the_diagnosis(tmp_path: Path) -> None:
    """The comparison above has teeth: a value the rules read shows in the verdict."""
    redacted, _ = _collect(tmp_path, redact=True)
    assert "GRPC_PORT=8080" in json.dumps(_verdict(redacted))


@pytest.fixture
def connected(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = FakeReader(_objects(), _secret_logs())
    monkeypatch.setattr("svcdoctor.cluster.api.connect", lambda **_: reader)


@pytest.mark.usefixtures("connected")
def test_cli_says_what_it_redacted_and_no_redact_keeps_it(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(cli, ["collect", "-n", "shop", "api", "--out", str(tmp_path / "a")])
    assert done.exit_code == 0, done.output
    line = next(x for x in done.output.splitlines() if x.startswith("redacted "))
    assert line.startswith("redacted 10 env values, 10 command arguments, 3 last-applied")
    assert line.endswith("(as REDACTED; --no-redact keeps them)")
    assert "hunter2" not in (tmp_path / "a" / "pods.json").read_text()
    args = ["collect", "-n", "shop", "api", "--out", str(tmp_path / "b"), "--no-redact"]
    kept = runner.invoke(cli, [*args, "-o", "json"])
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.output)["redacted"] is None
    assert json.loads((tmp_path / "b" / "collect.json").read_text())["redacted"] is None
    assert "hunter2" in (tmp_path / "b" / "pods.json").read_text()
    shown = runner.invoke(cli, args)
    assert "not redacted (--no-redact): the bundle may hold secrets" in shown.output


def test_rollout_test_has_no_redact() -> None:
    done = CliRunner().invoke(cli, ["rollout-test", "--help"])
    assert "--no-redact" in done.output


@pytest.mark.parametrize("redact", [True, False])
def test_rollout_test_bundle_is_redacted_and_counted_once(tmp_path: Path, redact: bool) -> None:
    """rollout-test writes the watched pods itself, then collect's snapshot beside them (its
    own pods.json discarded): each file of the bundle is counted once."""
    objects = _objects()
    pods = [o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"].startswith("api-")]
    records = [watch_record(WatchEvent("ADDED", p, 1796202570.0), True) for p in pods]
    rows = [{"ts": 1796202570.0 + i, "outcome": "ok", "latency_ms": 1.0} for i in range(5)]
    out = tmp_path / "bundle"
    evidence = Evidence(Plan("shop", "deployments", "api", out, redact=redact), "api", 0.0)
    evidence.first(records, [], rows, "agent-x", [])
    first = json.loads((out / "collect.json").read_text())["redacted"]
    notes: list[str] = []
    evidence.complete(FakeReader(objects, _secret_logs()), notes)  # type: ignore[arg-type]
    manifest = json.loads((out / "collect.json").read_text())
    texts = _texts(out)
    if not redact:
        assert first is None
        assert manifest["redacted"] is None
        assert "hunter2" in texts["pods.json"]
        assert notes[-1].startswith("not redacted (--no-redact)")
        return
    assert first == {"env values": 6, "command arguments": 6, "last-applied-configuration": 3}
    assert manifest["redacted"] == {
        "env values": 10,  # 3 pods (rollout-test's pods.json), the ReplicaSet, the Deployment
        "command arguments": 10,
        "last-applied-configuration": 3,
        "URL tokens": 5,
    }
    assert notes[-1] == (
        "redacted 10 env values, 10 command arguments, 3 last-applied-configuration, "
        "5 URL tokens (as REDACTED; --no-redact keeps them)"
    )
    assert notes[-1] in manifest["notes"]
    for name, text in texts.items():
        for secret in SECRETS:
            assert secret not in text, (name, secret)


# ---------------------------------------------------------------- real-shaped bundles


def _inject(folder: Path) -> None:
    """Secrets where real logs carry them: a token in each request's URL (the path diagnose
    never reads), a JWT in the referer, Authorization and Cookie in Envoy's JSON."""
    for path in folder.iterdir():
        text = path.read_text()
        if path.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines()]
            for row in rows:
                row["path"] += "?access_token=acc-tok-1"
                row["authorization"] = f"Bearer {JWT}"
                row["cookie"] = "sid=sid-c00kie; theme=dark"
            text = "".join(json.dumps(r) + "\n" for r in rows)
        elif path.suffix == ".log" or path.name == "access.log":
            text = text.replace(" HTTP/1.1", "?sig=sig-abc-2&v=1 HTTP/1.1")
            text = text.replace('"-" "', f'"https://shop.example.com/?t={JWT}" "')
        path.write_text(text)


@pytest.mark.parametrize("fmt", ["nginx", "nginx-kubectl-ts", "istio", "envoy-json"])
def test_real_shaped_bundles_diagnose_the_same_redacted(tmp_path: Path, fmt: str) -> None:
    bundle = tmp_path / "bundle"
    make_bundle(Spec("race", fmt, seed=3, max_requests=3000), bundle)
    _inject(bundle)
    texts = _texts(bundle)
    assert any(JWT in t for t in texts.values())
    before = _verdict(bundle)
    assert before["primary_cause"] == "race"
    for name, text in texts.items():
        (bundle / name).write_text(redact_file(name, text).text)
    for name, text in _texts(bundle).items():
        for secret in SECRETS:
            assert secret not in text, (name, secret)
    after = _verdict(bundle)
    assert after == before, _changed(before, after)


def _changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The fields (one level into dicts) that differ: what a failure should name."""
    changed: dict[str, Any] = {}
    for key in before.keys() | after.keys():
        old, new = before.get(key), after.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed |= {f"{key}.{k}": v for k, v in _changed(old, new).items()}
        elif old != new:
            changed[key] = (old, new)
    return changed
