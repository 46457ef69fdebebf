"""Redaction (``evidence.redact``) on lines and objects in the shapes real tools write: each
class of secret goes, and what diagnose reads of the line stays (the same rows)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from svcdoctor.evidence import read_evidence
from svcdoctor.evidence.redact import (
    LAST_APPLIED,
    PLACEHOLDER,
    Kind,
    Redaction,
    Redactor,
    counts_dict,
    redact_file,
    redact_object,
    redact_text,
    redaction_note,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# jwt.io's example token (RFC 7519 shape: header.claims.signature)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwi"
    "aWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
BASIC = "dXNlcjpodW50ZXIy"  # base64("user:hunter2"), RFC 7617
# ingress-nginx's default upstreaminfo format (kubernetes.github.io/ingress-nginx/user-guide/
# nginx-configuration/log-format): $remote_addr - $remote_user [$time_local] "$request"
# $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time
# [$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr
# $upstream_response_length $upstream_response_time $upstream_status $req_id
NGINX = (
    '10.0.0.6 - alice [02/Dec/2026:09:09:31 +0000] "GET /api/orders?id=7&access_token=tok-a1'
    '&page=2 HTTP/1.1" 200 48 "https://shop.example.com/cb?code=oauth-c0de&state=xyz" '
    '"shop/2.1" 312 0.106 [shop-api-80] [] 10.244.2.9:8080, 10.244.3.4:8080 0, 48 0.001, 0.105 '
    "502, 200 6e2d3c0f1a7b5d1e9f3a2b4c5d6e7f80"
)
# Envoy's default format (envoyproxy.io/docs/envoy/latest/configuration/observability/
# access_log/usage#default-format-string; the docs' example line), an S3 presigned URL's
# SigV4 query (docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html)
ENVOY = (
    '[2016-04-15T20:17:00.310Z] "GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential='
    "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
    "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d868"
    '35f20f5db5e7a0b14b8c12bef6f7de2c5c HTTP/2" 204 - 154 0 226 100 "10.0.35.28" "nsq2http" '
    '"cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations" "tcp://10.0.2.1:80"'
)
# Istio's default text format (istio/istio#45802), an Azure SAS ``sig`` in the path
# (learn.microsoft.com/en-us/rest/api/storageservices/create-service-sas)
ISTIO = (
    '[2026-12-02T09:09:32.100Z] "GET /blob?sv=2022-11-02&sr=b&sp=r&sig=aBcD%2BeFgH%3D HTTP/1.1" '
    "503 UC upstream_reset_before_response_started{connection_termination} - "
    '"-" 0 95 1 - "-" "curl/8.5.0" "a4961386-6d84-929d-98bd-c5aee93b5c89" "api.shop:80" '
    '"10.244.1.7:8080" inbound|8080|| 127.0.0.6:43170 10.244.1.7:8080 10.244.0.20:51240 '
    "outbound_.80_._.api.shop.svc.cluster.local default"
)
# Istio's JSON encoding (accessLogEncoding: JSON) with %REQ(AUTHORIZATION)% and
# %REQ(COOKIE)% added to the format, as users do to debug auth
ENVOY_JSON = json.dumps(
    {
        "authority": "api.shop.svc.cluster.local:80",
        "authorization": f"Bearer {JWT}",
        "bytes_received": 0,
        "bytes_sent": 612,
        "cookie": "session=s3ss10n; theme=dark",
        "downstream_remote_address": "10.0.0.20:51234",
        "duration": 4,
        "method": "GET",
        "path": "/api/items?api_key=k-123456",
        "protocol": "HTTP/1.1",
        "request_id": "84961386-6d84-929d-98bd-c5aee93b5c88",
        "response_code": 200,
        "response_flags": "-",
        "start_time": "2026-12-02T09:09:30.409Z",
        "upstream_cluster": "outbound|80||api.shop.svc.cluster.local",
        "upstream_host": "10.244.1.7:8080",
        "upstream_service_time": "3",
        "user_agent": "curl/8.5.0",
        "x_forwarded_for": None,
    }
)


def _rows(folder: Path, name: str, text: str) -> pl.DataFrame:
    folder.mkdir()
    path = folder / name
    path.write_text(text)
    evidence = read_evidence([str(path)])
    assert evidence.problems == ()
    return evidence.requests.drop("source")


def _same_rows(tmp_path: Path, name: str, text: str) -> str:
    """The redacted text, after checking diagnose reads the same rows from both."""
    done = redact_text(text).text
    before, after = _rows(tmp_path / "a", name, text), _rows(tmp_path / "b", name, done)
    assert before.height > 0
    assert before.equals(after)
    return done


# ---------------------------------------------------------------- log lines


def test_nginx_access_line_loses_url_tokens_and_keeps_its_fields(tmp_path: Path) -> None:
    done = _same_rows(tmp_path, "access.log", NGINX + "\n")
    assert "tok-a1" not in done
    assert "oauth-c0de" not in done
    assert f"access_token={PLACEHOLDER}&page=2" in done
    assert f"code={PLACEHOLDER}&state=xyz" in done
    assert done.startswith("10.0.0.6 - alice [02/Dec/2026:09:09:31 +0000]")  # user kept
    assert done.endswith("0.001, 0.105 502, 200 6e2d3c0f1a7b5d1e9f3a2b4c5d6e7f80\n")
    assert redact_text(NGINX).counts == {Kind.URL_TOKENS: 2}


def test_nginx_custom_format_with_authorization_and_cookie() -> None:
    # log_format with "$http_authorization" (no name in the line) and cookie="$http_cookie"
    line = (
        f'10.0.0.5 - - [02/Dec/2026:09:09:30 +0000] "GET / HTTP/1.1" 200 612 "Bearer {JWT}" '
        f'"Basic {BASIC}" cookie="sid=abc123; lang=en" 0.004'
    )
    done = redact_text(line)
    assert done.text == (
        '10.0.0.5 - - [02/Dec/2026:09:09:30 +0000] "GET / HTTP/1.1" 200 612 "Bearer REDACTED" '
        '"Basic REDACTED" cookie="sid=REDACTED; lang=REDACTED" 0.004'
    )
    assert done.counts == {Kind.AUTHORIZATION: 2, Kind.COOKIES: 1}


def test_envoy_default_line_loses_the_presigned_signature(tmp_path: Path) -> None:
    done = _same_rows(tmp_path, "envoy.log", ENVOY + "\n")
    assert "AKIAIOSFODNN7EXAMPLE" not in done
    assert "aeeed9bb" not in done
    assert f"X-Amz-Signature={PLACEHOLDER} HTTP/2" in done
    assert "X-Amz-Date=20130524T000000Z" in done  # not a secret
    assert redact_text(ENVOY).counts == {Kind.URL_TOKENS: 2}


def test_istio_line_loses_the_sas_signature(tmp_path: Path) -> None:
    done = _same_rows(tmp_path, "istio-proxy.log", ISTIO + "\n")
    assert f"sp=r&sig={PLACEHOLDER} HTTP/1.1" in done
    assert done.replace(f"sig={PLACEHOLDER}", "sig=aBcD%2BeFgH%3D") == ISTIO + "\n"


def test_envoy_json_loses_headers_and_stays_json(tmp_path: Path) -> None:
    done = _same_rows(tmp_path, "gateway.jsonl", ENVOY_JSON + "\n")
    row = json.loads(done)
    assert row["authorization"] == f"Bearer {PLACEHOLDER}"
    assert row["cookie"] == f"session={PLACEHOLDER}; theme={PLACEHOLDER}"
    assert row["path"] == f"/api/items?api_key={PLACEHOLDER}"
    assert {k: v for k, v in row.items() if k not in ("authorization", "cookie", "path")} == {
        k: v
        for k, v in json.loads(ENVOY_JSON).items()
        if k not in ("authorization", "cookie", "path")
    }
    assert redact_text(ENVOY_JSON).counts == {
        Kind.AUTHORIZATION: 1,
        Kind.COOKIES: 1,
        Kind.URL_TOKENS: 1,
    }


@pytest.mark.parametrize(
    ("line", "expected", "kind"),
    [
        # Go's httputil.DumpRequest, curl -v, plain application logs
        (
            f"authorization: Bearer {JWT}",
            f"authorization: Bearer {PLACEHOLDER}",
            Kind.AUTHORIZATION,
        ),
        (
            f"> Proxy-Authorization: Basic {BASIC}",
            f"> Proxy-Authorization: Basic {PLACEHOLDER}",
            Kind.AUTHORIZATION,
        ),
        (
            "Authorization: token ghp_16C7e42F292c6912E7710c8",
            "Authorization: token REDACTED",
            Kind.AUTHORIZATION,
        ),
        (
            "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/"
            "s3/aws4_request, SignedHeaders=host;range;x-amz-date, Signature=fe5f80f77d5fa3beca038"
            " status=200",
            "Authorization: AWS4-HMAC-SHA256 REDACTED status=200",
            Kind.AUTHORIZATION,
        ),
        ("Cookie: sid=abc123; theme=dark", "Cookie: sid=REDACTED; theme=REDACTED", Kind.COOKIES),
        (
            "< Set-Cookie: id=a3fWa; Expires=Thu, 21 Oct 2021 07:28:00 GMT; Secure; HttpOnly",
            "< Set-Cookie: id=REDACTED; Expires=Thu, 21 Oct 2021 07:28:00 GMT; Secure; HttpOnly",
            Kind.COOKIES,
        ),
        ('x-api-key="k-9f8e7d"', 'x-api-key="REDACTED"', Kind.AUTHORIZATION),
        (
            "GET /hook?authorization=abc123&page=2 HTTP/1.1",
            "GET /hook?authorization=REDACTED&page=2 HTTP/1.1",
            Kind.AUTHORIZATION,
        ),
        (
            "dial postgres://app:hunter2@db.shop:5432/orders?sslmode=require failed",
            "dial postgres://app:REDACTED@db.shop:5432/orders?sslmode=require failed",
            Kind.URL_PASSWORDS,
        ),
        (
            "fetch https://deploy:s3cr3t@git.example.com/repo.git",
            "fetch https://deploy:REDACTED@git.example.com/repo.git",
            Kind.URL_PASSWORDS,
        ),
        (
            'level=info msg="login ok" user=bob password=hunter2 took=3ms',
            'level=info msg="login ok" user=bob password=REDACTED took=3ms',
            Kind.SECRET_FIELDS,
        ),
        (
            '{"level":"info","client_secret":"cs-123","status":200}',
            '{"level":"info","client_secret":"REDACTED","status":200}',
            Kind.SECRET_FIELDS,
        ),
        (f"claims of {JWT} checked", f"claims of {PLACEHOLDER} checked", Kind.JWTS),
        (
            f"GET /ws?jwt={JWT}&v=2",
            f"GET /ws?jwt={PLACEHOLDER}&v=2",
            Kind.URL_TOKENS,
        ),
    ],
)
def test_each_class_on_its_own_line(line: str, expected: str, kind: Kind) -> None:
    done = redact_text(line)
    assert done.text == expected
    assert done.counts == {kind: 1}


def test_docker_json_file_lines_keep_their_escapes() -> None:
    # the json-file logging driver's line, a JSON log escaped inside it
    line = json.dumps(
        {
            "log": json.dumps({"cookie": "sid=abc", "status": 200}) + "\n",
            "stream": "stdout",
            "time": "2025-07-28T23:45:27.915419813Z",
        }
    )
    done = redact_text(f"{line}\n{json.dumps({'log': f'authorization: Bearer {JWT}'})}")
    first, second = (json.loads(x) for x in done.text.splitlines())
    assert json.loads(first["log"]) == {"cookie": f"sid={PLACEHOLDER}", "status": 200}
    assert second["log"] == f"authorization: Bearer {PLACEHOLDER}"


@pytest.mark.parametrize(
    "line",
    [
        "Basic authentication required; Bearer tokens accepted",
        "Bearer short",
        "GET /?page=2&sort=asc&max_tokens=5 HTTP/1.1",
        'authorization: "-"',
        "ssh://git@github.com/org/repo.git",
        'upstream: "http://10.244.2.9:8080/api/orders", host: "shop.example.com"',
        "x-authorization-mode: rbac",
        "secretName: tls-cert",
    ],
)
def test_what_is_no_secret_stays(line: str) -> None:
    assert redact_text(line) == Redaction(line, {})


def test_redacting_twice_changes_nothing_more() -> None:
    text = "\n".join([NGINX, ENVOY, ISTIO, ENVOY_JSON, f"Cookie: a=b\nauthorization: Bearer {JWT}"])
    once = redact_text(text)
    twice = redact_text(once.text)
    assert twice.text == once.text
    assert twice.counts == {}


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for folder in ("evidence", "cluster/collect")
        for p in (FIXTURES / folder).iterdir()
        if p.suffix in (".log", ".jsonl", ".csv", ".json", ".txt")
    ),
    ids=lambda p: p.name,
)
def test_the_evidence_fixtures_hold_nothing_to_redact(path: Path) -> None:
    text = path.read_text()
    done = redact_file(path.name, text)
    assert done.text == text
    assert done.counts == {}


# ---------------------------------------------------------------- objects


def _pod() -> dict[str, Any]:
    """A pod as ``kubectl get pod -o json`` shows one applied with ``kubectl apply``."""
    container = {
        "name": "app",
        "image": "example/api:1",
        "command": ["/api", "--password=hunter2", "--token", "t0k3n", "--password-file=/pw"],
        "args": [
            "--db-dsn",
            "postgres://app:dbpw@db:5432/shop",
            "--client-secret",
            "cs-42",
            "--max-connection-age=30s",
        ],
        "env": [
            {"name": "DB_PASSWORD", "value": "hunter2"},
            {"name": "DATABASE_URL", "value": "mysql://root:rootpw@mysql/shop"},
            {"name": "GRPC_PORT", "value": "9090"},
            {"name": "MAX_CONNECTION_AGE", "value": "30s"},
            {"name": "API_PIN", "value": "1234"},
            {"name": "LOG_LEVEL", "value": "debug"},
            {"name": "EMPTY", "value": ""},
            {
                "name": "API_KEY",
                "valueFrom": {"secretKeyRef": {"name": "api", "key": "key"}},
            },
        ],
        "readinessProbe": {
            "httpGet": {
                "path": "/ready",
                "port": 8080,
                "httpHeaders": [
                    {"name": "Authorization", "value": "Bearer probe-t0k3n"},
                    {"name": "X-Probe", "value": "1"},
                ],
            }
        },
        "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 5"]}}},
    }
    applied = json.dumps({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [container]}})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "api-7d9f8b6c5-x2x4q",
            "namespace": "shop",
            "annotations": {LAST_APPLIED: applied, "kubectl.kubernetes.io/restartedAt": "x"},
        },
        "spec": {
            "initContainers": [
                {
                    "name": "migrate",
                    "image": "example/migrate:1",
                    "command": ["sh", "-c", "PGPASSWORD=pgpw psql -h db --password pw2 -f /m.sql"],
                }
            ],
            "containers": [container],
            "terminationGracePeriodSeconds": 30,
        },
        "status": {"podIP": "10.244.1.7", "phase": "Running"},
    }


def test_a_pod_spec_loses_env_values_secret_args_and_last_applied() -> None:
    pod = _pod()
    kept = copy.deepcopy(pod)
    done, counts = redact_object(pod)
    assert pod == kept  # a new value; the given one untouched
    c = done["spec"]["containers"][0]
    assert c["command"] == [
        "/api",
        "--password=REDACTED",
        "--token",
        "REDACTED",
        "--password-file=/pw",
    ]
    assert c["args"] == [
        "--db-dsn",
        "postgres://app:REDACTED@db:5432/shop",
        "--client-secret",
        "REDACTED",
        "--max-connection-age=30s",
    ]
    assert {e["name"]: e.get("value") for e in c["env"]} == {
        "DB_PASSWORD": "REDACTED",
        "DATABASE_URL": "REDACTED",
        "GRPC_PORT": "9090",  # a port, read by the rules
        "MAX_CONNECTION_AGE": "30s",  # a duration, read by the rules
        "API_PIN": "REDACTED",  # a number, but the name says secret
        "LOG_LEVEL": "REDACTED",
        "EMPTY": "",
        "API_KEY": None,
    }
    assert c["env"][-1]["valueFrom"] == {"secretKeyRef": {"name": "api", "key": "key"}}
    headers = c["readinessProbe"]["httpGet"]["httpHeaders"]
    assert headers == [
        {"name": "Authorization", "value": "Bearer REDACTED"},
        {"name": "X-Probe", "value": "1"},
    ]
    assert c["lifecycle"] == pod["spec"]["containers"][0]["lifecycle"]
    init = done["spec"]["initContainers"][0]["command"]
    assert init == ["sh", "-c", "PGPASSWORD=REDACTED psql -h db --password REDACTED -f /m.sql"]
    notes = done["metadata"]["annotations"]
    assert notes == {LAST_APPLIED: "REDACTED", "kubectl.kubernetes.io/restartedAt": "x"}
    assert done["status"] == pod["status"]
    assert counts == {
        Kind.ENV: 4,
        Kind.ARGS: 4,
        Kind.URL_PASSWORDS: 1,
        Kind.AUTHORIZATION: 1,
        Kind.SECRET_FIELDS: 1,
        Kind.LAST_APPLIED: 1,
    }
    text = json.dumps(done)
    for secret in ("hunter2", "t0k3n", "dbpw", "cs-42", "rootpw", "1234", "pgpw", "pw2"):
        assert secret not in text


def test_json_files_keep_their_layout() -> None:
    pod = _pod()
    document = json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod]}, indent=2) + "\n"
    done = redact_file("pods.json", document)
    assert done.text.startswith('{\n  "apiVersion": "v1"')
    assert json.loads(done.text)["items"][0]["metadata"]["annotations"][LAST_APPLIED] == "REDACTED"
    records = [{"type": "ADDED", "object": pod}, {"type": "MODIFIED", "object": pod}]
    watch = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    streamed = redact_file("pods.json", watch)
    assert len(streamed.text.splitlines()) == 2
    assert streamed.counts[Kind.ENV] == 8  # counted per occurrence
    assert redact_file("service.json", '{"kind": "Service"}\n').text == '{"kind": "Service"}\n'
    logged = redact_file("client-x.log", f"authorization: Bearer {JWT}\n")
    assert logged.text == "authorization: Bearer REDACTED\n"


# ---------------------------------------------------------------- the bundle's account


def test_counts_and_the_note() -> None:
    counts = counts_dict({Kind.JWTS: 1, Kind.ENV: 12, Kind.AUTHORIZATION: 3, Kind.COOKIES: 0})
    assert counts == {"env values": 12, "authorization headers": 3, "JWTs": 1}
    assert list(counts) == ["env values", "authorization headers", "JWTs"]  # Kind's order
    assert redaction_note(counts) == (
        "redacted 12 env values, 3 authorization headers, 1 JWTs "
        "(as REDACTED; --no-redact keeps them)"
    )
    assert redaction_note({}) == "redacted: nothing secret-looking found"
    assert "--no-redact" in redaction_note(None)


def test_redactor_counts_the_files_of_the_bundle(tmp_path: Path) -> None:
    redactor = Redactor()
    log = f"authorization: Bearer {JWT}\n"
    assert redactor.file(tmp_path / "a.log", log) == "authorization: Bearer REDACTED\n"
    redactor.file(tmp_path / "scratch" / "b.log", log + log)
    redactor.file(tmp_path / "scratch" / "c.log", log)
    redactor.moved(tmp_path / "scratch" / "b.log", tmp_path / "b.log")
    files = [tmp_path / "a.log", tmp_path / "b.log"]
    assert redactor.totals(files) == {"authorization headers": 3}
    redactor.file(tmp_path / "a.log", "nothing\n")  # rewritten: the last write counts
    assert redactor.totals(files) == {"authorization headers": 2}
    off = Redactor(enabled=False)
    assert off.file(tmp_path / "a.log", log) == log
    assert off.totals(files) is None
