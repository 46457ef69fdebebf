"""Linkerd's proxy access log (annotation ``config.linkerd.io/access-log``: apache or json),
read from files in the shapes of Linkerd's documentation, with failures added."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdoctor.evidence import detect, read_evidence
from svcdoctor.evidence.proxylogs import linkerd_apache_lines, linkerd_json_lines
from svcdoctor.evidence.times import rfc3339

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "evidence"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("linkerd-proxy-apache.log", "linkerd"), ("linkerd-proxy.jsonl", "linkerd-json")],
)
def test_linkerd_formats_are_detected_by_content(name: str, fmt: str) -> None:
    assert detect((FIXTURES / name).read_bytes()) == fmt


def test_linkerd_apache_lines() -> None:
    ev = read_evidence([str(FIXTURES / "linkerd-proxy-apache.log")])
    assert [s.format for s in ev.sources] == ["linkerd"]
    rows = ev.requests.sort("ts").to_dicts()
    assert [r["status"] for r in rows] == [200, 303, 200, 303, 200, 502, 503, 504]
    assert [r["outcome"] for r in rows] == [*["ok"] * 5, "http_error", "http_error", "timeout"]
    assert rows[0]["ts"] == pytest.approx(rfc3339("2022-08-23T20:28:20.071809491Z"))
    assert rows[0]["client"] == "10.42.0.63"
    assert rows[0]["conn"] == "10.42.0.63:51160"
    assert rows[0]["upstream"] == "webapp:7000"
    assert rows[0]["backend"] is None  # the Service's name: the answering pod is the log's
    assert rows[4]["upstream"] is None  # "/ping": the kubelet's probe names no authority
    assert rows[-1]["backend"] == "10.42.0.69:7000"  # addressed to the pod itself
    assert rows[0]["latency_ms"] is None  # the apache shape has no duration
    # the proxy's own log lines (stdout, interleaved by kubectl logs) are not evidence
    assert any("2 other lines: not evidence" in p for p in ev.problems), ev.problems


def test_linkerd_json_lines() -> None:
    ev = read_evidence([str(FIXTURES / "linkerd-proxy.jsonl")])
    assert [s.format for s in ev.sources] == ["linkerd-json"]
    assert not ev.problems
    rows = ev.requests.sort("ts")
    assert rows.get_column("status").to_list() == [200, 303, 200, 303, 200, 502, 504]
    failed = rows.filter(pl.col("outcome") != "ok")
    assert failed.select("outcome", "conn", "upstream").rows() == [
        ("http_error", "10.42.0.70:33010", "webapp:7000"),
        ("timeout", "10.42.0.70:33010", "webapp:7000"),
    ]
    first = rows.row(0, named=True)
    assert first["latency_ms"] == pytest.approx(14.441135)  # total_ns
    assert first["client"] == "10.42.0.70"
    probe = rows.filter(pl.col("client") == "10.42.0.1").row(0, named=True)
    assert probe["backend"] == "10.42.0.69:7000"


def test_linkerd_lines_with_kubectl_prefixes_and_broken_records(tmp_path: Path) -> None:
    """``kubectl logs --prefix --timestamps`` lines parse; a cut JSON record is counted."""
    lines = (FIXTURES / "linkerd-proxy.jsonl").read_text().splitlines()
    stamp = "2022-08-23T20:33:42.400000000Z"
    text = "\n".join(f"[pod/webapp-1/linkerd-proxy] {stamp} {line}" for line in lines)
    path = tmp_path / "linkerd-proxy-webapp-1.log"
    path.write_text(text + '\n{"client.addr":"10.42.0.70:1","timestamp":\n')
    ev = read_evidence([str(path)])
    assert ev.requests.height == len(lines)
    assert any("1 lines look like linkerd-json" in p for p in ev.problems), ev.problems


def test_the_answering_pod_is_the_backend_when_kubectl_names_it(tmp_path: Path) -> None:
    """``kubectl logs -l app=webapp -c linkerd-proxy --prefix``: each line names its pod,
    the backend that answered (apache and json alike)."""
    for name in ("linkerd-proxy-apache.log", "linkerd-proxy.jsonl"):
        lines = (FIXTURES / name).read_text().splitlines()
        text = "\n".join(f"[pod/webapp-{i % 2}/linkerd-proxy] {ln}" for i, ln in enumerate(lines))
        path = tmp_path / f"prefixed-{name}.log"
        path.write_text(text + "\n")
        rows = read_evidence([str(path)]).requests
        assert set(rows.get_column("backend").cast(pl.Utf8).to_list()) == {"webapp-0", "webapp-1"}


_APACHE = (FIXTURES / "linkerd-proxy-apache.log").read_text().splitlines()[2]
_JSON = (FIXTURES / "linkerd-proxy.jsonl").read_text().splitlines()[0]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=80),
            st.builds(lambda cut: _APACHE[:cut], st.integers(0, len(_APACHE))),
            st.builds(lambda cut: _JSON[:cut], st.integers(0, len(_JSON))),
            st.builds(
                lambda v: _JSON.replace('"status":200', f'"status":{v}'),
                st.sampled_from(["null", '"x"', "[]", "1e99", '"503"']),
            ),
        ),
        max_size=8,
    )
)
def test_linkerd_parsers_never_crash(lines: list[str]) -> None:
    """Cut, mistyped or foreign lines: rows or a count of skipped lines, never an error."""
    frame = pl.DataFrame({"line": lines}, schema={"line": pl.Utf8})
    for parse in (linkerd_apache_lines, linkerd_json_lines):
        rows, bad = parse(frame, "fuzz")
        assert rows.height + bad <= len(lines)
