"""Property tests: arbitrary input never crashes a parser (it may yield nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdoctor.evidence import EvidenceError, detect, read_evidence
from svcdoctor.evidence.kernel import conntrack_stats, kernel_log
from svcdoctor.evidence.kubectl import KubectlEvidence, read_kubectl
from svcdoctor.evidence.proxylogs import envoy_json, envoy_text, nginx_access, nginx_error

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "evidence"
REAL_LINES = [ln for f in sorted(FIXTURES.glob("*")) for ln in f.read_text().splitlines()]

# Lines that look like the real thing, mutated, plus arbitrary text.
mutated = st.builds(
    lambda line, cut, junk: line[:cut] + junk + line[cut + len(junk) :],
    st.sampled_from(REAL_LINES),
    st.integers(0, 300),
    st.text(max_size=12),
)
lines = st.lists(st.one_of(mutated, st.text(max_size=200)), max_size=20).map("\n".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "kind",
                    "items",
                    "metadata",
                    "spec",
                    "status",
                    "reason",
                    "type",
                    "object",
                    "involvedObject",
                    "regarding",
                    "endpoints",
                    "conditions",
                    "lastTimestamp",
                    "eventTime",
                    "name",
                    "podIP",
                    "containerStatuses",
                    "state",
                    "terminated",
                    "exitCode",
                    "addresses",
                    "x",
                ]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=30,
)
fuzz = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fuzz
@given(lines)
def test_line_parsers_never_crash(text: str) -> None:
    for parse in (nginx_access, nginx_error, envoy_text):
        frame, unparsed = parse(text, "fuzz")
        assert unparsed >= 0
        assert set(frame.columns) >= {"ts", "outcome", "role"}
    kernel_log(text, "fuzz", 2026)
    conntrack_stats(text, "fuzz")
    detect(text.encode())


@fuzz
@given(st.lists(json_values, max_size=4))
def test_kubectl_reader_never_crashes(docs: list[object]) -> None:
    read_kubectl(docs, "fuzz", KubectlEvidence())


@fuzz
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(
                [
                    "start_time",
                    "response_code",
                    "response_flags",
                    "upstream_host",
                    "downstream_remote_address",
                    "duration",
                    "x_forwarded_for",
                ]
            ),
            st.none() | st.integers() | st.text(max_size=30),
            max_size=7,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_envoy_json_never_crashes(records: list[dict[str, object]]) -> None:
    envoy_json(records, "fuzz")  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(
    st.binary(max_size=300)
    | lines.map(str.encode)
    | json_values.map(lambda v: json.dumps(v).encode())
)
def test_any_file_is_read_or_named_as_skipped(tmp_path_factory: object, data: bytes) -> None:
    folder = tmp_path_factory.mktemp("fuzz")  # type: ignore[attr-defined]
    (folder / "input").write_bytes(data)
    try:
        ev = read_evidence([str(folder)])
    except EvidenceError as exc:  # nothing usable: the message names the file
        message = str(exc)
        assert "input" in message or "no evidence" in message
        return
    assert ev.sources or ev.problems
