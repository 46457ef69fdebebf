"""The reuse-at-shutdown pattern (issue 29, a regression): failures on kept-alive
connections at the moment each pod exits, after a preStop long enough that there is no
endpoint race, are connection reuse even at a rate below the healthy floor; the same
rollout handled well, and healthy traffic, still have no cause."""

from __future__ import annotations

from pathlib import Path

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Cause, Diagnosis, Verdict
from svcdoctor.model.diagnosis import ReuseDetails
from tests.diagnose.shutdown_reuse import exits_bundle
from tests.factory import write_bundle


def run(tmp_path: Path, **kw: object) -> Diagnosis:
    folder = write_bundle(exits_bundle(**kw), tmp_path / "bundle")  # type: ignore[arg-type]
    return diagnose(read_evidence([str(folder)]))


def test_failures_at_pod_exits_on_kept_alive_connections_are_reuse_at_a_low_rate(
    tmp_path: Path,
) -> None:
    d = run(tmp_path, rate=120.0)
    assert d.summary.error_rate is not None
    assert d.summary.error_rate < d.summary.floor_rate  # below the healthy floor
    assert d.primary is not None, d.next_steps
    assert d.primary.cause is Cause.REUSE
    assert d.primary.verdict is Verdict.LIKELY
    details = d.primary.details
    assert isinstance(details, ReuseDetails)
    at_exit = details.failures_at_exit_on_reused
    assert at_exit is not None
    assert at_exit.own_backend  # paired by the connection's pod, not by time alone
    assert at_exit.failures == 24
    assert d.cause(Cause.RACE).verdict is Verdict.UNLIKELY  # a long preStop: no race


def test_a_few_exit_failures_among_background_ones_are_not_hidden_by_the_floor(
    tmp_path: Path,
) -> None:
    d = run(tmp_path, rate=500.0, noise=4e-4)
    assert d.summary.error_rate is not None
    assert d.summary.error_rate < d.summary.floor_rate
    reuse = d.cause(Cause.REUSE)
    assert reuse.verdict is Verdict.POSSIBLE, reuse.evidence
    assert d.primary is not None
    assert d.primary.cause is Cause.REUSE


def test_the_same_rollout_handled_well_has_no_cause(tmp_path: Path) -> None:
    d = run(tmp_path, rate=120.0, fail_at_exit=False)
    assert d.primary is None, [(a.cause, a.score, a.evidence) for a in d.causes]
    assert d.next_steps[0].startswith("no cause")


def test_background_failures_alone_at_the_floor_have_no_cause(tmp_path: Path) -> None:
    d = run(tmp_path, rate=500.0, noise=4e-4, fail_at_exit=False)
    assert d.primary is None, [(a.cause, a.score, a.evidence) for a in d.causes]
